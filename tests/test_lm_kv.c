/* The language model's KV cache (src/apps/gen/gen_kvcache.h) on attn_kvc and
 * attn_decode_forward: the seam against the SDPA's math path for every
 * storage (prefill, decode steps of 1, 3 and 17 tokens, GQA), the
 * probabilities it saves, the same bits for 1 and 2 threads and for a
 * contiguous or paged cache; the LM's incremental logits with each cache
 * against the full forward (f32 tight, f16 1e-3, bf16 and int8 1e-2 of the
 * logits' size); generation; and the bad input (cache names, page sizes). */
#include <stdlib.h>
#include <string.h>

#include "apps/gen/gen_kvcache.h"
#include "apps/lm/lm_generate.h"
#include "apps/lm/lm_model.h"
#include "attn/kernels.h"
#include "attn/sdpa.h"
#include "harness.h"
#include "lm_small.h"

/* the seam's sequence: a prompt, then steps of 1, 3, 17 (two decode chunks) and 1 */
enum { HQ = 4, HKV = 2, D = 16, L = 44 };
static const int64_t steps[] = {20, 1, 3, 1, 17, 1, 1};

/* out [L, HQ, D] and probs [HQ, L, L] of the math path over the whole sequence */
static void reference(const float *q, const float *k, const float *v, float *out, float *probs) {
  attn_sdpa_desc d;
  attn_sdpa_desc_init(&d, 1, HQ, HKV, L, L, D, D);
  d.causal = 1;
  const int64_t qs[3] = {L * HQ * D, D, HQ * D}, ks[3] = {L * HKV * D, D, HKV * D};
  memcpy(d.q_stride, qs, sizeof qs), memcpy(d.o_stride, qs, sizeof qs);
  memcpy(d.k_stride, ks, sizeof ks), memcpy(d.v_stride, ks, sizeof ks);
  float lse[HQ * L];
  const attn_sdpa_args a = {.dtype = ATTN_F32,
                            .path = ATTN_PATH_MATH,
                            .q = q,
                            .k = k,
                            .v = v,
                            .out = out,
                            .lse = lse,
                            .probs = probs};
  CHECK_OK(attn_sdpa_forward(&d, &a));
}

/* the seam over the steps: out [L, HQ, D]; probs [HQ, L, L] gathered from
 * each step's [HQ, n, len] (0 past each row's keys) */
static void run_seam(const attn_lm_kv_spec *spec, const float *q, const float *k, const float *v,
                     float *out, float *probs) {
  attn_lm_kv c;
  CHECK_OK(attn_lm_kv_init(&c, spec, 2, HQ, HKV, D, L));
  float *sp = malloc((size_t)(HQ * L * L) * sizeof *sp);
  memset(probs, 0, (size_t)(HQ * L * L) * sizeof *probs);
  int64_t pos = 0;
  for (int s = 0; sp && pos < L; s++) {
    const int64_t n = steps[s];
    for (int layer = 0; layer < 2; layer++) /* layer 1 unused by the checks: caches apart */
      CHECK_OK(attn_lm_kv_step(&c, layer, q + pos * HQ * D, k + pos * HKV * D, v + pos * HKV * D, n,
                               out + pos * HQ * D, sp));
    CHECK(attn_lm_kv_len(&c, 0) == pos + n && attn_lm_kv_len(&c, 1) == pos + n);
    for (int64_t h = 0; h < HQ; h++)
      for (int64_t i = 0; i < n; i++)
        memcpy(probs + (h * L + pos + i) * L, sp + (h * n + i) * (pos + n),
               (size_t)(pos + n) * sizeof *sp);
    pos += n;
  }
  /* one token more than the cache holds: refused, naming the sizes */
  CHECK_ERR(attn_lm_kv_step(&c, 0, q, k, v, 1, out, NULL), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "exceed the cache's 44") != NULL);
  free(sp);
  attn_lm_kv_free(&c);
}

static void test_seam_matches_math_path_every_storage(void) {
  const size_t nq = (size_t)L * HQ * D, nk = (size_t)L * HKV * D, np = (size_t)HQ * L * L;
  float *q = malloc(nq * sizeof *q), *k = malloc(nk * sizeof *k), *v = malloc(nk * sizeof *v);
  float *ro = malloc(nq * sizeof *ro), *rp = malloc(np * sizeof *rp);
  float *o[2], *p[2];
  for (int i = 0; i < 2; i++)
    o[i] = malloc(nq * sizeof *o[i]), p[i] = malloc(np * sizeof *p[i]);
  fill_uniform(q, (long)nq, 1, -1.5f, 1.5f);
  fill_uniform(k, (long)nk, 2, -1.5f, 1.5f);
  fill_uniform(v, (long)nk, 3, -1.0f, 1.0f);
  reference(q, k, v, ro, rp);
  /* per storage: out and probs against the math path on f32 (the rounding
   * of the stored keys and values: f16 2^-11, bf16 2^-8, int8 max/254 per
   * row and head, before the softmax's gain of ~|q| sqrt(D) scale) */
  const struct {
    int dtype;
    double tol;
  } st[] = {{ATTN_F32, 2e-6}, {ATTN_F16, 2e-3}, {ATTN_BF16, 1.5e-2}, {ATTN_I8, 3e-2}};
  const int64_t pages[] = {7, 16};
  const int nt = attn_get_num_threads();
  for (int s = 0; s < 4; s++) {
    const attn_lm_kv_spec contig = {st[s].dtype, 0};
    attn_set_num_threads(1);
    run_seam(&contig, q, k, v, o[0], p[0]);
    CHECK_CLOSE("seam out", o[0], ro, nq, st[s].tol, st[s].tol);
    CHECK_CLOSE("seam probs", p[0], rp, np, st[s].tol, st[s].tol);
    /* 2 threads and paged caches (a page size that splits the decode
     * blocks, and one that does not): the same bits; except f16 and bf16
     * in 7-token pages, whose keys lie in rows where the others' lie in
     * tiles of 16 (ATTN_KV_K_TILED, where the level has its kernels): the
     * scores summed in another order, within the storage's tolerance */
    for (int c = 0; c < 3; c++) {
      const attn_lm_kv_spec spec = {st[s].dtype, c ? pages[c - 1] : 0};
      attn_set_num_threads(c == 1 ? 1 : 2);
      run_seam(&spec, q, k, v, o[1], p[1]);
      if (c == 1 && (st[s].dtype == ATTN_F16 || st[s].dtype == ATTN_BF16)) {
        CHECK_CLOSE("seam out, 7-token pages", o[1], ro, nq, st[s].tol, st[s].tol);
        CHECK_CLOSE("seam probs, 7-token pages", p[1], rp, np, st[s].tol, st[s].tol);
        continue;
      }
      CHECK(!memcmp(o[0], o[1], nq * sizeof *o[0]));
      CHECK(!memcmp(p[0], p[1], np * sizeof *p[0]));
    }
  }
  attn_set_num_threads(nt);
  free(q), free(k), free(v), free(ro), free(rp);
  for (int i = 0; i < 2; i++)
    free(o[i]), free(p[i]);
}

static attn_lm_model tiny_model(void) { return lm_small_model(60, 32, 4, 64, 3, 128, 5); }

/* the decoder's logits [T, V] fed a prompt of 6, then 1, 3, 17 and ones */
static void decode_logits(const attn_lm_model *m, const attn_lm_kv_spec *spec, const int32_t *ids,
                          int64_t T, float *lg) {
  attn_lm_decoder d;
  CHECK_OK(attn_lm_decoder_init(&d, m, spec, T));
  const int64_t chunks[] = {6, 1, 3, 17};
  for (int64_t pos = 0, c = 0; pos < T; c++) {
    const int64_t n = c < 4 ? chunks[c] : 1;
    CHECK_OK(attn_lm_decoder_step(&d, ids + pos, n, lg + pos * m->c.vocab, NULL, NULL));
    pos += n;
  }
  int32_t one = 0; /* the cache holds T */
  CHECK_ERR(attn_lm_decoder_step(&d, &one, 1, NULL, NULL, NULL), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "decoder's cache of 40 tokens") != NULL);
  attn_lm_decoder_free(&d);
}

static double max_abs(const float *x, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; i++)
    m = fabs(x[i]) > m ? fabs(x[i]) : m;
  return m;
}

static void test_caches_match_full_forward(void) {
  enum { T = 40 };
  attn_lm_model m = tiny_model();
  const int64_t V = m.c.vocab;
  int32_t ids[T];
  lm_fill_ids(ids, T, V, 3);
  attn_lm_saved s = {0};
  CHECK_OK(attn_lm_forward(&m, NULL, &s, ids, 1, T));
  float *f32 = malloc((size_t)(T * V) * sizeof *f32), *lg = malloc((size_t)(T * V) * sizeof *lg);
  const int nt = attn_get_num_threads();
  attn_set_num_threads(1);
  decode_logits(&m, NULL, ids, T, f32);
  /* f32: the flash forward and the decode kernel sum in other orders */
  CHECK_CLOSE("f32 cache logits", f32, s.logits, T * V, 1e-4, 1e-4);
  /* paged, 2 threads: the same bits */
  attn_set_num_threads(2);
  decode_logits(&m, &(attn_lm_kv_spec){ATTN_F32, 0}, ids, T, lg);
  CHECK(!memcmp(f32, lg, (size_t)(T * V) * sizeof *lg));
  const int64_t pages[] = {1, 5, 16};
  for (int i = 0; i < 3; i++) {
    decode_logits(&m, &(attn_lm_kv_spec){ATTN_F32, pages[i]}, ids, T, lg);
    CHECK(!memcmp(f32, lg, (size_t)(T * V) * sizeof *lg));
  }
  /* the low-precision caches: the logits within a share of their size (the
   * prompt's step attends in f32, the rest read rounded keys and values) */
  const double size = max_abs(f32, T * V);
  const struct {
    int dtype;
    double rel;
  } lp[] = {{ATTN_F16, 1e-3}, {ATTN_BF16, 1e-2}, {ATTN_I8, 1e-2}};
  for (int i = 0; i < 3; i++)
    for (int paged = 0; paged < 2; paged++) {
      decode_logits(&m, &(attn_lm_kv_spec){lp[i].dtype, paged ? 16 : 0}, ids, T, lg);
      const double e = CHECK_CLOSE("low-precision cache logits", lg, f32, T * V, lp[i].rel * size, 0);
      printf("  cache %d paged %d: max |logit - f32's| %.3g (logits up to %.3g)\n", lp[i].dtype, paged, e, size);
      int64_t differ = 0; /* the steps after the prompt read rounded rows: not f32's bits */
      for (int64_t j = 6 * V; j < T * V; j++)
        differ += lg[j] != f32[j];
      CHECK(differ > (T - 6) * V / 2);
    }
  attn_set_num_threads(nt);
  free(f32), free(lg);
  attn_lm_saved_free(&s);
  attn_lm_free(&m);
}

/* the same tokens and attention for 1 and 2 threads, contiguous and paged f32 */
static void test_generation_same_for_threads_and_layouts(void) {
  attn_lm_model m = tiny_model();
  int32_t p[9];
  lm_fill_ids(p, 9, m.c.vocab, 7);
  attn_lm_sampling s;
  attn_lm_sampling_default(&s);
  s.min_id = 0;
  attn_lm_generation a = {0}, b = {0};
  const int nt = attn_get_num_threads();
  attn_set_num_threads(1);
  CHECK_OK(attn_lm_generate(&m, p, 9, 30, &s, NULL, 0, 1, NULL, NULL, &a));
  const int64_t np = m.c.layers * m.c.heads * 30 * 39;
  const attn_lm_kv_spec specs[] = {{ATTN_F32, 0}, {ATTN_F32, 4}, {ATTN_F32, 16}};
  for (int i = 0; i < 3; i++) {
    attn_set_num_threads(2 - (i == 1));
    CHECK_OK(attn_lm_generate(&m, p, 9, 30, &s, &specs[i], 0, 1, NULL, NULL, &b));
    CHECK(a.n == 30 && b.n == 30 && !memcmp(a.ids, b.ids, 30 * sizeof *a.ids));
    CHECK(a.probs && b.probs && !memcmp(a.probs, b.probs, (size_t)np * sizeof *a.probs));
    attn_lm_generation_free(&b);
  }
  /* int8: a cache of its own that still generates (its text may differ) */
  CHECK_OK(
      attn_lm_generate(&m, p, 9, 30, &s, &(attn_lm_kv_spec){ATTN_I8, 8}, 0, 1, NULL, NULL, &b));
  CHECK(b.n == 30 && b.context == 39);
  for (int64_t r = 0; b.probs && r < np / 39; r++) {
    double sum = 0;
    for (int64_t j = 0; j < 39; j++)
      sum += b.probs[r * 39 + j];
    CHECK(fabs(sum - 1.0) < 1e-5);
  }
  attn_set_num_threads(nt);
  attn_lm_generation_free(&a);
  attn_lm_generation_free(&b);
  attn_lm_free(&m);
}

static void test_cache_names_and_bad_input(void) {
  attn_lm_kv_spec k;
  char buf[64];
  CHECK_OK(attn_lm_kv_spec_parse(NULL, -1, &k));
  CHECK(k.dtype == ATTN_F32 && k.page_size == 0);
  CHECK(!strcmp(attn_lm_kv_spec_name(&k, buf, sizeof buf), "f32"));
  CHECK_OK(attn_lm_kv_spec_parse("paged", -1, &k));
  CHECK(k.dtype == ATTN_F32 && k.page_size == ATTN_LM_KV_PAGE_DEFAULT);
  CHECK_OK(attn_lm_kv_spec_parse("int8-paged", 7, &k));
  CHECK(k.dtype == ATTN_I8 && k.page_size == 7);
  CHECK(!strcmp(attn_lm_kv_spec_name(&k, buf, sizeof buf), "int8-paged (pages of 7)"));
  const char *ok[] = {"f32", "f16", "bf16", "int8", "f16-paged", "bf16-paged", "f32-paged"};
  const int dt[] = {ATTN_F32, ATTN_F16, ATTN_BF16, ATTN_I8, ATTN_F16, ATTN_BF16, ATTN_F32};
  for (int i = 0; i < 7; i++) {
    CHECK_OK(attn_lm_kv_spec_parse(ok[i], -1, &k));
    CHECK(k.dtype == dt[i] && (k.page_size != 0) == (i >= 4));
  }
  const char *bad[] = {"f64", "", "f16-pagd", "f16paged", "paged-f16", "F32", "int8-paged-paged"};
  for (int i = 0; i < 7; i++) {
    CHECK_ERR(attn_lm_kv_spec_parse(bad[i], -1, &k), ATTN_EINVAL);
    CHECK(strstr(attn_last_error(), "--kv-cache") && strstr(attn_last_error(), "f32, f16, bf16"));
  }
  CHECK_ERR(attn_lm_kv_spec_parse("paged", 0, &k), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "--kv-page-size 0") != NULL);
  CHECK_ERR(attn_lm_kv_spec_parse("f16-paged", ATTN_LM_KV_PAGE_MAX + 1, &k), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "--kv-page-size 65537") != NULL);
  CHECK_ERR(attn_lm_kv_spec_parse("f16", 16, &k), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "contiguous") && strstr(attn_last_error(), "f16-paged"));
  /* a cache of no storage, or no size */
  attn_lm_kv c;
  CHECK_ERR(attn_lm_kv_init(&c, &(attn_lm_kv_spec){ATTN_I32, 0}, 1, 2, 2, 8, 16), ATTN_EINVAL);
  CHECK_ERR(attn_lm_kv_init(&c, NULL, 1, 3, 2, 8, 16), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "heads 3 / 2") != NULL);
  CHECK_ERR(attn_lm_kv_init(&c, NULL, 1, 2, 2, 8, 0), ATTN_EINVAL);
}

int main(void) {
  RUN(test_seam_matches_math_path_every_storage);
  RUN(test_caches_match_full_forward);
  RUN(test_generation_same_for_threads_and_layouts);
  RUN(test_cache_names_and_bad_input);
  HARNESS_END();
}
