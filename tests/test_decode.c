/* Decode attention (attn/decode.h) against the math path of
 * attn_sdpa_forward with the equivalent descriptor (decode_case.h), at the
 * active ISA level (tests/run.sh runs this program at every level), for
 * every cache storage, GQA/MQA/MHA, each modifier, page sizes, ragged
 * batches, chunk boundaries, and thread counts; bad views refused by name.
 *
 * Tolerances: against the math path on the same (widened) cache values,
 * out within 2e-5 + 1e-4 |ref| and lse within 2e-5 + 1e-5 |ref| (f32
 * summation order and exp rounding only). Against the unrounded f32 rows
 * (the storage's own error), norm-relative: max |out - ref| <= tol max
 * |ref| with tol 1e-3 for f16, 1e-2 for bf16 (8 bits of mantissa) and
 * int8 (per token and head scales). */
#include <stdlib.h>

#include "decode_case.h"
#include "kernels/cpu.h"
#include "kernels/decode/decode_internal.h"
#include "kernels/kern.h"
#include "kernels/util.h"

static const int dtypes[] = {ATTN_F32, ATTN_F16, ATTN_BF16, ATTN_I8};
static const char *const dnames[] = {"f32", "f16", "bf16", "i8"};

/* the integer P·V against the f32 one, norm-relative (measured: see
 * test_i8pv_error) */
static const double I8PV_TOL = 4e-3;

/* the bf16 dot products (scores and weights) against the f32 scores and
 * P·V, norm-relative (measured: see test_bf16dot_error) */
static const double BF16DOT_TOL = 6e-3;

/* out of a bf16 P·V against ref, the math path on the same q (as the scores
 * see it) and cache: each weight p_j rounded to bf16 (8 significant bits)
 * moves it by at most 2^-8 p_j, so |out - ref| <= 2^-8 sum_j p_j |v_j| / l =
 * 2^-8 rabs (the math path on |v|), plus f32 rounding */
static void check_bf16pv(const float *out, const float *ref, const float *rabs, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    const double bound = ldexp(rabs[i], -8) + 2e-5 + 1e-4 * fabs(ref[i]);
    if (!(fabs((double)out[i] - ref[i]) <= bound) && !(isnan(out[i]) && isnan(ref[i]))) {
      printf("  bf16 P·V: out[%lld] = %.8g, want %.8g within %.3g\n", (long long)i, out[i], ref[i],
             bound);
      h_case_failed = 1;
      return;
    }
  }
}

/* the queries as the bf16 scores see them: each row times the scale,
 * rounded to bf16 (to nearest even), divided by the scale */
static void bf16_rounded_q(const dprob *p, float *qq) {
  const dcase *c = &p->c;
  const float scale = p->d.has_scale ? p->d.scale : 1.0f / sqrtf((float)c->D);
  const int64_t n = (int64_t)c->B * c->Hq * c->Lq * c->D;
  for (int64_t i = 0; i < n; i++)
    qq[i] = attn_bf16_to_f32(attn_f32_to_bf16(p->q[i] * scale)) / scale;
}

/* 1 if the level runs case p's bf16 P·V (1) and scores (2) as dot products */
static int bf16dot_of(const dprob *p) {
  const attn_decode_ops *ops = attn_kern_get()->decode;
  attn_kv_view v;
  if (p->c.dtype != ATTN_BF16 || !ops->pv_bf16 || attn_kvc_view(p->kvc, &v)) return 0;
  return 1 | (v.layout == ATTN_KV_K_TILED && ops->scores_kt_bf16 ? 2 : 0);
}

static double storage_tol(int dtype) {
  return dtype == ATTN_F32 ? 1e-5 : dtype == ATTN_F16 ? 1e-3 : 1e-2;
}

/* decode vs math on the widened cache (tight) and on the f32 rows (the
 * storage's tolerance) */
static void check_case(const dcase *c, const char *what) {
  dprob p;
  if (dprob_make(&p, c)) {
    printf("  %s: setup failed: %s\n", what, attn_last_error());
    h_case_failed = 1;
    dprob_free(&p);
    return;
  }
  const int64_t nout = dc_nout(&p);
  float *ro = malloc((size_t)nout * 4), *rl = malloc((size_t)dc_nlse(&p) * 4);
  /* a level with an integer P·V (int8): the tight checks on P·V in f32
   * (int8_pv_f32), then the default call within the weights' quantisation
   * of that and within the storage's tolerance of the f32 rows */
  const int i8pv = c->dtype == ATTN_I8 && attn_kern_get()->decode->pv_i8;
  /* a level with a bf16 dot product: the same, bf16_f32 for the tight ones */
  const int bf16dot = bf16dot_of(&p);
  float *dflt = NULL;
  if (i8pv || bf16dot) {
    dflt = malloc((size_t)nout * 4);
    if (bf16dot) p.d.bf16_f32 = 2; /* the dot products, fast here or not */
    CHECK_OK(dprob_decode(&p));
    memcpy(dflt, p.out, (size_t)nout * 4);
    p.d.int8_pv_f32 = 1;
    p.d.bf16_f32 = 1;
  }
  CHECK_OK(dprob_decode(&p));
  /* a level with an int8 dot product quantises q too: the tight check against
   * exactly that, the storage's tolerance below against the f32 rows */
  float *qq = NULL;
  if (c->dtype == ATTN_I8 && attn_kern_get()->decode->scores_i8 &&
      c->D <= ATTN_DECODE_I8DOT_MAX_D) {
    qq = malloc((size_t)c->B * c->Hq * c->Lq * c->D * sizeof(float));
    dprob_quantized_q(&p, qq);
  }
  CHECK_OK(dprob_reference_q(&p, qq ? qq : p.q, p.kw, p.vw, ro, rl));
  free(qq);
  int before = h_case_failed;
  h_case_failed = 0;
  CHECK_CLOSE("out", p.out, ro, nout, 2e-5, 1e-4);
  CHECK_CLOSE("lse", p.lse, rl, dc_nlse(&p), 2e-5, 1e-5);
  if (dflt && i8pv) /* u8 weights: <= 1/510 of a block's largest per key */
    CHECK_NORMREL(dflt, p.out, nout, I8PV_TOL);
  if (dflt && bf16dot) { /* bf16 weights against the same q rounded as the scores round it */
    const int64_t nq = (int64_t)c->B * c->Hq * c->Lq * c->D,
                  nv = (int64_t)c->B * c->Hkv * p.Lk * c->Dv;
    float *qb = malloc((size_t)nq * 4), *va = malloc((size_t)nv * 4),
          *ra = malloc((size_t)nout * 4);
    if (bf16dot & 2)
      bf16_rounded_q(&p, qb);
    else
      memcpy(qb, p.q, (size_t)nq * 4);
    for (int64_t i = 0; i < nv; i++)
      va[i] = fabsf(p.vw[i]);
    CHECK_OK(dprob_reference_q(&p, qb, p.kw, p.vw, ro, rl));
    CHECK_OK(dprob_reference_q(&p, qb, p.kw, va, ra, rl));
    check_bf16pv(dflt, ro, ra, nout);
    CHECK_NORMREL(dflt, p.out, nout, BF16DOT_TOL);
    free(qb), free(va), free(ra);
  }
  if (dflt) {
    memcpy(p.out, dflt, (size_t)nout * 4);
    free(dflt);
  }
  CHECK_OK(dprob_reference(&p, p.k32, p.v32, ro, rl));
  CHECK_NORMREL(p.out, ro, nout, storage_tol(c->dtype));
  if (h_case_failed) printf("  (case: %s)\n", what);
  h_case_failed |= before;
  free(ro), free(rl);
  dprob_free(&p);
}

static void test_every_storage_gqa_mqa_mha(void) {
  for (int t = 0; t < 4; t++) {
    char w[96];
    dcase c = dcase_plain(dtypes[t], 8, 2, 1, 64, 300); /* GQA, 2 chunks */
    snprintf(w, sizeof w, "%s gqa", dnames[t]);
    check_case(&c, w);
    c = dcase_plain(dtypes[t], 4, 1, 3, 32, 45); /* MQA, 3 queries */
    snprintf(w, sizeof w, "%s mqa", dnames[t]);
    check_case(&c, w);
    c = dcase_plain(dtypes[t], 2, 2, 1, 16, 20); /* MHA */
    snprintf(w, sizeof w, "%s mha", dnames[t]);
    check_case(&c, w);
    c = dcase_plain(dtypes[t], 6, 3, 2, 37, 33); /* odd D and Dv: SIMD tails */
    c.Dv = 21;
    snprintf(w, sizeof w, "%s odd D", dnames[t]);
    check_case(&c, w);
  }
}

/* the issue's shape at a small Lk: 32 query heads over 8, D = 128; and
 * D = 128 (the kernels' instance with constant loop counts) with 15 and 3
 * rows per KV head (tiles of 8, 4, 2 and 1 rows) */
static void test_llama_shape(void) {
  for (int t = 0; t < 4; t++) {
    dcase c = dcase_plain(dtypes[t], 32, 8, 1, 128, 600);
    check_case(&c, dnames[t]);
    char w[64];
    c = dcase_plain(dtypes[t], 15, 1, 1, 128, 333);
    snprintf(w, sizeof w, "%s D 128, 15 rows", dnames[t]);
    check_case(&c, w);
    c = dcase_plain(dtypes[t], 6, 2, 1, 128, 77);
    snprintf(w, sizeof w, "%s D 128, 3 rows", dnames[t]);
    check_case(&c, w);
  }
}

static void test_each_modifier(void) {
  for (int t = 0; t < 4; t++)
    for (int m = 0; m < 6; m++) {
      dcase c = dcase_plain(dtypes[t], 4, 2, 4, 32, 290);
      char w[96];
      const char *name = "";
      switch (m) {
      case 0: c.window = 50, name = "window"; break;
      case 1: c.alibi = 1, name = "alibi"; break;
      case 2: c.softcap = 2.5f, name = "softcap"; break;
      case 3: c.sinks = 1, name = "sinks"; break;
      case 4: c.causal = 0, name = "not causal"; break;
      default: c.window = 7, c.alibi = 1, c.softcap = 3.0f, c.sinks = 1, name = "all"; break;
      }
      snprintf(w, sizeof w, "%s %s", dnames[t], name);
      check_case(&c, w);
    }
}

/* ragged batch: lengths 1, 300 (two chunks), 17, 0 (an empty cache: rows
 * see no key), 260, 3 (shorter than Lq: some queries before position 0) */
static void test_ragged_batch(void) {
  for (int t = 0; t < 4; t++)
    for (int ps = 0; ps < 2; ps++) {
      dcase c = dcase_plain(dtypes[t], 4, 2, 4, 24, 1);
      c.B = 6;
      const int lens[6] = {1, 300, 17, 0, 260, 3};
      memcpy(c.lens, lens, sizeof lens);
      c.page_size = ps ? 16 : 0;
      c.sinks = t == 3;
      char w[64];
      snprintf(w, sizeof w, "%s ragged %s", dnames[t], ps ? "paged" : "contiguous");
      check_case(&c, w);
    }
}

static void test_lk_one_and_chunk_edges(void) {
  const int lens[] = {1, 2, 255, 256, 257, 513, 1000};
  for (int i = 0; i < 7; i++) {
    dcase c = dcase_plain(ATTN_F32, 4, 4, 1, 16, lens[i]);
    char w[32];
    snprintf(w, sizeof w, "len %d", lens[i]);
    check_case(&c, w);
  }
}

/* out and lse of case c at th threads, as bits (pv_f32: P·V in f32; nanq:
 * a NaN in query 0's element 3; c->layout, when set, checked on the view) */
static void decode_run(const dcase *c, int th, int pv_f32, int nanq, float *out, float *lse) {
  dprob p;
  CHECK(dprob_make(&p, c) == 0);
  attn_kv_view v;
  CHECK_OK(attn_kvc_view(p.kvc, &v));
  CHECK(!c->layout || v.layout == c->layout);
  p.d.int8_pv_f32 = pv_f32;
  if (nanq) p.q[3] = NAN;
  const int saved = attn_get_num_threads();
  attn_set_num_threads(th);
  CHECK_OK(dprob_decode(&p));
  attn_set_num_threads(saved);
  memcpy(out, p.out, (size_t)dc_nout(&p) * 4);
  memcpy(lse, p.lse, (size_t)dc_nlse(&p) * 4);
  dprob_free(&p);
}

static void decode_bits(const dcase *c, int threads, float *out, float *lse) {
  decode_run(c, threads, 0, 0, out, lse);
}

/* page sizes 1, 7 (odd), 16 and the contiguous cache: the same blocks, so
 * the same bits; and each against the math path. f16 and bf16 in each of
 * their layouts (the K-tiled one: the page sizes of whole tiles); int8 in
 * the library's choice of layout (the int8 tiled one gives the rows' bits) */
static int layouts_of(int dtype, int *lay) {
  lay[0] = dtype == ATTN_I8 ? 0 : ATTN_KV_ROWS;
  lay[1] = ATTN_KV_K_TILED;
  return dtype == ATTN_F16 || dtype == ATTN_BF16 ? 2 : 1;
}

static void test_page_sizes_same_bits(void) {
  static const int sizes[] = {1, 7, 16, 64}; /* 1-16: a chunk's KV heads run together */
  for (int t = 0; t < 4; t++) {
    int lay[2];
    const int nl_ = layouts_of(dtypes[t], lay);
    for (int li = 0; li < nl_; li++) {
      dcase c = dcase_plain(dtypes[t], 8, 2, 2, 32, 277);
      c.B = 2;
      c.lens[1] = 90;
      c.alibi = 1;
      c.layout = lay[li];
      const int64_t no = 2 * 8 * 2 * 32, nl = 2 * 8 * 2;
      float *o0 = malloc(no * 4), *l0 = malloc(nl * 4), *o1 = malloc(no * 4), *l1 = malloc(nl * 4);
      decode_bits(&c, 2, o0, l0);
      for (int i = 0; i < 4; i++) {
        if (c.layout == ATTN_KV_K_TILED && sizes[i] % 16) continue;
        c.page_size = sizes[i];
        for (int th = 1; th <= 3; th++) { /* pages up to a block: the heads inner (run_unit) */
          decode_bits(&c, th, o1, l1);
          CHECK(!memcmp(o0, o1, no * 4) && !memcmp(l0, l1, nl * 4));
        }
        char w[64];
        snprintf(w, sizeof w, "%s layout %d page %d", dnames[t], c.layout, sizes[i]);
        check_case(&c, w);
      }
      free(o0), free(l0), free(o1), free(l1);
    }
  }
  /* a window, sinks and a softcap, 4 KV heads, three sequences: the heads run together */
  for (int li = 0; li < 2; li++) {
    dcase c = dcase_plain(ATTN_F16, 8, 4, 1, 32, 300);
    c.B = 3;
    c.lens[1] = 33, c.lens[2] = 257;
    c.window = 100, c.sinks = 1, c.softcap = 20.0f;
    c.layout = li ? ATTN_KV_K_TILED : ATTN_KV_ROWS;
    const int64_t no = 3 * 8 * 32, nl = 3 * 8;
    float *o0 = malloc(no * 4), *l0 = malloc(nl * 4), *o1 = malloc(no * 4), *l1 = malloc(nl * 4);
    decode_bits(&c, 1, o0, l0);
    for (int i = 0; i < 3; i++) {
      if (c.layout == ATTN_KV_K_TILED && sizes[i] % 16) continue;
      c.page_size = sizes[i];
      decode_bits(&c, 2, o1, l1);
      CHECK(!memcmp(o0, o1, no * 4) && !memcmp(l0, l1, nl * 4));
      char w[64];
      snprintf(w, sizeof w, "f16 layout %d window sinks softcap page %d", c.layout, sizes[i]);
      check_case(&c, w);
    }
    free(o0), free(l0), free(o1), free(l1);
  }
}

static void test_thread_count_same_bits(void) {
  dcase c = dcase_plain(ATTN_F16, 8, 2, 2, 64, 2100); /* 9 chunks of 256 */
  c.B = 2;
  c.lens[1] = 700;
  c.softcap = 4.0f;
  const int64_t no = 2 * 8 * 2 * 64, nl = 2 * 8 * 2;
  float *o1 = malloc(no * 4), *l1 = malloc(nl * 4), *o2 = malloc(no * 4), *l2 = malloc(nl * 4);
  decode_bits(&c, 1, o1, l1);
  for (int nt = 2; nt <= 3; nt++) {
    decode_bits(&c, nt, o2, l2);
    CHECK(!memcmp(o1, o2, no * 4) && !memcmp(l1, l2, nl * 4));
  }
  check_case(&c, "threads case");
  free(o1), free(l1), free(o2), free(l2);
}

/* the active level's micro-kernels against the portable ones on a block
 * with odd sizes (R 11 rows, D 37, Dv 29, 13 keys) */
/* The threads' runs of items (decode_internal.h): claimed in turn by
 * threads of one program, every item comes out once, each owner's in order
 * from its front, a thief's from the back half of the fullest run; then by
 * 4 OpenMP threads at once, every item exactly once. */
static void test_item_runs(void) {
  enum { T = 3, N = 10 };
  attn_decode_run runs[T];
  for (int t = 0; t < T; t++)
    attn_decode_run_init(runs, T, t, N); /* [0, 3) [3, 6) [6, 10) */
  int seen[N] = {0};
  /* thread 0 takes its run, then steals [8, 10) from thread 2's [6, 10) */
  const int64_t want0[] = {0, 1, 2, 8, 9};
  for (int i = 0; i < 5; i++) {
    const int64_t k = attn_decode_claim(runs, T, 0);
    CHECK(k == want0[i]);
    if (k >= 0 && k < N) seen[k]++;
  }
  /* thread 2 keeps [6, 8); thread 1 its [3, 6); thread 0 steals 5 from 1 */
  CHECK(attn_decode_claim(runs, T, 2) == 6);
  CHECK(attn_decode_claim(runs, T, 1) == 3);
  CHECK(attn_decode_claim(runs, T, 0) == 5); /* [4, 6): back half from 5 */
  CHECK(attn_decode_claim(runs, T, 1) == 4);
  CHECK(attn_decode_claim(runs, T, 2) == 7);
  seen[6]++, seen[3]++, seen[5]++, seen[4]++, seen[7]++;
  for (int t = 0; t < T; t++)
    CHECK(attn_decode_claim(runs, T, t) == -1);
  for (int i = 0; i < N; i++)
    CHECK(seen[i] == 1);

  static const int64_t ns[] = {0, 1, 3, 5, 1000, 4099};
  for (size_t c = 0; c < sizeof ns / sizeof ns[0]; c++) {
    const int64_t n = ns[c];
    attn_decode_run r4[4];
    int *count = calloc((size_t)n + 1, sizeof(int));
    int bad = 0;
#pragma omp parallel num_threads(4) reduction(| : bad)
    {
      const int t = attn_thread_id(), nt = attn_team_size();
      attn_decode_run_init(r4, nt, t, n);
#pragma omp barrier
      for (int64_t k; (k = attn_decode_claim(r4, nt, t)) >= 0;) {
        if (k >= n) {
          bad = 1;
          break;
        }
#pragma omp atomic
        count[k]++;
      }
    }
    CHECK(!bad);
    for (int64_t i = 0; i < n; i++)
      CHECK(count[i] == 1);
    free(count);
  }
}

static void test_ukr_level_matches_generic(void) {
  const attn_decode_ops *lv = attn_kern_get()->decode, *gen = attn_decode_ops_generic();
  if (lv == gen) {
    SKIP("level %s runs the portable kernels", attn_isa_name(attn_isa_active()));
    return;
  }
  enum { R = 11, D = 37, DV = 29, N = 13 };
  static float kf[N][D], vf[N][DV];
  static uint16_t kh[N][D], vh[N][DV];
  static int8_t ki[N][D], vi[N][DV];
  float q[R * D], p[R * ATTN_DECODE_NB], corr[R];
  fill_uniform(&kf[0][0], N * D, 11, -1, 1);
  fill_uniform(&vf[0][0], N * DV, 12, -1, 1);
  fill_uniform(q, R * D, 13, -1, 1);
  fill_uniform(p, R * ATTN_DECODE_NB, 14, 0, 1);
  fill_uniform(corr, R, 15, 0.2f, 1);
  for (int j = 0; j < N; j++) {
    for (int e = 0; e < D; e++)
      kh[j][e] = attn_f32_to_f16(kf[j][e]), ki[j][e] = (int8_t)(kf[j][e] * 120);
    for (int e = 0; e < DV; e++)
      vh[j][e] = attn_f32_to_f16(vf[j][e]), vi[j][e] = (int8_t)(vf[j][e] * 120);
  }
  for (int t = 0; t < 4; t++) {
    attn_decode_block b = {.dtype = dtypes[t], .n = N, .D = D, .Dv = DV};
    for (int j = 0; j < N; j++) {
      b.k[j] = t == 0 ? (const void *)kf[j] : t == 3 ? (const void *)ki[j] : (const void *)kh[j];
      b.v[j] = t == 0 ? (const void *)vf[j] : t == 3 ? (const void *)vi[j] : (const void *)vh[j];
    }
    float s1[R * ATTN_DECODE_NB] = {0}, s2[R * ATTN_DECODE_NB] = {0};
    lv->scores(&b, q, R, s1);
    gen->scores(&b, q, R, s2);
    CHECK_CLOSE("scores", s1, s2, R * ATTN_DECODE_NB, 1e-4, 1e-5);
    float a1[R * DV], a2[R * DV];
    fill_uniform(a1, R * DV, 16, -1, 1);
    memcpy(a2, a1, sizeof a1);
    lv->pv(&b, p, corr, R, a1);
    gen->pv(&b, p, corr, R, a2);
    CHECK_CLOSE("pv", a1, a2, R * DV, 1e-4, 1e-5);
  }
}

/* The level's plain-block softmax (attn_decode_ops.softmax, where it has
 * one) against its contract (decode_ukr.h) computed here with expf: R 1-12
 * rows (the AVX-512 kernel's tiles of 4 and its single rows, the avx2
 * kernel's groups of 8), n 32, 13 and 1 keys, f32 and int8 (ks on the
 * scores, vs on the weights); rows of the first block (m -inf), with a
 * running max above the block's (corr exactly 1), all keys -inf (left
 * alone: m, l untouched, corr 1, p 0), some keys -inf, a NaN key (it
 * reaches p and l). m the same bits; the rest within expf's rounding. */
static void test_softmax_level(void) {
  const attn_decode_ops *lv = attn_kern_get()->decode;
  if (!lv->softmax) {
    SKIP("level %s has no block softmax", attn_isa_name(attn_isa_active()));
    return;
  }
  enum { NB = ATTN_DECODE_NB, RMAX = 12 };
  static const int Rs[] = {1, 3, 4, 5, 8, 12}, ns[] = {NB, 13, 1};
  for (int i8 = 0; i8 < 2; i8++)
    for (int ri = 0; ri < 6; ri++)
      for (int ni = 0; ni < 3; ni++) {
        const int R = Rs[ri], n = ns[ni];
        attn_decode_block b = {.dtype = i8 ? ATTN_I8 : ATTN_F32, .n = n, .D = 8, .Dv = 8};
        float s[RMAX * NB], s0[RMAX * NB], p[RMAX * NB], m[RMAX], l[RMAX], corr[RMAX];
        float wp[RMAX * NB], wm[RMAX], wl[RMAX], wc[RMAX];
        int alone[RMAX];
        fill_uniform(s0, RMAX * NB, 31 + ri * 3 + ni, -6, 6);
        fill_uniform(b.ks, NB, 41, 0.5f, 1.5f);
        fill_uniform(b.vs, NB, 42, 0.01f, 0.1f);
        int want_any = 0;
        for (int r = 0; r < R; r++) {
          const int kind =
              (r + ri + ni) % 5; /* 0 plain, 1 m above, 2 all -inf, 3 some -inf, 4 NaN */
          float *sr = s0 + r * NB;
          m[r] = kind == 1 ? 40.0f : r % 2 ? -INFINITY : 1.5f;
          l[r] = m[r] == -INFINITY ? 0.0f : 2.0f + r;
          if (kind == 2)
            for (int j = 0; j < n; j++)
              sr[j] = -INFINITY;
          if (kind == 3)
            for (int j = 0; j < n; j += 3)
              sr[j] = -INFINITY;
          if (kind == 4) sr[n / 2] = NAN;
          /* the contract */
          float bm = -INFINITY;
          int nan = 0;
          for (int j = 0; j < n; j++) {
            const float x = i8 ? sr[j] * b.ks[j] : sr[j];
            if (x != x)
              nan = 1;
            else if (x > bm)
              bm = x;
          }
          wm[r] = m[r], wl[r] = l[r], wc[r] = 1.0f;
          for (int j = 0; j < NB; j++)
            wp[r * NB + j] = 0.0f;
          alone[r] = bm == -INFINITY && !nan;
          if (alone[r]) continue;
          want_any = 1;
          const float mn = bm > m[r] ? bm : m[r];
          wc[r] = mn == m[r] ? 1.0f : expf(m[r] - mn);
          double sum = 0;
          for (int j = 0; j < n; j++) {
            const float x = i8 ? sr[j] * b.ks[j] : sr[j], e = expf(x - mn);
            sum += e;
            wp[r * NB + j] = i8 ? e * b.vs[j] : e;
          }
          wl[r] = (float)(l[r] * wc[r] + sum);
          wm[r] = mn;
        }
        memcpy(s, s0, sizeof s);
        for (int i = 0; i < RMAX * NB; i++)
          p[i] = 7.0f; /* entries past n: 0 after the call */
        float m0[RMAX], l0[RMAX];
        memcpy(m0, m, sizeof m0);
        memcpy(l0, l, sizeof l0);
        const int any = lv->softmax(&b, s, p, R, m, l, corr);
        CHECK(any == want_any);
        for (int r = 0; r < R; r++) {
          CHECK(memcmp(&m[r], &wm[r], sizeof(float)) == 0);
          if (wm[r] == m0[r]) CHECK(corr[r] == 1.0f); /* exactly */
          if (alone[r]) CHECK(memcmp(&l[r], &l0[r], sizeof(float)) == 0);
        }
        CHECK_CLOSE("corr", corr, wc, R, 1e-30, 2e-6);
        CHECK_CLOSE("l", l, wl, R, 1e-30, 2e-6);
        CHECK_CLOSE("p", p, wp, R * NB, 1e-30, 2e-6);
      }
}

/* The level's K-tiled scores (scores_kt, where it has them) against the
 * generic scores on the same keys in rows: R 1-16 rows (tiles of 8, 4, 2,
 * 1), D 37 (an odd depth) and 128, blocks from lane toff 0, 5 and 15 of
 * their first tile with n 1, 13 and 32 keys; entries past n untouched; and
 * each key's score the same bits at any lane, toff and n (the contract:
 * the order of a key's sum depends on R and D alone). */
static void test_scores_kt_level(void) {
  const attn_decode_ops *lv = attn_kern_get()->decode, *gen = attn_decode_ops_generic();
  if (!lv->scores_kt) {
    SKIP("level %s has no K-tiled scores", attn_isa_name(attn_isa_active()));
    return;
  }
  enum { NB = ATTN_DECODE_NB, DMAX = 128, NK = 48 };
  static uint16_t rows[NK][DMAX], tiles[3 * 16 * DMAX];
  static float q[16 * DMAX], sref[NK][16], s1[16 * NB], s2[16 * NB];
  static const int Ds[] = {37, 128}, Rs[] = {1, 2, 3, 4, 8, 11, 16}, toffs[] = {0, 5, 15},
                   ns[] = {1, 13, 32};
  for (int dt = 0; dt < 2; dt++)
    for (int di = 0; di < 2; di++) {
      const int D = Ds[di];
      float kf[NK * DMAX];
      fill_uniform(kf, NK * D, 21 + di, -1, 1);
      fill_uniform(q, 16 * D, 23, -1, 1);
      for (int j = 0; j < NK; j++)
        for (int d = 0; d < D; d++)
          rows[j][d] = dt ? attn_f32_to_bf16(kf[j * D + d]) : attn_f32_to_f16(kf[j * D + d]);
      for (int ri = 0; ri < 7; ri++) {
        const int R = Rs[ri];
        for (int key = 0; key < NK; key++)
          sref[key][0] = NAN; /* key's score of row 0 .. R-1, first seen */
        for (int ti = 0; ti < 3; ti++)
          for (int ni = 0; ni < 3; ni++) {
            const int toff = toffs[ti], n = ns[ni], key0 = 7 * ti + ni; /* the block's first key */
            attn_decode_block b = {.dtype = dt ? ATTN_BF16 : ATTN_F16, .n = n, .D = D, .Dv = D};
            b.toff = toff;
            b.nt = (toff + n + 15) / 16;
            for (int i = 0; i < b.nt; i++) {
              for (int l = 0; l < 16; l++) { /* lane l of tile i: key key0 - toff + 16 i + l */
                const int key = key0 - toff + 16 * i + l;
                for (int d = 0; d < D; d++)
                  tiles[i * 16 * D + 16 * d + l] = key >= 0 && key < NK ? rows[key][d] : 0x7e00;
              }
              b.kt[i] = tiles + i * 16 * D;
            }
            for (int j = 0; j < n; j++)
              b.k[j] = rows[key0 + j];
            for (int i = 0; i < 16 * NB; i++)
              s1[i] = s2[i] = -7.0f;
            lv->scores_kt(&b, q, R, s1);
            gen->scores(&b, q, R, s2);
            CHECK_CLOSE("scores_kt", s1, s2, R * NB, 1e-5, 1e-5);
            for (int r = 0; r < R; r++)
              for (int j = 0; j < NB; j++) {
                const float x = s1[r * NB + j];
                if (j >= n) {
                  CHECK(x == -7.0f);
                  continue;
                }
                float *ref = &sref[key0 + j][0];
                if (r == 0 && isnan(ref[0]))
                  for (int rr = 0; rr < R; rr++)
                    ref[rr] = s1[rr * NB + j];
                CHECK(!memcmp(&ref[r], &x, sizeof x));
              }
          }
      }
    }
}

/* The K-tiled layout through the decode against the math path, at every
 * level (those without scores_kt take the keys out of their tiles):
 * contiguous and paged 16 and 32; blocks from mid-tile (windows); D 37 and
 * Dv 48; 3, 8 and 16 query rows per KV head; Lq 2; ALiBi, sinks, softcap;
 * the same bits for 1 and 2 threads and every page size. */
static void test_ktiled_layout(void) {
  dcase cs[3];
  cs[0] = dcase_plain(ATTN_F16, 8, 2, 2, 32, 277); /* R 8 */
  cs[0].B = 2, cs[0].lens[1] = 90, cs[0].alibi = 1;
  cs[1] = dcase_plain(ATTN_BF16, 6, 2, 1, 37, 300); /* R 3, odd depth, Dv 48 */
  cs[1].Dv = 48, cs[1].B = 3, cs[1].lens[1] = 17, cs[1].lens[2] = 129;
  cs[1].window = 37, cs[1].sinks = 1, cs[1].softcap = 20.0f;
  cs[2] = dcase_plain(ATTN_F16, 16, 1, 1, 128, 700); /* R 16, the issue's D */
  cs[2].window = 250;
  static const int pages[] = {0, 16, 32};
  for (int k = 0; k < 3; k++) {
    dcase c = cs[k];
    c.layout = ATTN_KV_K_TILED;
    const int64_t no = (int64_t)c.B * c.Hq * c.Lq * c.Dv, nl = (int64_t)c.B * c.Hq * c.Lq;
    float *o0 = malloc(no * 4), *l0 = malloc(nl * 4), *o1 = malloc(no * 4), *l1 = malloc(nl * 4);
    decode_bits(&c, 1, o0, l0);
    for (int pi = 0; pi < 3; pi++) {
      c.page_size = pages[pi];
      for (int th = 1; th <= 2; th++) {
        decode_bits(&c, th, o1, l1);
        if (memcmp(o0, o1, no * 4) || memcmp(l0, l1, nl * 4)) {
          printf("  case %d page %d threads %d: not the same bits\n", k, c.page_size, th);
          h_case_failed = 1;
        }
      }
      char w[48];
      snprintf(w, sizeof w, "K-tiled case %d page %d", k, c.page_size);
      check_case(&c, w);
    }
    free(o0), free(l0), free(o1), free(l1);
  }
}

/* the level's int8 dot product (where it has one): the exact integer sums
 * of the quantised rows and the keys, times the row scales, bit for bit;
 * odd sizes (R 11, 13 keys) and D 37 (a tail) and 256 (the largest); keys
 * of -128 among them */
static void test_i8dot_exact(void) {
  const attn_decode_ops *lv = attn_kern_get()->decode;
  if (!lv->scores_i8) {
    SKIP("level %s has no int8 dot product", attn_isa_name(attn_isa_active()));
    return;
  }
  enum { R = 11, N = 13, DMAX = 256 };
  static const int dims[2] = {37, DMAX};
  for (int t = 0; t < 2; t++) {
    const int D = dims[t], ldq = (D + 63) / 64 * 64;
    static int8_t k[N][DMAX], q8[R * DMAX];
    float qs[R], qsum[R];
    uint32_t st = 99u + (uint32_t)t;
#define NEXT8() (st = st * 1664525u + 1013904223u, (int8_t)((int)((st >> 8) % 255u) - 127))
    for (int j = 0; j < N; j++)
      for (int e = 0; e < D; e++)
        k[j][e] = NEXT8();
    for (int j = 0; j < N; j += 3) /* -128: a valid key (the AVX2 kernel takes its magnitude) */
      k[j][(j * 7) % D] = -128, k[j][D - 1] = -128;
    memset(q8, 0, sizeof q8);
    for (int r = 0; r < R; r++) {
      for (int e = 0; e < D; e++)
        q8[r * ldq + e] = NEXT8();
      qs[r] = 0.001f * (float)(r + 1);
      int32_t sum = 0;
      for (int e = 0; e < D; e++)
        sum += q8[r * ldq + e];
      qsum[r] = (float)sum;
    }
    attn_decode_block b = {.dtype = ATTN_I8, .n = N, .D = D, .Dv = D};
    for (int j = 0; j < N; j++)
      b.k[j] = b.v[j] = k[j];
    float got[R * ATTN_DECODE_NB] = {0};
    lv->scores_i8(&b, q8, ldq, qsum, qs, R, got);
    int bad = 0;
    for (int r = 0; r < R; r++)
      for (int j = 0; j < N; j++) {
        int32_t dot = 0;
        for (int e = 0; e < D; e++)
          dot += (int32_t)q8[r * ldq + e] * k[j][e];
        bad += got[r * ATTN_DECODE_NB + j] != (float)dot * qs[r];
      }
    CHECK(bad == 0);
  }
#undef NEXT8
}

/* the level's integer P·V (where it has one) bit for bit against its
 * contract (decode_ukr.h) computed here: u8 weights of each row, the exact
 * integer sums, one fused multiply-add per element; rows of zeros, a
 * partial group of keys (13), column tails (Dv 37, 200: 64-column slabs),
 * row tiles of 4 + 4 + 3, 1 and 2; stale weights past n ignored; NaN, a
 * negative or a too small weight refused with acc untouched */
static void test_i8pv_exact(void) {
  const attn_decode_ops *lv = attn_kern_get()->decode;
  if (!lv->pv_i8) {
    SKIP("level %s has no integer P·V", attn_isa_name(attn_isa_active()));
    return;
  }
  /* blocks of 13 keys (one group of 16) and NB - 3 (groups of 16, the last
   * one partial, each with its own scale) */
  enum { RMAX = 11, N = ATTN_DECODE_NB - 3, DVMAX = 200, NBK = ATTN_DECODE_NB };
  static const int dvs[4] = {37, 128, DVMAX, 128}, rs[4] = {RMAX, 1, 2, 4}, ns[4] = {13, N, 13, N};
  static int8_t v[N][DVMAX];
  static float p[RMAX * NBK], corr[RMAX], acc[RMAX * DVMAX], want[RMAX * DVMAX];
  uint32_t st = 7u;
#define NEXT8() (st = st * 1664525u + 1013904223u, (int8_t)((int)((st >> 8) % 255u) - 127))
  for (int j = 0; j < N; j++)
    for (int e = 0; e < DVMAX; e++)
      v[j][e] = NEXT8();
#undef NEXT8
  for (int t = 0; t < 4; t++) {
    const int Dv = dvs[t], R = rs[t], n = ns[t];
    attn_decode_block b = {.dtype = ATTN_I8, .n = n, .D = 16, .Dv = Dv};
    for (int j = 0; j < n; j++)
      b.v[j] = v[j];
    fill_uniform(p, RMAX * NBK, 30 + (unsigned)t, 0, 1);
    fill_uniform(corr, RMAX, 40 + (unsigned)t, 0.2f, 1);
    fill_uniform(acc, RMAX * DVMAX, 50 + (unsigned)t, -1, 1);
    for (int r = 0; r < R; r++) {
      for (int j = n; j < NBK; j++) /* stale: past n */
        p[r * NBK + j] = r % 2 ? 1e30f : NAN;
      if (r % 3 == 0) /* a wide range of weights */
        for (int j = 0; j < n; j++)
          p[r * NBK + j] *= powf(10.0f, -(float)(j % 5));
    }
    for (int j = 0; j < n; j++)
      p[(R - 1) * NBK + j] = R > 2 ? 0.0f : p[(R - 1) * NBK + j]; /* a row of zeros */
    if (n > 16)
      for (int j = 0; j < 16; j++) /* row 1: a group of zeros before one of weights */
        p[NBK + j] = 0.0f;
    for (int r = 0; r < R; r++) {
      for (int c = 0; c < Dv; c++)
        want[r * Dv + c] = acc[r * Dv + c] * corr[r];
      for (int g = 0; g < n; g += 16) { /* each group: its scale, its integer sum */
        const int g1 = g + 16 < n ? g + 16 : n;
        float w = 0.0f;
        for (int j = g; j < g1; j++)
          w = p[r * NBK + j] > w ? p[r * NBK + j] : w;
        int u[16];
        for (int j = g; j < g1; j++)
          u[j - g] = w > 0.0f ? (int)nearbyintf(p[r * NBK + j] * (255.0f / w)) : 0;
        for (int c = 0; c < Dv; c++) {
          int32_t dot = 0;
          for (int j = g; j < g1; j++)
            dot += u[j - g] * v[j][c];
          want[r * Dv + c] = fmaf((float)dot, w / 255.0f, want[r * Dv + c]);
        }
      }
    }
    CHECK(lv->pv_i8(&b, p, corr, R, acc) == 1);
    int bad = 0;
    for (int i = 0; i < R * Dv; i++)
      bad += memcmp(&acc[i], &want[i], sizeof(float)) != 0;
    if (bad) printf("  Dv %d R %d n %d: %d of %d differ\n", Dv, R, n, bad, R * Dv);
    CHECK(bad == 0);
  }
  /* refused, acc untouched: NaN, a negative weight, inf, a largest one too small */
  attn_decode_block b = {.dtype = ATTN_I8, .n = N, .D = 16, .Dv = 37};
  for (int j = 0; j < N; j++)
    b.v[j] = v[j];
  static const float bad_w[4] = {NAN, -0.5f, INFINITY, 1e-35f};
  for (int k = 0; k < 8; k++) { /* in the first group, then in the last */
    fill_uniform(p, RMAX * NBK, 60, 0, 1);
    const int j0 = k < 4 ? 0 : (N - 1) & ~15, j1 = k < 4 ? 16 : N;
    for (int j = j0; j < j1; j++)
      p[NBK + j] = k % 4 == 3 ? 1e-36f : p[NBK + j];
    p[NBK + j0 + 4 % (j1 - j0)] = bad_w[k % 4]; /* row 1 */
    fill_uniform(acc, RMAX * DVMAX, 61, -1, 1);
    memcpy(want, acc, sizeof acc);
    CHECK(lv->pv_i8(&b, p, corr, 3, acc) == 0);
    CHECK(memcmp(acc, want, sizeof acc) == 0);
  }
}

/* The default call's error at the issue's shape over a long cache (Lk
 * 4000, 32 / 8 heads, D 128) against the call with *f32 set (P·V, or the
 * scores and P·V, in f32; the same cache) within tol, and each against the
 * f32 rows within the storage's tolerance, norm-relative; printed. */
static void default_error(const char *what, int *f32, dprob *p, double tol) {
  const int64_t n = dc_nout(p);
  float *a = malloc((size_t)n * 4), *ref = malloc((size_t)n * 4), *rl = malloc((size_t)n * 4);
  CHECK_OK(dprob_decode(p));
  memcpy(a, p->out, (size_t)n * 4);
  *f32 = 1;
  CHECK_OK(dprob_decode(p));
  double e_pv = 0, e_i = 0, e_f = 0, m = 0;
  CHECK_OK(dprob_reference(p, p->k32, p->v32, ref, rl));
  for (int64_t i = 0; i < n; i++) {
    e_pv = fmax(e_pv, fabs(a[i] - p->out[i]));
    e_i = fmax(e_i, fabs(a[i] - ref[i]));
    e_f = fmax(e_f, fabs(p->out[i] - ref[i]));
    m = fmax(m, fabs(ref[i]));
  }
  printf("  Lk 4000, 32/8 heads, D 128: |%s - f32| %.2e, |%s - f32 rows| %.2e, "
         "|f32 - f32 rows| %.2e (of max |out| %.3f)\n",
         what, e_pv / m, what, e_i / m, e_f / m, m);
  CHECK(e_pv <= tol * m);
  CHECK(e_i <= storage_tol(p->c.dtype) * m);
  free(a), free(ref), free(rl);
}

/* the integer P·V's error (against int8_pv_f32: the same scores) */
static void test_i8pv_error(void) {
  if (!attn_kern_get()->decode->pv_i8) {
    SKIP("level %s has no integer P·V", attn_isa_name(attn_isa_active()));
    return;
  }
  dcase c = dcase_plain(ATTN_I8, 32, 8, 1, 128, 4000);
  c.seed = 5;
  dprob p;
  CHECK(dprob_make(&p, &c) == 0);
  default_error("int P·V", &p.d.int8_pv_f32, &p, I8PV_TOL);
  dprob_free(&p);
}

/* The level's bf16 dot products (where it has them) against a scalar
 * emulation in double: scores_kt_bf16 on K-tiled blocks (R 1-16 rows:
 * tiles of 8, 4, 2, 1; D 37 and 128; a block from lane 0, 5 and 15 of its
 * first tile with 1, 13 and 32 keys) against the sums of the exact products
 * of the rows' bf16 pairs and the keys, entries past n untouched and each
 * key's score the same bits at any lane, toff and n; pv_bf16 (R 1-16, Dv
 * 29, 48 and 128, 1, 13 and 32 keys, the next block's rows given for its
 * prefetches or not) against acc corr + the sums of bf16(p) v, NaN weights
 * past n (never read). Within f32 summation rounding: a pair out of order,
 * a weight not rounded or a lane of the wrong column is far outside. */
static void test_bf16dot_kernels(void) {
  const attn_decode_ops *lv = attn_kern_get()->decode;
  if (!lv->pv_bf16 || !lv->scores_kt_bf16) {
    SKIP("level %s has no bf16 dot product", attn_isa_name(attn_isa_active()));
    return;
  }
  enum { NB = ATTN_DECODE_NB, DMAX = 128, NK = 48, RMAX = 16 };
  static uint16_t rows[NK][DMAX], tiles[3 * 16 * DMAX];
  static float kq[RMAX * DMAX], sref[NK][RMAX], s1[RMAX * NB], want[RMAX * NB];
  static uint16_t qb[RMAX * (DMAX + 2)];
  static const int Ds[] = {37, 128}, Rs[] = {1, 2, 3, 4, 8, 11, 16}, toffs[] = {0, 5, 15},
                   ns[] = {1, 13, 32};
  for (int di = 0; di < 2; di++) {
    const int D = Ds[di], ldq = D + D % 2;
    float kf[NK * DMAX];
    fill_uniform(kf, NK * D, 31 + di, -1, 1);
    fill_uniform(kq, RMAX * D, 33, -1, 1);
    for (int j = 0; j < NK; j++)
      for (int d = 0; d < D; d++)
        rows[j][d] = attn_f32_to_bf16(kf[j * D + d]);
    for (int r = 0; r < RMAX; r++)
      for (int d = 0; d < ldq; d++)
        qb[r * ldq + d] = d < D ? attn_f32_to_bf16(kq[r * D + d]) : 0;
    for (int ri = 0; ri < 7; ri++) {
      const int R = Rs[ri];
      for (int key = 0; key < NK; key++)
        sref[key][0] = NAN;
      for (int ti = 0; ti < 3; ti++)
        for (int ni = 0; ni < 3; ni++) {
          const int toff = toffs[ti], n = ns[ni], key0 = 7 * ti + ni;
          attn_decode_block b = {.dtype = ATTN_BF16, .n = n, .D = D, .Dv = D};
          b.toff = toff;
          b.nt = (toff + n + 15) / 16;
          for (int i = 0; i < b.nt; i++) {
            for (int l = 0; l < 16; l++) {
              const int key = key0 - toff + 16 * i + l;
              for (int d = 0; d < D; d++)
                tiles[i * 16 * D + 16 * d + l] = key >= 0 && key < NK ? rows[key][d] : 0x7fc0;
            }
            b.kt[i] = tiles + i * 16 * D;
          }
          for (int i = 0; i < RMAX * NB; i++)
            s1[i] = want[i] = -7.0f;
          for (int r = 0; r < R; r++)
            for (int j = 0; j < n; j++) {
              double x = 0;
              for (int d = 0; d < D; d++)
                x += (double)attn_bf16_to_f32(attn_f32_to_bf16(kq[r * D + d])) *
                     attn_bf16_to_f32(rows[key0 + j][d]);
              want[r * NB + j] = (float)x;
            }
          lv->scores_kt_bf16(&b, qb, ldq, R, s1);
          CHECK_CLOSE("scores_kt_bf16", s1, want, R * NB, 2e-5, 2e-5);
          for (int r = 0; r < R; r++)
            for (int j = 0; j < n; j++) {
              const float x = s1[r * NB + j];
              float *ref = &sref[key0 + j][0];
              if (r == 0 && isnan(ref[0]))
                for (int rr = 0; rr < R; rr++)
                  ref[rr] = s1[rr * NB + j];
              CHECK(!memcmp(&ref[r], &x, sizeof x));
            }
        }
    }
  }
  static const int Dvs[] = {29, 48, 128};
  static uint16_t vrows[NB][DMAX];
  static float p[RMAX * NB], corr[RMAX], a1[RMAX * DMAX], a2[RMAX * DMAX];
  for (int vi = 0; vi < 3; vi++) {
    const int Dv = Dvs[vi];
    float vf[NB * DMAX];
    fill_uniform(vf, NB * Dv, 41 + vi, -1, 1);
    for (int j = 0; j < NB; j++)
      for (int c = 0; c < Dv; c++)
        vrows[j][c] = attn_f32_to_bf16(vf[j * Dv + c]);
    fill_uniform(corr, RMAX, 44, 0.2f, 1);
    for (int ri = 0; ri < 7; ri++)
      for (int ni = 0; ni < 3; ni++)
        for (int pf = 0; pf < 2; pf++) {
          const int R = Rs[ri], n = ns[ni];
          attn_decode_block b = {.dtype = ATTN_BF16, .n = n, .D = Dv, .Dv = Dv};
          for (int j = 0; j < n; j++)
            b.v[j] = vrows[j];
          b.pn = pf ? NB : 0; /* the next block: the same rows */
          b.pv = (const void *const *)b.v;
          b.pk = (const void *const *)b.v;
          for (int j = n; pf && j < NB; j++)
            b.v[j] = vrows[j];
          fill_uniform(p, RMAX * NB, 45 + ni, 0, 1);
          for (int r = 0; r < R; r++)
            for (int j = n; j < NB; j++)
              p[r * NB + j] = NAN;
          fill_uniform(a1, RMAX * DMAX, 46, -1, 1);
          memcpy(a2, a1, sizeof a1);
          for (int r = 0; r < R; r++)
            for (int c = 0; c < Dv; c++) {
              double x = (double)a1[r * Dv + c] * corr[r];
              for (int j = 0; j < n; j++)
                x += (double)attn_bf16_to_f32(attn_f32_to_bf16(p[r * NB + j])) *
                     attn_bf16_to_f32(vrows[j][c]);
              a2[r * Dv + c] = (float)x;
            }
          lv->pv_bf16(&b, p, corr, R, a1);
          CHECK_CLOSE("pv_bf16", a1, a2, R * Dv, 2e-5, 2e-5);
          CHECK_CLOSE("pv_bf16 rows past R", a1 + R * Dv, a2 + R * Dv, (RMAX - R) * Dv, 0, 0);
        }
  }
}

/* the bf16 dot products' error (K-tiled: scores and P·V; against bf16_f32) */
static void test_bf16dot_error(void) {
  if (!attn_kern_get()->decode->pv_bf16) {
    SKIP("level %s has no bf16 dot product", attn_isa_name(attn_isa_active()));
    return;
  }
  dcase c = dcase_plain(ATTN_BF16, 32, 8, 1, 128, 4000);
  c.seed = 5;
  c.layout = ATTN_KV_K_TILED;
  dprob p;
  CHECK(dprob_make(&p, &c) == 0);
  CHECK(bf16dot_of(&p) == 3);
  const int64_t n = dc_nout(&p);
  float *by[3];
  for (int f = 0; f < 3; f++) { /* the default (0), f32 (1) and dot products (2) */
    p.d.bf16_f32 = f;
    CHECK_OK(dprob_decode(&p));
    by[f] = malloc((size_t)n * 4);
    memcpy(by[f], p.out, (size_t)n * 4);
  }
  /* the default is the dot products where the CPU runs them fast, else f32 */
  const int fast = attn_kern_get()->lowp.bf16_dot_auto;
  printf("  bf16 dot products %s here (bf16_dot_fast %d)\n", fast ? "taken" : "not taken",
         attn_cpu()->bf16_dot_fast);
  CHECK(memcmp(by[0], by[fast ? 2 : 1], (size_t)n * 4) == 0);
  CHECK(memcmp(by[1], by[2], (size_t)n * 4) != 0);
  for (int f = 0; f < 3; f++)
    free(by[f]);
  p.d.bf16_f32 = 2;
  default_error("bf16 dot", &p.d.bf16_f32, &p, BF16DOT_TOL);
  dprob_free(&p);
}

/* NaN in a query with an int8 cache: that row's output NaN (the float path
 * takes such items: a quantised NaN would be a number) */
static void test_i8_nan_query(void) {
  dcase c = dcase_plain(ATTN_I8, 4, 2, 1, 32, 300);
  dprob p;
  CHECK(dprob_make(&p, &c) == 0);
  p.q[3] = NAN; /* head 0 */
  CHECK_OK(dprob_decode(&p));
  CHECK(isnan(p.out[0]) && isnan(p.lse[0]));
  CHECK(isfinite(p.out[2 * 32]) && isfinite(p.lse[2])); /* head 2: the other KV head */
  dprob_free(&p);
}

/* The query rows' quantisation (attn_decode_quantize_q8) by hand on a row
 * built for it (ties to even, the clamp's end, a zero row, an overflowing
 * product and a NaN refused), and the level's quantize_q8 (where it has one)
 * with the same bits on rows of every length to 256 (tails of 1-15), the
 * padding zeroed to ldq */
static void test_quantize_q8_level(void) {
  enum { DMAX = 256, ROWS = 4 };
  static float x[ROWS * DMAX];
  static int8_t y0[ROWS * DMAX], y1[ROWS * DMAX];
  float s0[ROWS], s1[ROWS], m0[ROWS], m1[ROWS];
  /* row 0: max |x sc| 127 (so 127 / amax = 1): 2.5 -> 2, 3.5 -> 4, -4.5 -> -4,
   * -127 -> -127; row 1 zero; sc 1 */
  const float r0[8] = {2.5f, 3.5f, -4.5f, 127.0f, -127.0f, 0.49f, -0.5f, 1.5f};
  const int8_t w0[8] = {2, 4, -4, 127, -127, 0, 0, 2};
  memset(x, 0, sizeof x);
  memcpy(x, r0, sizeof r0);
  memset(y0, 0x55, sizeof y0);
  CHECK(attn_decode_quantize_q8(x, 2, 8, 1.0f, y0, 64, s0, m0) == 0);
  CHECK(memcmp(y0, w0, 8) == 0);
  CHECK(s0[0] == 1.0f && m0[0] == 2.0f + 4 - 4 + 127 - 127 + 0 + 0 + 2);
  int pad = 0;
  for (int e = 8; e < 128; e++)
    pad += y0[e] != 0;
  CHECK(pad == 0 && s0[1] == 0.0f && m0[1] == 0.0f);
  x[1] = 3e38f; /* times sc 2: inf */
  CHECK(attn_decode_quantize_q8(x, 1, 8, 2.0f, y0, 64, s0, m0) == 1);
  x[1] = NAN;
  CHECK(attn_decode_quantize_q8(x, 1, 8, 1.0f, y0, 64, s0, m0) == 1);

  const attn_decode_ops *lv = attn_kern_get()->decode;
  if (!lv->quantize_q8) {
    SKIP("level %s has no quantize_q8 (the portable loop)", attn_isa_name(attn_isa_active()));
    return;
  }
  static const int dims[] = {1, 7, 15, 16, 17, 37, 64, 100, 128, 200, 255, 256};
  int bad = 0;
  for (int di = 0; di < (int)(sizeof dims / sizeof dims[0]); di++) {
    const int D = dims[di], ldq = (D + 63) / 64 * 64;
    fill_uniform(x, ROWS * D, 70 + di, -3.0f, 3.0f);
    for (int e = 0; e < D; e++)
      x[1 * D + e] = 0.0f;      /* a zero row */
    x[2 * D + (D - 1)] = 40.0f; /* a row's max in its tail */
    for (int e = 0; e < D; e += 3)
      x[3 * D + e] = (float)(e % 9) - 4.5f; /* halves: ties at 127 / 4.5 scale */
    memset(y0, 0x55, sizeof y0), memset(y1, 0x2a, sizeof y1);
    const float sc = 0.0883883f;
    CHECK(attn_decode_quantize_q8(x, ROWS, D, sc, y0, ldq, s0, m0) == 0);
    CHECK(lv->quantize_q8(x, ROWS, D, sc, y1, ldq, s1, m1) == 0);
    bad += memcmp(y0, y1, (size_t)(ROWS * ldq)) != 0;
    bad += memcmp(s0, s1, sizeof s0) != 0 || memcmp(m0, m1, sizeof m0) != 0;
    x[2 * D + D / 2] = INFINITY; /* refused in row 2 */
    CHECK(lv->quantize_q8(x, ROWS, D, sc, y1, ldq, s1, m1) == 1);
    x[2 * D + D / 2] = NAN;
    CHECK(lv->quantize_q8(x, ROWS, D, sc, y1, ldq, s1, m1) == 1);
  }
  CHECK(bad == 0);
}

/* decode_run with the cache in the given layout */
static void decode_layout(dcase c, int layout, int th, int pv_f32, int nanq, float *out,
                          float *lse) {
  c.layout = layout;
  decode_run(&c, th, pv_f32, nanq, out, lse);
}

/* The int8 tiled layout (attn/decode.h) gives the row layout's bits, at
 * every level (levels without its kernels take the rows out of the tiles):
 * contiguous and paged; a block from mid-tile and mid-quad (a window);
 * depth of an odd number of dwords (D 36) and a last slab of 3 vectors (Dv
 * 48); 3, 8 and 16 query rows per KV head; Lq 2; P·V in f32; a NaN query
 * (the float scores). Each also against the math path (check_case). */
static void test_tiled_same_bits(void) {
  dcase cs[4];
  cs[0] = dcase_plain(ATTN_I8, 8, 2, 2, 32, 277); /* R 8 */
  cs[0].B = 2, cs[0].lens[1] = 90, cs[0].alibi = 1;
  cs[1] = dcase_plain(ATTN_I8, 6, 2, 1, 36, 300); /* R 3, odd dwords, Dv 48 */
  cs[1].Dv = 48, cs[1].B = 3, cs[1].lens[1] = 17, cs[1].lens[2] = 129;
  cs[1].window = 37, cs[1].sinks = 1, cs[1].softcap = 20.0f;
  cs[2] = dcase_plain(ATTN_I8, 16, 1, 1, 128, 700); /* R 16, the issue's D */
  cs[2].window = 250;
  cs[3] = dcase_plain(ATTN_I8, 4, 2, 1, 64, 1000); /* 3 chunks, the last ragged */
  static const int pages[] = {0, 16, 32};
  for (int k = 0; k < 4; k++)
    for (int pi = 0; pi < 3; pi++) {
      dcase c = cs[k];
      c.page_size = pages[pi];
      const int64_t no = (int64_t)c.B * c.Hq * c.Lq * c.Dv, nl = (int64_t)c.B * c.Hq * c.Lq;
      float *o0 = malloc(no * 4), *l0 = malloc(nl * 4), *o1 = malloc(no * 4), *l1 = malloc(nl * 4);
      for (int mode = 0; mode < 3; mode++) { /* default, P·V in f32, a NaN query */
        decode_layout(c, ATTN_KV_ROWS, 2, mode == 1, mode == 2, o0, l0);
        for (int th = 1; th <= 2; th++) {
          decode_layout(c, ATTN_KV_I8_TILED, th, mode == 1, mode == 2, o1, l1);
          if (memcmp(o0, o1, no * 4) || memcmp(l0, l1, nl * 4)) {
            printf("  case %d page %d mode %d threads %d: tiled != rows\n", k, c.page_size, mode,
                   th);
            h_case_failed = 1;
          }
        }
      }
      CHECK(isnan(o1[0]) && isnan(l1[0])); /* the last mode's NaN query: its row NaN */
      c.layout = ATTN_KV_I8_TILED;
      char w[48];
      snprintf(w, sizeof w, "i8 tiled case %d page %d", k, c.page_size);
      check_case(&c, w);
      free(o0), free(l0), free(o1), free(l1);
    }
}

/* weights the integer P·V refuses (a negative V scale, an infinite one, a
 * group of 16 keys whose weights are all above 0 and below
 * ATTN_DECODE_I8PV_MIN_W; put into the cache's memory through its view)
 * take the f32 P·V alike in both int8 layouts (pv_i8t and pv_i8 each check
 * the weights) */
static void test_i8_refused_weights_same_bits(void) {
  dcase c = dcase_plain(ATTN_I8, 8, 2, 1, 64, 200); /* 4 rows per KV head */
  float *o[2], *l[2];
  for (int bad = 0; bad < 3; bad++) {
    for (int t = 0; t < 2; t++) {
      c.layout = t ? ATTN_KV_I8_TILED : ATTN_KV_ROWS;
      dprob p;
      CHECK(dprob_make(&p, &c) == 0);
      attn_kv_view v;
      CHECK_OK(attn_kvc_view(p.kvc, &v));
      float *vs = (float *)v.v_scale; /* head 0: rows 0 .. capacity - 1 */
      if (bad < 2) vs[37] = bad ? INFINITY : -vs[37];
      for (int j = 32; bad == 2 && j < 48; j++) /* keys 32 .. 47: one group */
        vs[j] = 1e-38f;
      CHECK_OK(attn_decode_forward(&p.d, &v, p.q, p.out, p.lse));
      o[t] = malloc(8 * 64 * sizeof(float)), l[t] = malloc(8 * sizeof(float));
      memcpy(o[t], p.out, 8 * 64 * sizeof(float)), memcpy(l[t], p.lse, 8 * sizeof(float));
      dprob_free(&p);
    }
    CHECK(!memcmp(o[0], o[1], 8 * 64 * sizeof(float)) && !memcmp(l[0], l[1], 8 * sizeof(float)));
    CHECK(bad == 1 || isfinite(o[1][0])); /* finite, through the f32 P·V */
    for (int t = 0; t < 2; t++)
      free(o[t]), free(l[t]);
  }
}

/* NaN in one cached key reaches the rows that attend it, not others */
static void test_nan_in_cache_propagates(void) {
  dcase c = dcase_plain(ATTN_F32, 2, 2, 1, 16, 40);
  dprob p;
  CHECK(dprob_make(&p, &c) == 0);
  attn_kv_view v;
  CHECK_OK(attn_kvc_view(p.kvc, &v));
  ((float *)v.k)[5 * 16 + 3] = NAN; /* head 0, token 5 */
  CHECK_OK(attn_decode_forward(&p.d, &v, p.q, p.out, p.lse));
  CHECK(isnan(p.out[0]) && isnan(p.lse[0]));
  CHECK(isfinite(p.out[16]) && isfinite(p.lse[1]));
  dprob_free(&p);
  /* four query rows per KV head (the AVX-512 softmax's four-row path): the
   * NaN key of head 0 reaches its four rows, not head 1's */
  c = dcase_plain(ATTN_F32, 8, 2, 1, 16, 40);
  CHECK(dprob_make(&p, &c) == 0);
  CHECK_OK(attn_kvc_view(p.kvc, &v));
  ((float *)v.k)[5 * 16 + 3] = NAN;
  CHECK_OK(attn_decode_forward(&p.d, &v, p.q, p.out, p.lse));
  for (int h = 0; h < 8; h++)
    CHECK(h < 4 ? isnan(p.out[h * 16]) && isnan(p.lse[h])
                : isfinite(p.out[h * 16]) && isfinite(p.lse[h]));
  dprob_free(&p);
}

static void expect_err(const attn_decode_desc *d, const attn_kv_view *v, const float *q, float *out,
                       attn_status want, const char *needle) {
  attn_clear_error();
  attn_status s = attn_decode_forward(d, v, q, out, NULL);
  if (s != want || !strstr(attn_last_error(), needle)) {
    printf("  got %s \"%s\", want %s naming '%s'\n", attn_status_str(s), attn_last_error(),
           attn_status_str(want), needle);
    h_case_failed = 1;
  }
}

/* The prefetch hint (attn_decode_block.pf_l2): the rule, and the same bits
 * with prefetches into L1 or into L2 for every storage and layout, paged
 * too (a hint never changes a result; the L2 path runs here on any CPU) */
static void test_prefetch_hint_same_bits(void) {
  const int64_t M = 1 << 20;
  CHECK(!attn_decode_pf_l2_rule(1, 260 * M, 64 * M));   /* in L3: L1 hints */
  CHECK(attn_decode_pf_l2_rule(1, 260 * M, 128 * M));   /* more than a third: L2 */
  CHECK(!attn_decode_pf_l2_rule(0, 260 * M, 1024 * M)); /* not Intel: L1 */
  CHECK(!attn_decode_pf_l2_rule(1, 0, 1024 * M));       /* no cache size known */
  static const int dts[] = {ATTN_F32, ATTN_F16, ATTN_BF16, ATTN_I8};
  for (int t = 0; t < 4; t++)
    for (int pg = 0; pg < 2; pg++) {
      dcase c = dcase_plain(dts[t], 8, 2, 1, 64, 333);
      c.page_size = pg ? 16 : 0;
      dprob p;
      CHECK(dprob_make(&p, &c) == 0);
      p.d.bf16_f32 = 2; /* the bf16 dot products too, where the level has them */
      const int64_t n = dc_nout(&p);
      float *a = malloc((size_t)n * 4);
      attn_cpu_set_decode_pf(0);
      CHECK_OK(dprob_decode(&p));
      memcpy(a, p.out, (size_t)n * 4);
      attn_cpu_set_decode_pf(1);
      CHECK_OK(dprob_decode(&p));
      attn_cpu_set_decode_pf(-1);
      CHECK(memcmp(a, p.out, (size_t)n * 4) == 0);
      free(a);
      dprob_free(&p);
    }
}

static void test_bad_inputs_named(void) {
  dcase c = dcase_plain(ATTN_I8, 4, 2, 1, 16, 40);
  c.page_size = 16;
  dprob p;
  CHECK(dprob_make(&p, &c) == 0);
  attn_kv_view v0, v;
  CHECK_OK(attn_kvc_view(p.kvc, &v0));
  attn_decode_desc d = p.d;
  CHECK_OK(attn_decode_forward(&d, &v0, p.q, p.out, NULL)); /* lse may be NULL */
  /* a page outside the pool (a copy of the table: the cache's own stays) */
  int32_t table[8];
  memcpy(table, v0.block_table, sizeof(int32_t) * (size_t)v0.block_table_stride);
  v = v0;
  v.block_table = table;
  table[2] = (int32_t)v0.num_pages;
  expect_err(&d, &v, p.q, p.out, ATTN_EINVAL, "block_table[0][2]");
  table[2] = -1;
  expect_err(&d, &v, p.q, p.out, ATTN_EINVAL, "outside the pool");
  /* a sequence longer than its pages */
  int32_t lens[1] = {40};
  v = v0;
  v.seq_lens = lens;
  v.block_table_stride = 2; /* 32 tokens */
  expect_err(&d, &v, p.q, p.out, ATTN_EINVAL, "longer than its pages");
  lens[0] = -1;
  v.block_table_stride = v0.block_table_stride;
  expect_err(&d, &v, p.q, p.out, ATTN_EINVAL, "seq_lens[0]");
  /* another dtype than the call says */
  d.kv_dtype = ATTN_F16;
  expect_err(&d, &v0, p.q, p.out, ATTN_EINVAL, "kv_dtype F16");
  d = p.d;
  d.kv_dtype = ATTN_I32;
  expect_err(&d, &v0, p.q, p.out, ATTN_EINVAL, "kv_dtype");
  d = p.d;
  /* int8 without scales */
  v = v0;
  v.k_scale = NULL;
  expect_err(&d, &v, p.q, p.out, ATTN_EINVAL, "k_scale");
  v = v0;
  v.v_scale = NULL;
  expect_err(&d, &v, p.q, p.out, ATTN_EINVAL, "v_scale");
  /* contiguous longer than its capacity */
  v = v0;
  v.page_size = 0;
  v.capacity = 30;
  expect_err(&d, &v, p.q, p.out, ATTN_EINVAL, "capacity 30");
  v = v0;
  v.page_size = -2;
  expect_err(&d, &v, p.q, p.out, ATTN_EINVAL, "page_size");
  v = v0;
  v.num_pages = 0;
  expect_err(&d, &v, p.q, p.out, ATTN_EINVAL, "num_pages");
  v = v0;
  v.block_table = NULL;
  expect_err(&d, &v, p.q, p.out, ATTN_EINVAL, "block_table is NULL");
  v = v0;
  v.num_pages = INT64_MAX / 4; /* overflowing sizes */
  expect_err(&d, &v, p.q, p.out, ATTN_EINVAL, "overflow");
  /* the call's sizes against the view's */
  d.D = 8;
  expect_err(&d, &v0, p.q, p.out, ATTN_EINVAL, "the call says");
  d = p.d;
  d.Hq = 3;
  expect_err(&d, &v0, p.q, p.out, ATTN_EINVAL, "multiple of Hkv");
  d = p.d;
  d.Lq = ATTN_DECODE_MAX_LQ + 1;
  expect_err(&d, &v0, p.q, p.out, ATTN_EUNSUPPORTED, "Lq 17");
  d = p.d;
  d.softcap = -1.0f;
  expect_err(&d, &v0, p.q, p.out, ATTN_EINVAL, "softcap");
  d = p.d;
  d.window_left = -5;
  expect_err(&d, &v0, p.q, p.out, ATTN_EINVAL, "window_left");
  d = p.d;
  d.has_scale = 1;
  d.scale = INFINITY;
  expect_err(&d, &v0, p.q, p.out, ATTN_EINVAL, "scale");
  d = p.d;
  expect_err(&d, &v0, NULL, p.out, ATTN_EINVAL, "q is NULL");
  expect_err(&d, NULL, p.q, p.out, ATTN_EINVAL, "kv view is NULL");
  dprob_free(&p);
}

int main(void) {
  printf("# level %s, decode kernels %s\n", attn_isa_name(attn_isa_active()),
         attn_kern_get()->decode->name);
  RUN(test_every_storage_gqa_mqa_mha);
  RUN(test_llama_shape);
  RUN(test_each_modifier);
  RUN(test_ragged_batch);
  RUN(test_lk_one_and_chunk_edges);
  RUN(test_page_sizes_same_bits);
  RUN(test_thread_count_same_bits);
  RUN(test_item_runs);
  RUN(test_ukr_level_matches_generic);
  RUN(test_softmax_level);
  RUN(test_nan_in_cache_propagates);
  RUN(test_i8dot_exact);
  RUN(test_i8pv_exact);
  RUN(test_i8pv_error);
  RUN(test_i8_nan_query);
  RUN(test_quantize_q8_level);
  RUN(test_tiled_same_bits);
  RUN(test_scores_kt_level);
  RUN(test_ktiled_layout);
  RUN(test_i8_refused_weights_same_bits);
  RUN(test_bf16dot_kernels);
  RUN(test_bf16dot_error);
  RUN(test_prefetch_hint_same_bits);
  RUN(test_bad_inputs_named);
  HARNESS_END();
}
