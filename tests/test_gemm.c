/* GEMM: every path (small, packed generic, packed AVX-512, auto) against the
 * reference triple loop, over transposes, alpha/beta, awkward sizes and
 * strided leading dimensions; determinism across thread counts; errors.
 *
 * Tolerance (written down): both the reference and a fast path sum K
 * products in f32, in different orders, so each is within K*u*S of the exact
 * value, S = |alpha| * sum_p |a_ip b_pj| + |beta c_ij|, u = 2^-24. We accept
 *   |fast - ref| <= 2 * (K + 2) * u * S   (+ 1e-30 for S = 0)
 * per element (the +2 covers the alpha/beta rounding). For K = 512 that is
 * about 6e-5 * S, tighter than 1e-5*sqrt(K)*S below K ~ 7000. The small path
 * sums in the reference's order and must match it bit for bit. */
#include <stdint.h>

#include "harness.h"
#include "kernels/gemm/gemm_internal.h"
#include "kernels/kern.h"

static const double U = 1.0 / 16777216.0; /* 2^-24 */

typedef struct {
  int64_t M, N, K;
  int ta, tb;
  float alpha, beta;
  int64_t pad; /* extra elements at the end of every row (lda, ldb, ldc) */
} gemm_case;

/* Runs one case on `path` and on the reference; returns 1 if within the
 * bound (bit-identical when exact), 0 otherwise (printing the case). */
static int run_case_always(attn_gemm_path path, gemm_case g, int exact, unsigned seed) {
  int64_t ar = g.ta ? g.K : g.M, ac = g.ta ? g.M : g.K; /* stored A [ar, ac] */
  int64_t br = g.tb ? g.N : g.K, bc = g.tb ? g.K : g.N; /* stored B [br, bc] */
  int64_t lda = ac + g.pad, ldb = bc + g.pad, ldc = g.N + g.pad;
  size_t na = (size_t)(ar * lda) + 1, nb = (size_t)(br * ldb) + 1, nc = (size_t)(g.M * ldc) + 1;
  float *A = malloc(sizeof(float) * na), *B = malloc(sizeof(float) * nb);
  float *C = malloc(sizeof(float) * nc), *R = malloc(sizeof(float) * nc);
  float *C0 = malloc(sizeof(float) * nc);
  fill_uniform(A, (long)na, seed, -1.0f, 1.0f);
  fill_uniform(B, (long)nb, seed + 1, -1.0f, 1.0f);
  fill_uniform(C0, (long)nc, seed + 2, -1.0f, 1.0f);
  if (g.beta == 0.0f) /* write-only C: NaN there must not propagate */
    for (int64_t i = 0; i < g.M; i++)
      for (int64_t j = 0; j < g.N; j++) C0[i * ldc + j] = NAN;
  memcpy(C, C0, sizeof(float) * nc);
  memcpy(R, C0, sizeof(float) * nc);
  int ok = 1;
  attn_status s1 = attn_gemm_f32_path(path, g.ta, g.tb, g.M, g.N, g.K, g.alpha, A, lda, B, ldb,
                                      g.beta, C, ldc);
  attn_status s2 =
      attn_gemm_f32_ref(g.ta, g.tb, g.M, g.N, g.K, g.alpha, A, lda, B, ldb, g.beta, R, ldc);
  if (s1 != ATTN_OK || s2 != ATTN_OK) ok = 0;
  int64_t bad = -1;
  double worst = 0;
  for (int64_t i = 0; ok && i < g.M; i++) {
    for (int64_t j = 0; j < ldc; j++) {
      size_t at = (size_t)(i * ldc + j);
      if (j >= g.N) { /* padding of C is never written */
        if (memcmp(&C[at], &C0[at], sizeof(float))) bad = (int64_t)at;
        continue;
      }
      if (isnan(C[at])) bad = (int64_t)at;
      if (exact) {
        if (memcmp(&C[at], &R[at], sizeof(float))) bad = (int64_t)at;
        continue;
      }
      double S = 0;
      for (int64_t p = 0; p < g.K; p++) {
        double a = g.ta ? A[p * lda + i] : A[i * lda + p];
        double b = g.tb ? B[j * ldb + p] : B[p * ldb + j];
        S += fabs(a * b);
      }
      S = fabs(g.alpha) * S + (g.beta == 0.0f ? 0.0 : fabs(g.beta * C0[at]));
      double err = fabs((double)C[at] - (double)R[at]), tol = 2.0 * (g.K + 2) * U * S + 1e-30;
      if (err / tol > worst) worst = err / tol;
      if (!(err <= tol)) bad = (int64_t)at;
    }
    if (bad >= 0) ok = 0;
  }
  /* the last element (beyond C's rows) is never touched either */
  if (memcmp(&C[nc - 1], &C0[nc - 1], sizeof(float))) ok = 0;
  if (!ok)
    printf("  path %d ta=%d tb=%d M=%lld N=%lld K=%lld alpha=%g beta=%g pad=%lld: status %d/%d, "
           "bad index %lld (got %.9g want %.9g), worst err/tol %.3g\n",
           (int)path, g.ta, g.tb, (long long)g.M, (long long)g.N, (long long)g.K, g.alpha, g.beta,
           (long long)g.pad, (int)s1, (int)s2, (long long)bad, bad >= 0 ? C[bad] : 0.0,
           bad >= 0 ? R[bad] : 0.0, worst);
  free(A);
  free(B);
  free(C);
  free(R);
  free(C0);
  return ok;
}

/* run_case_always, or (ATTN_TEST_SAMPLE, tests/harness.h) 1 for a case the sample leaves out */
static int run_case(attn_gemm_path path, gemm_case g, int exact, unsigned seed) {
  return !h_sample() || run_case_always(path, g, exact, seed);
}

static const int64_t SIZES[] = {1, 2, 3, 5, 7, 13, 17, 31, 33, 63, 65, 127, 129, 255, 257};
enum { NSIZES = sizeof SIZES / sizeof SIZES[0] };
static const float ALPHA_BETA[][2] = {{1.0f, 0.0f}, {1.0f, 1.0f}, {0.5f, -0.75f}, {-1.25f, 0.0f}};

/* Every transpose x alpha/beta x awkward size in each dimension, with and
 * without padded rows. */
static void sweep(attn_gemm_path path, int exact) {
  int fails = 0;
  unsigned seed = 1;
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++)
      for (int ab = 0; ab < 4; ab++)
        for (int s = 0; s < NSIZES; s++) {
          int64_t n = SIZES[s];
          gemm_case cs[4] = {
              {n, 17, 33, ta, tb, ALPHA_BETA[ab][0], ALPHA_BETA[ab][1], (s + ab) % 2 ? 3 : 0},
              {13, n, 31, ta, tb, ALPHA_BETA[ab][0], ALPHA_BETA[ab][1], (s + ab) % 2 ? 0 : 5},
              {7, 65, n, ta, tb, ALPHA_BETA[ab][0], ALPHA_BETA[ab][1], (s + ab) % 2 ? 1 : 0},
              {n, n, n < 64 ? n : 29, ta, tb, ALPHA_BETA[ab][0], ALPHA_BETA[ab][1], s % 3},
          };
          int ncases = n > 65 && ab != 2 ? 3 : 4; /* the big squares once per transpose */
          for (int c = 0; c < ncases; c++) fails += !run_case(path, cs[c], exact, seed++);
        }
  CHECK(fails == 0);
}

/* The active level's packed micro-kernel (tests/run.sh runs this program on
 * every level the machine has). */
static void test_level_path_matches_reference(void) {
  printf("  (level %s: %s)\n", attn_isa_name(attn_isa_active()), attn_kern_get()->gemm->name);
  sweep(ATTN_GEMM_PACKED, 0);
}

/* Shapes on the packers' edges of the level's micro-kernel (AVX2 6x16 in
 * 8-panel groups, AVX-512 14x32, NEON 8x12): whole and partial panels and
 * panel groups, k blocks that are and are not multiples of the transposes'
 * width, several k blocks; beta = -0.75, and beta = 0 over a NaN C. */
static void test_level_panel_edges(void) {
  static const int64_t shapes[][3] = {{6, 16, 8},    {12, 64, 16},  {48, 65, 24},  {49, 80, 7},
                                      {47, 63, 385}, {96, 17, 768}, {54, 128, 776}, {5, 15, 9},
                                      {14, 32, 17},  {29, 33, 257}, {8, 12, 4},     {17, 25, 13}};
  int fails = 0;
  unsigned seed = 500;
  for (int t = 0; t < 4; t++)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
      for (int ab = 2; ab < 4; ab++) {
        gemm_case g = {shapes[s][0], shapes[s][1], shapes[s][2], t / 2, t % 2,
                       ALPHA_BETA[ab][0], ALPHA_BETA[ab][1], (int64_t)(s % 3)};
        fails += !run_case(ATTN_GEMM_PACKED, g, 0, seed++);
      }
  CHECK(fails == 0);
}

static void test_generic_path_matches_reference(void) { sweep(ATTN_GEMM_GENERIC, 0); }

static void test_small_path_is_bit_identical_to_reference(void) { sweep(ATTN_GEMM_SMALL, 1); }

/* One row times Bᵀ (the decode steps' Linears: the level's gemv_nt) with the
 * reference's bits: outputs in whole and partial vectors (4 at neon, 8 at
 * avx2, 16 at avx512: the rows transposed in tiles of 4 x 4, 8 x 8, 16 x 16), a
 * vocabulary-sized N, depths 1 .. 512 (whole and partial tiles along p), A's
 * row in place or strided (transa), alpha / beta, padded B */
static void test_small_gemv_rows_bit_identical(void) {
  static const int64_t ns[] = {1, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 100, 4096};
  static const int64_t ks[] = {1, 5, 8, 16, 17, 128, 300, 512};
  int fails = 0;
  unsigned seed = 900;
  for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
      for (int ab = 0; ab < 4; ab++) {
        if (ns[ni] == 4096 && (ks[ki] >= 300 || ab % 2)) continue; /* (time) */
        gemm_case g = {1,
                       ns[ni],
                       ks[ki],
                       (int)(ni + ki) % 2,
                       1,
                       ALPHA_BETA[ab][0],
                       ALPHA_BETA[ab][1],
                       (int64_t)((ni + ab) % 3)};
        fails += !run_case_always(ATTN_GEMM_SMALL, g, 1, seed++);
        g.M = 1, g.ta = !g.ta;
        fails += !run_case_always(ATTN_GEMM_AUTO, g, 1, seed++); /* auto takes it at M = 1 */
      }
  CHECK(fails == 0);
}

/* Sizes that span several k, row and column blocks of both kernels, and the
 * Transformer shapes (Linear: x [M, 512] · Wᵀ, W [2048, 512]; backward with
 * transa=1), through the public entry point. */
static void test_large_blocked_shapes(void) {
  gemm_case cs[] = {
      {300, 1000, 777, 0, 0, 1.0f, 0.0f, 0},  {130, 2048, 512, 0, 1, 1.0f, 0.0f, 0},
      {512, 512, 130, 1, 0, 1.0f, 1.0f, 0},   {129, 97, 1100, 1, 1, -0.5f, 2.0f, 7},
      {1000, 33, 400, 0, 1, 1.0f, 0.0f, 16},
      {1300, 40, 70, 1, 0, 1.0f, 1.0f, 3}, /* more rows than one a~ block of any kernel */
  };
  attn_gemm_path paths[] = {ATTN_GEMM_AUTO, ATTN_GEMM_GENERIC, ATTN_GEMM_PACKED};
  /* sampled (ATTN_TEST_SAMPLE): the level's kernel alone, on the smaller
   * shapes that still span several blocks of each kind */
  const int sampled = h_sample_every() > 1;
  for (int p = sampled ? 2 : 0; p < 3; p++) {
    for (size_t c = sampled ? 3 : 0; c < sizeof cs / sizeof cs[0]; c++)
      CHECK(run_case_always(paths[p], cs[c], 0, 100 + (unsigned)c));
  }
}

/* op(A) read in place (a level's ukr_rows: A not transposed) and op(A)
 * packed (the same matrix stored transposed) give the same bits: the same
 * products summed in the same order. Partial micro-panels, several k and
 * row blocks, padded rows, both B layouts, beta 0 and not. */
static void test_a_in_place_gives_the_packed_bits(void) {
  static const int64_t shapes[][3] = {{6, 16, 8},    {13, 48, 31},   {97, 130, 128},
                                      {1300, 64, 70}, {50, 33, 777}, {7, 512, 385}};
  int fails = 0;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
    for (int tb = 0; tb < 2; tb++) {
      int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], lda = K + 3, ldb = (tb ? K : N) + 1;
      float *A = malloc(sizeof(float) * (size_t)(M * lda)), *At = malloc(sizeof(float) * (size_t)(K * M));
      float *B = malloc(sizeof(float) * (size_t)((tb ? N : K) * ldb));
      float *C1 = malloc(sizeof(float) * (size_t)(M * N)), *C2 = malloc(sizeof(float) * (size_t)(M * N));
      fill_uniform(A, (long)(M * lda), 7 + (unsigned)s, -1, 1);
      fill_uniform(B, (long)((tb ? N : K) * ldb), 8 + (unsigned)s, -1, 1);
      for (int64_t i = 0; i < M; i++)
        for (int64_t p = 0; p < K; p++) At[p * M + i] = A[i * lda + p];
      for (int beta = 0; beta < 2; beta++) {
        fill_uniform(C1, (long)(M * N), 9, -1, 1);
        memcpy(C2, C1, sizeof(float) * (size_t)(M * N));
        CHECK_OK(attn_gemm_f32_path(ATTN_GEMM_PACKED, 0, tb, M, N, K, 0.5f, A, lda, B, ldb,
                                    beta ? -0.75f : 0.0f, C1, N));
        CHECK_OK(attn_gemm_f32_path(ATTN_GEMM_PACKED, 1, tb, M, N, K, 0.5f, At, M, B, ldb,
                                    beta ? -0.75f : 0.0f, C2, N));
        if (memcmp(C1, C2, sizeof(float) * (size_t)(M * N))) {
          printf("  M=%lld N=%lld K=%lld tb=%d beta=%d: in place and packed differ\n",
                 (long long)M, (long long)N, (long long)K, tb, beta);
          fails++;
        }
      }
      free(A);
      free(At);
      free(B);
      free(C1);
      free(C2);
    }
  CHECK(fails == 0);
}

/* K = 0: C = beta * C (0 when beta = 0, NaN in C dropped); M or N = 0: no-op,
 * NULL operands accepted. */
static void test_empty_sizes(void) {
  float C[6] = {1, 2, NAN, 4, 5, 6}, A[1] = {7}, B[1] = {8};
  attn_gemm_path paths[] = {ATTN_GEMM_AUTO, ATTN_GEMM_SMALL, ATTN_GEMM_GENERIC};
  for (int p = 0; p < 3; p++) {
    float c1[6] = {1, 2, 3, 4, 5, 6};
    CHECK_OK(attn_gemm_f32_path(paths[p], 0, 0, 2, 3, 0, 1.0f, NULL, 0, NULL, 3, 0.5f, c1, 3));
    CHECK(c1[0] == 0.5f && c1[5] == 3.0f);
    float c2[6];
    memcpy(c2, C, sizeof C);
    CHECK_OK(attn_gemm_f32_path(paths[p], 1, 1, 2, 3, 0, 1.0f, A, 2, B, 0, 0.0f, c2, 3));
    for (int i = 0; i < 6; i++) CHECK(c2[i] == 0.0f);
    float c3[6];
    memcpy(c3, C, sizeof C);
    CHECK_OK(attn_gemm_f32_path(paths[p], 0, 0, 0, 3, 5, 1.0f, NULL, 5, NULL, 3, 0.0f, c3, 3));
    CHECK_OK(attn_gemm_f32_path(paths[p], 0, 0, 2, 0, 5, 1.0f, NULL, 5, NULL, 0, 0.0f, NULL, 0));
    CHECK(c3[0] == 1.0f && isnan(c3[2]));
  }
}

/* Same inputs give bit-identical C for 1, 2, 3 and 4 threads on each
 * packed path (every element is computed by one thread, same k order). */
static void test_thread_count_does_not_change_bits(void) {
  const int64_t M = 151, N = 450, K = 600; /* several k blocks, chunks, edge tiles */
  float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * N * K);
  float *C1 = malloc(sizeof(float) * M * N), *Ct = malloc(sizeof(float) * M * N);
  fill_uniform(A, (long)(M * K), 11, -1.0f, 1.0f);
  fill_uniform(B, (long)(N * K), 12, -1.0f, 1.0f);
  int saved = attn_get_num_threads();
  attn_gemm_path paths[] = {ATTN_GEMM_AUTO, ATTN_GEMM_GENERIC, ATTN_GEMM_PACKED};
  for (int p = h_sample_every() > 1 ? 2 : 0; p < 3; p++) { /* sampled: the level's kernel */
    for (int tb = 0; tb < 2; tb++) {
      attn_set_num_threads(1);
      fill_uniform(C1, (long)(M * N), 13, -1.0f, 1.0f);
      CHECK_OK(attn_gemm_f32_path(paths[p], 0, tb, M, N, K, 1.0f, A, K, B, tb ? K : N, 0.5f, C1,
                                  N));
      for (int t = 2; t <= 4; t++) {
        attn_set_num_threads(t);
        fill_uniform(Ct, (long)(M * N), 13, -1.0f, 1.0f);
        CHECK_OK(attn_gemm_f32_path(paths[p], 0, tb, M, N, K, 1.0f, A, K, B, tb ? K : N, 0.5f,
                                    Ct, N));
        CHECK(memcmp(C1, Ct, sizeof(float) * M * N) == 0);
      }
    }
  }
  attn_set_num_threads(saved);
  free(A);
  free(B);
  free(C1);
  free(Ct);
}

/* The b~ block width: the kernel's nc where kc x nc floats take at most 3/4
 * of L2, else the widest multiple of nr that does (at least nr). */
static void test_nc_fits_l2(void) {
  CHECK(attn_gemm_nc_fit(512, 16, 384, 1 << 20) == 512); /* Zen 4: 768 KB of 1 MB */
  CHECK(attn_gemm_nc_fit(512, 16, 384, 512 << 10) == 256); /* Zen 3: 384 KB of 512 KB */
  CHECK(attn_gemm_nc_fit(512, 16, 256, 512 << 10) == 384);
  CHECK(attn_gemm_nc_fit(512, 16, 384, 256 << 10) == 128);
  CHECK(attn_gemm_nc_fit(960, 32, 256, 2 << 20) == 960);
  CHECK(attn_gemm_nc_fit(960, 32, 256, 1 << 20) == 768);
  CHECK(attn_gemm_nc_fit(512, 16, 384, 4096) == 16);     /* never below nr */
  CHECK(attn_gemm_nc_fit(512, 16, 384, 0) == 512);       /* unknown L2: as tuned */
  CHECK(attn_cpu_cache_bytes(2) >= 0);
}

static void test_bad_arguments(void) {
  float A[16] = {0}, B[16] = {0}, C[16] = {0};
  CHECK_ERR(attn_gemm_f32(0, 0, -1, 2, 2, 1.0f, A, 2, B, 2, 0.0f, C, 2), ATTN_EINVAL);
  CHECK_ERR(attn_gemm_f32(0, 0, 2, -1, 2, 1.0f, A, 2, B, 2, 0.0f, C, 2), ATTN_EINVAL);
  CHECK_ERR(attn_gemm_f32(0, 0, 2, 2, -3, 1.0f, A, 2, B, 2, 0.0f, C, 2), ATTN_EINVAL);
  CHECK_ERR(attn_gemm_f32(0, 0, 2, 2, 2, 1.0f, NULL, 2, B, 2, 0.0f, C, 2), ATTN_EINVAL);
  CHECK_ERR(attn_gemm_f32(0, 0, 2, 2, 2, 1.0f, A, 2, NULL, 2, 0.0f, C, 2), ATTN_EINVAL);
  CHECK_ERR(attn_gemm_f32(0, 0, 2, 2, 2, 1.0f, A, 2, B, 2, 0.0f, NULL, 2), ATTN_EINVAL);
  CHECK_ERR(attn_gemm_f32(0, 0, 2, 3, 4, 1.0f, A, 3, B, 3, 0.0f, C, 3), ATTN_EINVAL); /* lda<K */
  CHECK_ERR(attn_gemm_f32(1, 0, 2, 3, 4, 1.0f, A, 1, B, 3, 0.0f, C, 3), ATTN_EINVAL); /* lda<M */
  CHECK_ERR(attn_gemm_f32(0, 1, 2, 3, 4, 1.0f, A, 4, B, 3, 0.0f, C, 3), ATTN_EINVAL); /* ldb<K */
  CHECK_ERR(attn_gemm_f32(0, 0, 2, 3, 4, 1.0f, A, 4, B, 2, 0.0f, C, 3), ATTN_EINVAL); /* ldb<N */
  CHECK_ERR(attn_gemm_f32(0, 0, 2, 3, 4, 1.0f, A, 4, B, 3, 0.0f, C, 2), ATTN_EINVAL); /* ldc<N */
  CHECK_OK(attn_gemm_f32(0, 0, 2, 3, 4, 1.0f, A, 4, B, 3, 0.0f, C, 3));
}

/* Sizes whose offsets overflow int64 are refused before any arithmetic on
 * them (fuzzing found M = INT64_MAX wrapping in the packing plan; under UBSan
 * that is a runtime error, without it a wild write). */
static void test_huge_sizes_are_refused(void) {
  float A[16] = {0}, B[16] = {0}, C[16] = {0};
  const int64_t big = INT64_MAX;
  CHECK_ERR(attn_gemm_f32(0, 0, big, 1, 1, 1.0f, A, 1, B, 1, 0.0f, C, 1), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "too large") != NULL);
  CHECK_ERR(attn_gemm_f32(0, 0, 1, big, 1, 1.0f, A, 1, B, big, 0.0f, C, big), ATTN_EINVAL);
  CHECK_ERR(attn_gemm_f32(0, 0, 2, 2, big, 1.0f, A, big, B, 2, 0.0f, C, 2), ATTN_EINVAL);
  CHECK_ERR(attn_gemm_f32(1, 1, 2, 2, 2, 1.0f, A, big, B, 2, 0.0f, C, 2), ATTN_EINVAL);
  CHECK_ERR(attn_gemm_f32(0, 0, 3, 2, 0, 1.0f, A, 1, B, 1, 0.0f, C, big / 2), ATTN_EINVAL);
  CHECK_ERR(attn_gemm_f32(0, 0, big / 2, 2, 2, 1.0f, A, 2, B, 2, 0.0f, C, 2), ATTN_EINVAL);
}

int main(void) {
  RUN(test_small_path_is_bit_identical_to_reference);
  RUN(test_small_gemv_rows_bit_identical);
  RUN(test_generic_path_matches_reference);
  RUN(test_level_path_matches_reference);
  RUN(test_level_panel_edges);
  RUN(test_large_blocked_shapes);
  RUN(test_a_in_place_gives_the_packed_bits);
  RUN(test_empty_sizes);
  RUN(test_thread_count_does_not_change_bits);
  RUN(test_nc_fits_l2);
  RUN(test_bad_arguments);
  RUN(test_huge_sizes_are_refused);
  HARNESS_END();
}
