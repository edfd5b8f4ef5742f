/* Attention-variant modules against PyTorch (tools/golden_variants.py,
 * float64): the seed 004 SparseAttention (window 32 and 5),
 * CrossModalAttention with a key/value width, RelativePositionEmbedding, and
 * LLaMA-style GQA with RoPE; forward and every gradient. KV-cache decoding
 * through the module equals its full causal forward. */
#include "harness.h"

#define ATOL 2e-5
#define RTOL 1e-4

static const float *f32_of(const attn_st *g, const char *name) {
  const attn_tensor *t = attn_st_get(g, name);
  return t ? (const float *)t->data : NULL;
}

/* every parameter's gradient vs "grad.<name>" */
static double check_param_grads(const attn_params *p, const attn_st *g) {
  double worst = 0;
  for (int i = 0; i < p->count; i++) {
    char name[160];
    snprintf(name, sizeof name, "grad.%s", p->views[i].name);
    const float *want = f32_of(g, name);
    CHECK(want != NULL);
    if (!want) continue;
    double e = CHECK_CLOSE(name, attn_params_grad(p, i), want, p->views[i].numel, ATOL, RTOL);
    if (e > worst) worst = e;
  }
  return worst;
}

/* the module of `file` through forward and backward, compared */
static void vattn_golden(const char *file, const attn_vattn_config *c, const char *xname,
                         const char *kvname, attn_backend be) {
  char path[256];
  snprintf(path, sizeof path, "tests/golden/var_mod_%s.safetensors", file);
  attn_st *g = NULL;
  CHECK_OK(attn_st_load(path, &g));
  if (!g) return;
  attn_params p;
  attn_params_init(&p);
  attn_vattn m;
  CHECK_OK(attn_vattn_declare(&m, &p, "", c));
  CHECK_OK(attn_params_alloc(&p));
  CHECK_OK(attn_params_load_st(&p, g, "", 0));
  const attn_tensor *x = attn_st_get(g, xname), *kv = kvname ? attn_st_get(g, kvname) : NULL;
  const int64_t B = x->shape[0], Lq = x->shape[1], Lk = kv ? kv->shape[1] : Lq;
  const int64_t nx = attn_tensor_numel(x), nkv = kv ? attn_tensor_numel(kv) : 0;
  float *out = malloc(nx * sizeof(float)), *dx = calloc(nx, sizeof(float));
  float *dkv = kv ? calloc(nkv, sizeof(float)) : NULL;
  attn_nn_ctx ctx = {.backend = be};
  attn_vattn_saved s = {0};
  CHECK_OK(
      attn_vattn_forward(&m, &p, &ctx, &s, x->data, kv ? kv->data : NULL, B, Lq, Lk, NULL, out));
  double eo = CHECK_CLOSE("out", out, f32_of(g, "out"), nx, ATOL, RTOL);
  attn_params_zero_grad(&p);
  CHECK_OK(attn_vattn_backward(&m, &p, &ctx, &s, x->data, kv ? kv->data : NULL, f32_of(g, "dout"),
                               NULL, dx, dkv));
  char gn[64];
  snprintf(gn, sizeof gn, "grad.%s", xname);
  double ex = CHECK_CLOSE(gn, dx, f32_of(g, gn), nx, ATOL, RTOL), ekv = 0;
  if (kv) {
    snprintf(gn, sizeof gn, "grad.%s", kvname);
    ekv = CHECK_CLOSE(gn, dkv, f32_of(g, gn), nkv, ATOL, RTOL);
  }
  double ep = check_param_grads(&p, g);
  printf("  %-20s %-5s max abs err: out %.1e d%s %.1e dkv %.1e params %.1e\n", file,
         attn_backend_name(be), eo, xname, ex, ekv, ep);
  attn_vattn_saved_free(&s);
  attn_params_free(&p);
  free(out), free(dx), free(dkv);
  attn_st_free(g);
}

static void test_sparse_attention(void) {
  attn_vattn_config c;
  attn_sparse_attention_config(&c, 16, 4, 32);
  vattn_golden("sparse_attention", &c, "x", NULL, ATTN_BACKEND_MATH);
  vattn_golden("sparse_attention", &c, "x", NULL, ATTN_BACKEND_AUTO);
  attn_sparse_attention_config(&c, 12, 3, 5);
  vattn_golden("sparse_attention_w5", &c, "x", NULL, ATTN_BACKEND_AUTO);
}

static void test_cross_modal(void) {
  attn_vattn_config c;
  attn_cross_attention_config(&c, 16, 10, 4);
  vattn_golden("cross_modal", &c, "x1", "x2", ATTN_BACKEND_MATH);
  vattn_golden("cross_modal", &c, "x1", "x2", ATTN_BACKEND_AUTO);
}

static void test_gqa(void) {
  attn_vattn_config c;
  attn_gqa_attention_config(&c, 16, 4, 2, 10000.0f);
  vattn_golden("gqa", &c, "x", NULL, ATTN_BACKEND_MATH);
  vattn_golden("gqa", &c, "x", NULL, ATTN_BACKEND_AUTO);
}

/* partial rotary: RoPE on the first 4 of 8 dims of each head (GPT-NeoX
 * rotary_pct 0.5); rope_dim odd, too large or without rope is refused */
static void test_gqa_partial_rotary(void) {
  attn_vattn_config c;
  attn_gqa_attention_config(&c, 32, 4, 2, 10000.0f);
  c.rope_dim = 4;
  vattn_golden("gqa_partial_rotary", &c, "x", NULL, ATTN_BACKEND_MATH);
  vattn_golden("gqa_partial_rotary", &c, "x", NULL, ATTN_BACKEND_FLASH);
  attn_params p;
  attn_params_init(&p);
  attn_vattn m;
  const int64_t bad[3] = {3, 10, 0};
  for (int i = 0; i < 3; i++) {
    attn_gqa_attention_config(&c, 32, 4, 2, 10000.0f);
    c.rope_dim = bad[i] ? bad[i] : 4;
    c.rope = bad[i] != 0;
    CHECK_ERR(attn_vattn_declare(&m, &p, "", &c), ATTN_EINVAL);
    CHECK(strstr(attn_last_error(), "rope_dim") != NULL);
  }
  attn_params_free(&p);
}

static void test_relpos(void) {
  attn_st *g = NULL;
  CHECK_OK(attn_st_load("tests/golden/var_mod_relpos.safetensors", &g));
  if (!g) return;
  attn_params p;
  attn_params_init(&p);
  attn_relpos m;
  CHECK_OK(attn_relpos_declare(&m, &p, "", 8, 6));
  CHECK_OK(attn_params_alloc(&p));
  CHECK_OK(attn_params_load_st(&p, g, "", 0));
  float out[5 * 5 * 6];
  CHECK_OK(attn_relpos_forward(&m, &p, 5, out));
  double eo = CHECK_CLOSE("out", out, f32_of(g, "out"), 150, 0, 0);
  attn_params_zero_grad(&p);
  CHECK_OK(attn_relpos_backward(&m, &p, 5, f32_of(g, "dout")));
  double eg = check_param_grads(&p, g);
  printf("  relpos max abs err: out %.1e grad %.1e\n", eo, eg);
  CHECK_ERR(attn_relpos_forward(&m, &p, 9, out), ATTN_EINVAL);
  CHECK_OK(attn_relpos_init(&m, &p, 1));
  CHECK(attn_relpos_table(&m, &p)[0] != 0.0f);
  attn_params_free(&p);
  attn_st_free(g);
}

/* Generating token by token (and two at a time) through the module's KV
 * cache gives the rows of the full causal forward: GQA + RoPE, and with
 * ALiBi and a T5 bias on top. */
static void decode_case(int step, int schemes) {
  const int64_t B = 2, L = 9, E = 16;
  attn_vattn_config c;
  attn_gqa_attention_config(&c, E, 4, 2, 10000.0f);
  attn_params p;
  attn_params_init(&p);
  attn_vattn m;
  CHECK_OK(attn_vattn_declare(&m, &p, "layers.0.self_attn.", &c));
  CHECK_OK(attn_params_alloc(&p));
  CHECK_OK(attn_vattn_init(&m, &p, ATTN_INIT_TORCH, 5));
  CHECK(attn_params_find(&p, "layers.0.self_attn.k_proj.weight") >= 0);
  float x[2 * 9 * 16], full[2 * 9 * 16], stepout[2 * 2 * 16], xs[2 * 2 * 16];
  float slopes[4], rel[4 * 8];
  fill_uniform(x, B * L * E, 3, -1, 1);
  fill_uniform(rel, 32, 4, -1, 1);
  CHECK_OK(attn_alibi_slopes(4, slopes));
  attn_sdpa_desc extra;
  attn_sdpa_desc_init(&extra, 1, 1, 1, 1, 1, 1, 1);
  if (schemes) {
    extra.alibi_slopes = slopes;
    extra.rel_bias = rel;
    extra.rel_buckets = 8;
    extra.rel_max_distance = 12;
  }
  attn_vattn_saved s = {0};
  CHECK_OK(attn_vattn_forward(&m, &p, NULL, &s, x, NULL, B, L, L, &extra, full));
  attn_kv_cache cache = {0};
  CHECK_OK(attn_kv_cache_init(&cache, B, 2, 4, 4, 0));
  double worst = 0;
  for (int64_t t0 = 0; t0 < L; t0 += step) {
    const int64_t n = L - t0 < step ? L - t0 : step;
    for (int64_t b = 0; b < B; b++)
      memcpy(xs + b * n * E, x + (b * L + t0) * E, n * E * 4);
    CHECK_OK(attn_vattn_decode(&m, &p, NULL, &cache, xs, B, n, &extra, stepout));
    for (int64_t b = 0; b < B; b++) {
      double e =
          CHECK_CLOSE("decode", stepout + b * n * E, full + (b * L + t0) * E, n * E, 2e-6, 1e-5);
      if (e > worst) worst = e;
    }
  }
  printf("  module decode step %d schemes %d: max abs err vs full forward %.1e\n", step, schemes,
         worst);
  attn_kv_cache_free(&cache);
  attn_vattn_saved_free(&s);
  attn_params_free(&p);
}

static void test_decode(void) {
  decode_case(1, 0);
  decode_case(2, 1);
}

static void test_errors(void) {
  attn_params p;
  attn_params_init(&p);
  attn_vattn m;
  attn_vattn_config c;
  attn_gqa_attention_config(&c, 16, 4, 3, 0.0f); /* 3 does not divide 4 */
  CHECK_ERR(attn_vattn_declare(&m, &p, "", &c), ATTN_EINVAL);
  attn_vattn_config_default(&c, 10, 4); /* 4 does not divide 10 */
  CHECK_ERR(attn_vattn_declare(&m, &p, "", &c), ATTN_EINVAL);
  attn_cross_attention_config(&c, 8, 6, 2);
  CHECK_OK(attn_vattn_declare(&m, &p, "x.", &c));
  CHECK_OK(attn_params_alloc(&p));
  float x[16] = {0}, out[16];
  attn_vattn_saved s = {0};
  CHECK_ERR(attn_vattn_forward(&m, &p, NULL, &s, x, NULL, 1, 2, 2, NULL, out), ATTN_EINVAL);
  attn_params_free(&p);
}

int main(void) {
  attn_set_num_threads(1);
  RUN(test_sparse_attention);
  RUN(test_cross_modal);
  RUN(test_gqa);
  RUN(test_gqa_partial_rotary);
  RUN(test_relpos);
  RUN(test_decode);
  RUN(test_errors);
  HARNESS_END();
}
