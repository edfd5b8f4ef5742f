/* Low-precision GEMMs (include/attn/lowp.h) against plain references, on
 * every path this CPU has (portable, AVX-512, AMX) forced in turn.
 * Tolerances (u = 2^-24, S[i,j] = sum_k |a_ik||b_kj|):
 *   bf16 / f16 operands vs a double reference on the same (rounded) values:
 *     |err| <= |alpha| S (2K + 8) u + |beta C0| 4u   (f32 accumulation; AMX and
 *     VDPBF16PS may round twice per depth pair)
 *   bf16 from f32 operands vs the f32 maths: add |alpha| S 2^-7 (each operand
 *     rounded to 8 significant bits: relative error <= 2^-8 each, so <= 2^-7
 *     per product; the typical error is ~2^-8 sqrt(K) times the typical
 *     product, checked as an RMS in test_bf16_error_is_statistically_small)
 *   int8: bit-exact against the int64 reference. */
#include <stdint.h>

#include "harness.h"
#include "kernels/arch/amx/amx.h"
#include "kernels/kern.h"

static const double U = 1.0 / 16777216.0;
static const attn_lowp_path PATHS[] = {ATTN_LOWP_PORTABLE, ATTN_LOWP_SIMD, ATTN_LOWP_AMX,
                                       ATTN_LOWP_F32};

typedef struct {
  int64_t M, N, K;
} shape;
/* awkward sizes: 1, 3, 17, 31, 33, 64, 65, 129; depths off every multiple of
 * 2/4/16/32/64 and deeper than one k block */
static const shape SHAPES[] = {{1, 1, 1},
                               {3, 17, 31},
                               {17, 33, 65},
                               {31, 64, 129},
                               {33, 65, 3},
                               {64, 31, 17},
                               {65, 129, 33},
                               {129, 3, 64},
                               {1, 129, 65},
                               {129, 1, 129},
                               {40, 50, 1001},
                               {70, 97, 301},
                               {33, 31, 2},
                               {5, 7, 255},
                               {9, 40, 2100},
                               /* one row (the int8 kernels' one-row micro-kernel): depth
                                * quads in fours, a remainder, several k blocks */
                               {1, 97, 1001},
                               {1, 40, 16},
                               {1, 33, 2100}};

static unsigned lcg(unsigned *s) {
  *s = *s * 1664525u + 1013904223u;
  return *s >> 8;
}

typedef enum { T_BF16, T_F32IN, T_F16 } ftype;

/* One f32-output case; returns 0 on failure (printed). */
static int run_float_case(ftype ft, attn_lowp_path path, shape s, int ta, int tb, float alpha,
                          float beta, unsigned seed) {
  int64_t M = s.M, N = s.N, K = s.K;
  int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2;
  int64_t na = (ta ? K : M) * lda, nb = (tb ? N : K) * ldb;
  float *A = malloc(sizeof(float) * (size_t)na), *B = malloc(sizeof(float) * (size_t)nb);
  float *Ar = malloc(sizeof(float) * (size_t)na), *Br = malloc(sizeof(float) * (size_t)nb);
  uint16_t *Ah = malloc(2 * (size_t)na), *Bh = malloc(2 * (size_t)nb);
  float *C = malloc(sizeof(float) * (size_t)(M * ldc)), *C0 = malloc(sizeof(float) * (size_t)(M * ldc));
  fill_uniform(A, (long)na, seed, -1.0f, 1.0f);
  fill_uniform(B, (long)nb, seed + 7, -1.0f, 1.0f);
  fill_uniform(C0, (long)(M * ldc), seed + 13, -1.0f, 1.0f);
  for (int64_t i = 0; i < na; i++) {
    Ah[i] = ft == T_F16 ? attn_f32_to_f16(A[i]) : attn_f32_to_bf16(A[i]);
    Ar[i] = ft == T_F16 ? attn_f16_to_f32(Ah[i]) : attn_bf16_to_f32(Ah[i]);
  }
  for (int64_t i = 0; i < nb; i++) {
    Bh[i] = ft == T_F16 ? attn_f32_to_f16(B[i]) : attn_f32_to_bf16(B[i]);
    Br[i] = ft == T_F16 ? attn_f16_to_f32(Bh[i]) : attn_bf16_to_f32(Bh[i]);
  }
  memcpy(C, C0, sizeof(float) * (size_t)(M * ldc));
  attn_status st;
  if (ft == T_BF16)
    st = attn_gemm_bf16_path(path, ta, tb, M, N, K, alpha, Ah, lda, Bh, ldb, beta, C, ldc);
  else if (ft == T_F16)
    st = attn_gemm_f16_path(path, ta, tb, M, N, K, alpha, Ah, lda, Bh, ldb, beta, C, ldc);
  else
    st = attn_gemm_bf16_f32in_path(path, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  int ok = st == ATTN_OK;
  if (!ok) printf("  status %s: %s\n", attn_status_str(st), attn_last_error());
  /* the same operands rounded beforehand must give the same bits */
  if (ok && ft == T_F32IN) {
    float *C2 = malloc(sizeof(float) * (size_t)(M * ldc));
    memcpy(C2, C0, sizeof(float) * (size_t)(M * ldc));
    attn_gemm_bf16_path(path, ta, tb, M, N, K, alpha, Ah, lda, Bh, ldb, beta, C2, ldc);
    if (memcmp(C, C2, sizeof(float) * (size_t)(M * ldc))) {
      printf("  f32in differs from pre-rounded bf16 operands\n");
      ok = 0;
    }
    free(C2);
  }
  for (int64_t i = 0; i < M && ok; i++)
    for (int64_t j = 0; j < N && ok; j++) {
      double exact = 0, S = 0, exact32 = 0;
      for (int64_t p = 0; p < K; p++) {
        int64_t ia = ta ? p * lda + i : i * lda + p, ib = tb ? j * ldb + p : p * ldb + j;
        exact += (double)Ar[ia] * Br[ib];
        exact32 += (double)A[ia] * B[ib];
        S += fabs((double)Ar[ia] * Br[ib]);
      }
      double c0 = C0[i * ldc + j];
      double want = alpha * exact + (beta == 0.0f ? 0.0 : beta * c0);
      double tol = fabs(alpha) * S * (2.0 * (double)K + 8) * U + fabs(beta * c0) * 4 * U + 1e-30;
      double got = C[i * ldc + j];
      if (!(fabs(got - want) <= tol)) {
        printf("  C[%lld,%lld] = %.9g, want %.9g (tol %.3g)\n", (long long)i, (long long)j, got,
               want, tol);
        ok = 0;
      }
      if (ft == T_F32IN) { /* against the unrounded f32 maths */
        double want32 = alpha * exact32 + (beta == 0.0f ? 0.0 : beta * c0);
        double tol32 = tol + fabs(alpha) * S * 1.01 / 128.0;
        if (!(fabs(got - want32) <= tol32)) {
          printf("  C[%lld,%lld] = %.9g, f32 maths %.9g (tol %.3g)\n", (long long)i,
                 (long long)j, got, want32, tol32);
          ok = 0;
        }
      }
    }
  for (int64_t i = 0; i < M && ok; i++) /* padding of C untouched */
    for (int64_t j = N; j < ldc; j++)
      if (C[i * ldc + j] != C0[i * ldc + j]) ok = 0;
  if (!ok)
    printf("  (%s path %s, M=%lld N=%lld K=%lld ta=%d tb=%d alpha=%g beta=%g)\n",
           ft == T_F16 ? "f16" : ft == T_BF16 ? "bf16" : "bf16_f32in",
           attn_lowp_path_name(path, ft == T_F16 ? "f16" : "bf16"), (long long)M, (long long)N,
           (long long)K, ta, tb, alpha, beta);
  free(A), free(B), free(Ar), free(Br), free(Ah), free(Bh), free(C), free(C0);
  return ok;
}

static const float AB[][2] = {{1.0f, 0.0f}, {0.5f, -0.75f}, {-1.25f, 1.0f}};

static void sweep_float(ftype ft) {
  const char *dt = ft == T_F16 ? "f16" : "bf16";
  int ran = 0;
  for (int pi = 0; pi < (int)(sizeof PATHS / sizeof PATHS[0]); pi++) {
    if (!attn_lowp_path_available(PATHS[pi], dt)) continue;
    ran++;
    for (size_t si = 0; si < sizeof SHAPES / sizeof SHAPES[0]; si++)
      for (int t = 0; t < 4; t++) {
        const float *ab = AB[(si + (size_t)t) % 3];
        /* ATTN_TEST_SAMPLE (tests/harness.h): each path's first case always */
        if (si + (size_t)t > 0 && !h_sample()) continue;
        if (!run_float_case(ft, PATHS[pi], SHAPES[si], t >> 1, t & 1, ab[0], ab[1],
                            (unsigned)(si * 4 + (size_t)t))) {
          CHECK(0);
          return;
        }
      }
  }
  CHECK(ran >= 1); /* the portable path always runs */
}

static void test_bf16_all_paths(void) { sweep_float(T_BF16); }
static void test_bf16_f32in_all_paths(void) { sweep_float(T_F32IN); }
static void test_f16_all_paths(void) { sweep_float(T_F16); }

/* The typical error of bf16 products: RMS over C of (C - f32 maths) is
 * about 2^-8 sqrt(K) rms(a b) (random rounding errors add in quadrature);
 * checked within that scale, and above zero (the operands were rounded). */
static void test_bf16_error_is_statistically_small(void) {
  const int64_t M = 48, N = 40, K = 1000;
  float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * K * N);
  float *C = malloc(sizeof(float) * M * N);
  fill_uniform(A, M * K, 11, -1, 1);
  fill_uniform(B, K * N, 12, -1, 1);
  CHECK_OK(attn_gemm_bf16_f32in(0, 0, M, N, K, 1, A, K, B, N, 0, C, N));
  double se = 0, sp = 0;
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double e = 0;
      for (int64_t p = 0; p < K; p++) {
        e += (double)A[i * K + p] * B[p * N + j];
        sp += (double)A[i * K + p] * B[p * N + j] * A[i * K + p] * B[p * N + j];
      }
      se += (C[i * N + j] - e) * (C[i * N + j] - e);
    }
  double rms_err = sqrt(se / (double)(M * N)), rms_prod = sqrt(sp / (double)(M * N * K));
  double scale = ldexp(1, -8) * sqrt((double)K) * rms_prod;
  printf("  rms error %.3g = %.2f x 2^-8 sqrt(K) rms(ab)\n", rms_err, rms_err / scale);
  CHECK(rms_err > 0.01 * scale && rms_err < scale);
  free(A), free(B), free(C);
}

/* A stored K x M (transa = 1) packs into the same panels as its transpose
 * stored M x K (the AMX A packer has a separate transposing branch): the
 * same bits on every path, bf16 and f32-rounded operands, awkward sizes. */
static void test_bf16_transposed_a_same_bits(void) {
  static const shape S[] = {{1, 1, 1}, {17, 5, 33}, {33, 40, 65}, {64, 32, 64}, {70, 9, 1100},
                            {129, 31, 130}};
  for (int pi = 0; pi < (int)(sizeof PATHS / sizeof PATHS[0]); pi++) {
    if (!attn_lowp_path_available(PATHS[pi], "bf16")) continue;
    for (size_t si = 0; si < sizeof S / sizeof S[0]; si++) {
      int64_t M = S[si].M, N = S[si].N, K = S[si].K, lda = M + 3;
      float *At = malloc(sizeof(float) * (size_t)(K * lda)), *A = malloc(sizeof(float) * (size_t)(M * K));
      float *B = malloc(sizeof(float) * (size_t)(K * N));
      float *C1 = malloc(sizeof(float) * (size_t)(M * N)), *C2 = malloc(sizeof(float) * (size_t)(M * N));
      uint16_t *Ath = malloc(2 * (size_t)(K * lda)), *Ah = malloc(2 * (size_t)(M * K));
      uint16_t *Bh = malloc(2 * (size_t)(K * N));
      fill_uniform(At, (long)(K * lda), (unsigned)si + 3, -2.0f, 2.0f);
      fill_uniform(B, (long)(K * N), (unsigned)si + 5, -1.0f, 1.0f);
      for (int64_t p = 0; p < K; p++)
        for (int64_t i = 0; i < M; i++) A[i * K + p] = At[p * lda + i];
      attn_f32_to_bf16_n(At, Ath, K * lda);
      attn_f32_to_bf16_n(A, Ah, M * K);
      attn_f32_to_bf16_n(B, Bh, K * N);
      CHECK_OK(attn_gemm_bf16_f32in_path(PATHS[pi], 1, 0, M, N, K, 1, At, lda, B, N, 0, C1, N));
      CHECK_OK(attn_gemm_bf16_f32in_path(PATHS[pi], 0, 0, M, N, K, 1, A, K, B, N, 0, C2, N));
      CHECK(!memcmp(C1, C2, sizeof(float) * (size_t)(M * N)));
      CHECK_OK(attn_gemm_bf16_path(PATHS[pi], 1, 0, M, N, K, 1, Ath, lda, Bh, N, 0, C1, N));
      CHECK(!memcmp(C1, C2, sizeof(float) * (size_t)(M * N)));
      CHECK_OK(attn_gemm_bf16_path(PATHS[pi], 0, 0, M, N, K, 1, Ah, K, Bh, N, 0, C1, N));
      CHECK(!memcmp(C1, C2, sizeof(float) * (size_t)(M * N)));
      free(At), free(A), free(B), free(C1), free(C2), free(Ath), free(Ah), free(Bh);
    }
  }
}

static int run_i8_case(attn_lowp_path path, shape s, int ta, int tb, unsigned seed, int extreme) {
  int64_t M = s.M, N = s.N, K = s.K;
  int64_t lda = (ta ? M : K) + 5, ldb = (tb ? K : N) + 2, ldc = N + 1;
  int64_t na = (ta ? K : M) * lda, nb = (tb ? N : K) * ldb;
  uint8_t *A = malloc((size_t)na);
  int8_t *B = malloc((size_t)nb);
  int32_t *C = malloc(sizeof(int32_t) * (size_t)(M * ldc));
  int32_t *R = malloc(sizeof(int32_t) * (size_t)(M * ldc));
  unsigned r = seed * 77u + 1u;
  for (int64_t i = 0; i < na; i++) A[i] = extreme ? 255 : (uint8_t)lcg(&r);
  for (int64_t i = 0; i < nb; i++) B[i] = extreme ? -128 : (int8_t)(uint8_t)lcg(&r);
  for (int64_t i = 0; i < M * ldc; i++) C[i] = R[i] = -7;
  int ok = attn_gemm_u8s8s32_path(path, ta, tb, M, N, K, A, lda, B, ldb, C, ldc) == ATTN_OK;
  ok = ok && attn_gemm_u8s8s32_ref(ta, tb, M, N, K, A, lda, B, ldb, R, ldc) == ATTN_OK;
  ok = ok && !memcmp(C, R, sizeof(int32_t) * (size_t)(M * ldc));
  if (!ok)
    printf("  i8 path %s M=%lld N=%lld K=%lld ta=%d tb=%d: not bit-exact (%s)\n",
           attn_lowp_path_name(path, "i8"), (long long)M, (long long)N, (long long)K, ta, tb,
           attn_last_error());
  free(A), free(B), free(C), free(R);
  return ok;
}

static void test_i8_all_paths_bit_exact(void) {
  int ran = 0;
  for (int pi = 0; pi < (int)(sizeof PATHS / sizeof PATHS[0]); pi++) {
    if (!attn_lowp_path_available(PATHS[pi], "i8")) continue;
    ran++;
    for (size_t si = 0; si < sizeof SHAPES / sizeof SHAPES[0]; si++)
      for (int t = 0; t < 4; t++)
        if ((si + (size_t)t == 0 || h_sample()) && /* ATTN_TEST_SAMPLE (tests/harness.h) */
            !run_i8_case(PATHS[pi], SHAPES[si], t >> 1, t & 1, (unsigned)(si * 4 + (size_t)t), 0)) {
          CHECK(0);
          return;
        }
  }
  CHECK(ran >= 1);
}

/* 255 * -128 at the largest depth: the sum -2139095040 still fits s32 */
static void test_i8_extreme_values_at_max_depth(void) {
  shape s = {2, 3, ATTN_GEMM_I8_MAX_K};
  for (int pi = 0; pi < (int)(sizeof PATHS / sizeof PATHS[0]); pi++)
    if (attn_lowp_path_available(PATHS[pi], "i8")) CHECK(run_i8_case(PATHS[pi], s, 0, 1, 1, 1));
  uint8_t a = 1;
  int8_t b = 1;
  int32_t c;
  CHECK_ERR(attn_gemm_u8s8s32(0, 0, 1, 1, ATTN_GEMM_I8_MAX_K + 1, &a, ATTN_GEMM_I8_MAX_K + 1,
                              &b, 1, &c, 1),
            ATTN_EINVAL);
}

/* Same bits with 1 and 2 threads (and 3), on each path, at a size that
 * splits into a thread grid. */
static void test_thread_count_does_not_change_bits(void) {
  const int64_t M = 200, N = 150, K = 300;
  float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * K * N);
  float *C1 = malloc(sizeof(float) * M * N), *C2 = malloc(sizeof(float) * M * N);
  uint8_t *Au = malloc((size_t)(M * K));
  int8_t *Bs = malloc((size_t)(K * N));
  int32_t *I1 = malloc(sizeof(int32_t) * M * N), *I2 = malloc(sizeof(int32_t) * M * N);
  fill_uniform(A, M * K, 1, -1, 1);
  fill_uniform(B, K * N, 2, -1, 1);
  unsigned r = 5;
  for (int64_t i = 0; i < M * K; i++) Au[i] = (uint8_t)lcg(&r);
  for (int64_t i = 0; i < K * N; i++) Bs[i] = (int8_t)(uint8_t)lcg(&r);
  int saved = attn_get_num_threads();
  for (int pi = 0; pi < (int)(sizeof PATHS / sizeof PATHS[0]); pi++) {
    for (int t = 2; t <= 3; t++) {
      if (attn_lowp_path_available(PATHS[pi], "bf16")) {
        attn_set_num_threads(1);
        CHECK_OK(attn_gemm_bf16_f32in_path(PATHS[pi], 0, 1, M, N, K, 1, A, K, B, K, 0, C1, N));
        attn_set_num_threads(t);
        CHECK_OK(attn_gemm_bf16_f32in_path(PATHS[pi], 0, 1, M, N, K, 1, A, K, B, K, 0, C2, N));
        CHECK(!memcmp(C1, C2, sizeof(float) * M * N));
      }
      if (attn_lowp_path_available(PATHS[pi], "i8")) {
        attn_set_num_threads(1);
        CHECK_OK(attn_gemm_u8s8s32_path(PATHS[pi], 1, 0, M, N, K, Au, M, Bs, N, I1, N));
        attn_set_num_threads(t);
        CHECK_OK(attn_gemm_u8s8s32_path(PATHS[pi], 1, 0, M, N, K, Au, M, Bs, N, I2, N));
        CHECK(!memcmp(I1, I2, sizeof(int32_t) * M * N));
      }
    }
  }
  attn_set_num_threads(saved);
  free(A), free(B), free(C1), free(C2), free(Au), free(Bs), free(I1), free(I2);
}

/* A kernel's own packer (attn_lowp_kernel.pack: the avx2 level's converting
 * 8x8-transpose packer) writes the bytes the driver's portable pack()
 * writes: element (r, p) of panel r / w at p * w + r % w, converted; zeros
 * past the rows and past depth kc up to kcp; nothing outside the panels.
 * Bit patterns include NaN, infinities, subnormals and rounding ties. */
static float packed_value(attn_lowp_type t, const void *x, int64_t i) {
  if (t == LOWP_F32) return ((const float *)x)[i];
  if (t == LOWP_F32R) return attn_bf16_to_f32(attn_f32_to_bf16(((const float *)x)[i]));
  if (t == LOWP_BF16) return attn_bf16_to_f32(((const uint16_t *)x)[i]);
  return attn_f16_to_f32(((const uint16_t *)x)[i]);
}

static void test_kernel_packer_same_bytes(void) {
  const attn_lowp_kernel *kr = attn_kern_get()->lowp.f32cvt_simd;
  if (!kr || !kr->pack) return; /* the driver's pack() only: nothing to compare */
  static const attn_lowp_type TYPES[] = {LOWP_F32, LOWP_F32R, LOWP_BF16, LOWP_F16};
  static const int64_t ROWS[] = {1, 5, 6, 7, 16, 17, 40};
  static const int64_t DEPTHS[] = {1, 7, 8, 9, 31};
  const int widths[] = {kr->mr, kr->nr, 14, 32};
  unsigned r = 11;
  int bad = 0;
  for (int ti = 0; ti < 4 && !bad; ti++)
    for (int wi = 0; wi < 4 && !bad; wi++)
      for (int lay = 0; lay < 2 && !bad; lay++) /* 0: depth contiguous, 1: rows contiguous */
        for (size_t ri = 0; ri < sizeof ROWS / sizeof ROWS[0] && !bad; ri++)
          for (size_t di = 0; di < sizeof DEPTHS / sizeof DEPTHS[0] && !bad; di++)
            for (int pad = 0; pad <= 3 && !bad; pad += 3) {
              attn_lowp_type t = TYPES[ti];
              int w = widths[wi];
              int64_t nrows = ROWS[ri], kc = DEPTHS[di], kcp = kc + pad, r0 = 2, p0 = 3;
              int64_t ld = (lay ? r0 + nrows : p0 + kc) + 5, n = ld * (lay ? p0 + kc : r0 + nrows);
              size_t es = t == LOWP_F32 || t == LOWP_F32R ? 4 : 2;
              uint32_t *x = malloc(4 * (size_t)n);
              for (int64_t i = 0; i < n; i++) {
                uint32_t u = lcg(&r) << 8 ^ lcg(&r);
                if (i % 7 == 0) u = (u & 0xffff0000u) | 0x8000u; /* a tie */
                if (t == LOWP_F16 && (u & 0x7c00u) == 0x7c00u) u &= ~0x0200u; /* no NaN payloads */
                if (t == LOWP_F16 && (u & 0x7fffu) > 0x7c00u) u = 0x7c00u;
                if (es == 2)
                  ((uint16_t *)x)[i] = (uint16_t)u;
                else
                  x[i] = u;
              }
              attn_lowp_src s = {x, t, lay ? 1 : ld, lay ? ld : 1, NULL, 0, 0, 0};
              int64_t npan = (nrows + w - 1) / w, size = npan * w * kcp;
              float *got = malloc(sizeof(float) * (size_t)(size + 16));
              float *want = calloc((size_t)size, sizeof(float));
              memset(got, 0xA5, sizeof(float) * (size_t)(size + 16));
              for (int64_t i = 0; i < nrows; i++)
                for (int64_t p = 0; p < kc; p++)
                  want[(i / w) * w * kcp + p * w + i % w] =
                      packed_value(t, x, (r0 + i) * s.sr + (p0 + p) * s.sp);
              if (!kr->pack(&s, r0, nrows, p0, kc, kcp, w, got + 8)) {
                printf("  kernel %s declined type %d layout %d\n", kr->name, (int)t, lay);
                bad = 1;
              } else if (memcmp(got + 8, want, sizeof(float) * (size_t)size)) {
                printf("  packed bytes differ (type %d, w %d, layout %d, rows %lld, kc %lld, kcp %lld)\n",
                       (int)t, w, lay, (long long)nrows, (long long)kc, (long long)kcp);
                bad = 1;
              } else {
                for (int i = 0; i < 8; i++) {
                  uint32_t a, b;
                  memcpy(&a, got + i, 4);
                  memcpy(&b, got + 8 + size + i, 4);
                  if (a != 0xA5A5A5A5u || b != 0xA5A5A5A5u) bad = 1;
                }
                if (bad) printf("  written outside the panels (w %d, rows %lld, kc %lld)\n", w,
                                (long long)nrows, (long long)kc);
              }
              free(x), free(got), free(want);
            }
  CHECK(!bad);
}

/* Whole tiles written by the kernel's ukr_c straight into C, and panels
 * from its own packer, give the bits of the tile + epilogue route with the
 * portable packer (alpha = 1: the epilogue's mul and add are exact then, as
 * the fused form). */
static void test_direct_tiles_same_bits(void) {
  const attn_lowp_kernel *kr = attn_kern_get()->lowp.f32cvt_simd;
  if (!kr || (!kr->ukr_c && !kr->pack)) return;
  attn_lowp_kernel plain = *kr;
  plain.ukr_c = NULL;
  plain.pack = NULL;
  static const shape S[] = {{13, 37, 70}, {64, 96, 512}, {7, 5, 900}, {100, 33, 17}};
  for (size_t si = 0; si < sizeof S / sizeof S[0]; si++)
    for (int t = 0; t < 4; t++)
      for (int bi = 0; bi < 2; bi++) {
        int64_t M = S[si].M, N = S[si].N, K = S[si].K, ldc = N + 3;
        int ta = t >> 1, tb = t & 1;
        float *A = malloc(sizeof(float) * (size_t)(M * K)), *B = malloc(sizeof(float) * (size_t)(K * N));
        float *C1 = malloc(sizeof(float) * (size_t)(M * ldc)), *C2 = malloc(sizeof(float) * (size_t)(M * ldc));
        fill_uniform(A, (long)(M * K), (unsigned)si + 1, -1, 1);
        fill_uniform(B, (long)(K * N), (unsigned)si + 2, -1, 1);
        fill_uniform(C1, (long)(M * ldc), (unsigned)si + 3, -1, 1);
        memcpy(C2, C1, sizeof(float) * (size_t)(M * ldc));
        attn_lowp_src a = attn_lowp_src_a(A, LOWP_F32R, ta, ta ? M : K);
        attn_lowp_src b = attn_lowp_src_b(B, LOWP_F32R, tb, tb ? K : N);
        attn_lowp_epi e1 = {attn_lowp_epi_f32, C1, ldc, 1.0f, (float)bi, NULL, 1}, e2 = e1;
        e2.C = C2;
        CHECK_OK(attn_lowp_gemm_run(kr, &a, &b, M, N, K, &e1, 0));
        CHECK_OK(attn_lowp_gemm_run(&plain, &a, &b, M, N, K, &e2, 0));
        CHECK(!memcmp(C1, C2, sizeof(float) * (size_t)(M * ldc)));
        free(A), free(B), free(C1), free(C2);
      }
}

static int refuse(void) { return -1; }

/* A refused AMX permission: the AMX path reports EUNSUPPORTED, AUTO falls
 * back to the next path and gives its bits; granting again restores AMX. */
static void test_amx_permission_refused_falls_back(void) {
  int had_amx = attn_lowp_path_available(ATTN_LOWP_AMX, "bf16");
  attn_amx_set_request_hook(refuse);
  CHECK(!attn_amx_ready());
  CHECK(!attn_lowp_path_available(ATTN_LOWP_AMX, "bf16"));
  CHECK(!attn_lowp_path_available(ATTN_LOWP_AMX, "i8"));
  const int64_t M = 37, N = 41, K = 70;
  float A[37 * 70], B[70 * 41], C[37 * 41], D[37 * 41];
  fill_uniform(A, M * K, 3, -1, 1);
  fill_uniform(B, K * N, 4, -1, 1);
  CHECK_ERR(attn_gemm_bf16_f32in_path(ATTN_LOWP_AMX, 0, 0, M, N, K, 1, A, K, B, N, 0, C, N),
            ATTN_EUNSUPPORTED);
  CHECK_OK(attn_gemm_bf16_f32in(0, 0, M, N, K, 1, A, K, B, N, 0, C, N));
  /* the bf16 dot product where it is fast, else widened to f32, else portable */
  const int dot = attn_kern_get()->lowp.bf16_simd != NULL;
  attn_lowp_path next = dot && attn_cpu()->bf16_dot_fast ? ATTN_LOWP_SIMD
                        : dot || attn_lowp_path_available(ATTN_LOWP_SIMD, "bf16")
                            ? ATTN_LOWP_F32
                            : ATTN_LOWP_PORTABLE;
  CHECK_OK(attn_gemm_bf16_f32in_path(next, 0, 0, M, N, K, 1, A, K, B, N, 0, D, N));
  CHECK(!memcmp(C, D, sizeof C));
  CHECK(strcmp(attn_lowp_path_name(ATTN_LOWP_AUTO, "bf16"), "amx") != 0);
  attn_amx_set_request_hook(NULL);
  CHECK(attn_lowp_path_available(ATTN_LOWP_AMX, "bf16") == had_amx);
  printf("  (AMX on this CPU: %s; auto paths: bf16 %s, f16 %s, i8 %s)\n",
         had_amx ? "yes" : "no", attn_lowp_path_name(ATTN_LOWP_AUTO, "bf16"),
         attn_lowp_path_name(ATTN_LOWP_AUTO, "f16"), attn_lowp_path_name(ATTN_LOWP_AUTO, "i8"));
}

static void test_beta_zero_ignores_nan_and_k_zero(void) {
  float A[6] = {1, 2, 3, 4, 5, 6}, B[6] = {1, 0, 0, 1, 1, 1}, C[4];
  for (int pi = 0; pi < (int)(sizeof PATHS / sizeof PATHS[0]); pi++) {
    if (!attn_lowp_path_available(PATHS[pi], "bf16")) continue;
    for (int i = 0; i < 4; i++) C[i] = NAN;
    CHECK_OK(attn_gemm_bf16_f32in_path(PATHS[pi], 0, 0, 2, 2, 3, 1, A, 3, B, 2, 0, C, 2));
    CHECK(C[0] == 4 && C[1] == 5 && C[2] == 10 && C[3] == 11);
  }
  C[0] = 2, C[1] = NAN, C[2] = 3, C[3] = 4;
  CHECK_OK(attn_gemm_bf16_f32in(0, 0, 2, 2, 0, 1, A, 3, B, 2, 0.5f, C, 2)); /* K = 0: beta C */
  CHECK(C[0] == 1 && isnan(C[1]) && C[2] == 1.5f && C[3] == 2);
  CHECK_OK(attn_gemm_bf16_f32in(0, 0, 2, 2, 0, 1, A, 3, B, 2, 0, C, 2));
  CHECK(C[0] == 0 && C[1] == 0 && C[2] == 0 && C[3] == 0);
  CHECK_OK(attn_gemm_f16(0, 0, 0, 5, 3, 1, NULL, 3, NULL, 5, 0, NULL, 5)); /* M = 0: nothing */
}

static void test_bad_arguments(void) {
  uint16_t a[4] = {0}, b[4] = {0};
  float c[4];
  CHECK_ERR(attn_gemm_bf16(0, 0, -1, 2, 2, 1, a, 2, b, 2, 0, c, 2), ATTN_EINVAL);
  CHECK_ERR(attn_gemm_bf16(0, 0, 2, 2, 2, 1, NULL, 2, b, 2, 0, c, 2), ATTN_EINVAL);
  CHECK_ERR(attn_gemm_bf16(0, 0, 2, 2, 2, 1, a, 1, b, 2, 0, c, 2), ATTN_EINVAL);
  CHECK_ERR(attn_gemm_f16(0, 1, 2, 2, 2, 1, a, 2, b, 1, 0, c, 2), ATTN_EINVAL);
  CHECK_ERR(attn_gemm_f16(0, 0, 2, 2, 2, 1, a, 2, b, 2, 0, c, 1), ATTN_EINVAL);
  CHECK_ERR(attn_gemm_f16(0, 0, 2, 2, 2, 1, a, 2, b, 2, 0, NULL, 2), ATTN_EINVAL);
  CHECK_ERR(attn_gemm_f16_path(ATTN_LOWP_AMX, 0, 0, 2, 2, 2, 1, a, 2, b, 2, 0, c, 2),
            ATTN_EUNSUPPORTED);
  CHECK_ERR(attn_gemm_bf16_path((attn_lowp_path)9, 0, 0, 2, 2, 2, 1, a, 2, b, 2, 0, c, 2),
            ATTN_EINVAL);
  uint8_t u[4] = {0};
  int8_t s[4] = {0};
  int32_t i[4];
  CHECK_ERR(attn_gemm_u8s8s32(1, 0, 2, 2, 2, u, 1, s, 2, i, 2), ATTN_EINVAL);
  CHECK_ERR(attn_gemm_u8s8s32(0, 0, 2, 2, 2, u, 2, NULL, 2, i, 2), ATTN_EINVAL);
  CHECK(!attn_lowp_path_available(ATTN_LOWP_AMX, "f16"));
  CHECK(!attn_lowp_path_available(ATTN_LOWP_PORTABLE, "f64"));
}

/* ---- conversions ---------------------------------------------------------- */
static float f_of(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static void test_bf16_conversion(void) {
  CHECK(attn_f32_to_bf16(1.0f) == 0x3f80);
  CHECK(attn_f32_to_bf16(f_of(0x3f808000)) == 0x3f80); /* tie -> even */
  CHECK(attn_f32_to_bf16(f_of(0x3f818000)) == 0x3f82); /* tie -> even (up) */
  CHECK(attn_f32_to_bf16(f_of(0x3f808001)) == 0x3f81);
  CHECK(attn_f32_to_bf16(-0.0f) == 0x8000);
  CHECK(attn_f32_to_bf16(INFINITY) == 0x7f80);
  CHECK(attn_f32_to_bf16(f_of(0x7f7fffff)) == 0x7f80); /* FLT_MAX rounds to inf */
  CHECK(isnan(attn_bf16_to_f32(attn_f32_to_bf16(f_of(0x7f800001))))); /* sNaN stays NaN */
  int bad = 0;
  for (uint32_t h = 0; h < 65536; h++) {
    float f = attn_bf16_to_f32((uint16_t)h);
    if (!isnan(f) && attn_f32_to_bf16(f) != h) bad++;
  }
  CHECK(bad == 0);
}

#if defined(__x86_64__)
#include <immintrin.h>
__attribute__((target("f16c"))) static uint16_t hw_f16(float x) {
  return (uint16_t)_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
__attribute__((target("f16c"))) static float hw_f32(uint16_t h) { return _cvtsh_ss(h); }
#endif

static void test_f16_conversion(void) {
  CHECK(attn_f32_to_f16(1.0f) == 0x3c00);
  CHECK(attn_f32_to_f16(65504.0f) == 0x7bff);
  CHECK(attn_f32_to_f16(65519.99f) == 0x7bff);
  CHECK(attn_f32_to_f16(65520.0f) == 0x7c00);
  CHECK(attn_f32_to_f16(-1e6f) == 0xfc00);
  CHECK(attn_f32_to_f16(ldexpf(1, -24)) == 0x0001);
  CHECK(attn_f32_to_f16(ldexpf(1, -25)) == 0x0000);     /* tie -> even (0) */
  CHECK(attn_f32_to_f16(ldexpf(3, -25)) == 0x0002);     /* tie -> even (2) */
  CHECK(attn_f32_to_f16(ldexpf(1023.5f, -24)) == 0x0400); /* rounds up to the smallest normal */
  CHECK(attn_f16_to_f32(0x0001) == ldexpf(1, -24));
  CHECK(attn_f16_to_f32(0xfc00) == -INFINITY);
  CHECK(isnan(attn_f16_to_f32(attn_f32_to_f16(NAN))));
  int bad = 0;
  for (uint32_t h = 0; h < 65536; h++) {
    float f = attn_f16_to_f32((uint16_t)h);
    if (!isnan(f) && attn_f32_to_f16(f) != h) bad++;
  }
  CHECK(bad == 0);
#if defined(__x86_64__)
  /* against the F16C instructions, over random bit patterns */
  if (attn_cpu_detected()->f16c) {
    unsigned r = 9;
    int diff = 0;
    for (int i = 0; i < 200000; i++) {
      uint32_t u = (lcg(&r) << 8) ^ lcg(&r);
      float f = f_of(u);
      if (isnan(f)) continue;
      if (attn_f32_to_f16(f) != hw_f16(f)) diff++;
    }
    for (uint32_t h = 0; h < 65536; h++) {
      float a = attn_f16_to_f32((uint16_t)h), b = hw_f32((uint16_t)h);
      if (!(isnan(a) && isnan(b)) && memcmp(&a, &b, 4)) diff++;
    }
    CHECK(diff == 0);
  }
#endif
}

int main(void) {
  RUN(test_bf16_conversion);
  RUN(test_f16_conversion);
  RUN(test_bf16_all_paths);
  RUN(test_bf16_f32in_all_paths);
  RUN(test_bf16_error_is_statistically_small);
  RUN(test_bf16_transposed_a_same_bits);
  RUN(test_f16_all_paths);
  RUN(test_i8_all_paths_bit_exact);
  RUN(test_i8_extreme_values_at_max_depth);
  RUN(test_thread_count_does_not_change_bits);
  RUN(test_kernel_packer_same_bytes);
  RUN(test_direct_tiles_same_bits);
  RUN(test_amx_permission_refused_falls_back);
  RUN(test_beta_zero_ignores_nan_and_k_zero);
  RUN(test_bad_arguments);
  HARNESS_END();
}
