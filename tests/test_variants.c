/* Attention variants at the SDPA level: PyTorch golden files
 * (tools/golden_variants.py, float64 references) for ALiBi, T5 buckets, Shaw,
 * block-sparse, RoPE and their combination; T5 buckets and ALiBi slopes
 * against HF/BLOOM exactly; RoPE kernels; KV-cache decoding == the full
 * causal forward; the block layout == its dense bool mask; validation; the
 * `attn sdpa` tool on the golden inputs. */
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "kernels/sdpa/sdpa_positions.h"
#include "sdpa_golden.h"

/* golden tolerance: f32 vs a float64 reference on O(1) data */
#define ATOL 2e-5
#define RTOL 1e-4

static double cmp(const char *what, const float *got, const attn_st *g, const char *name,
                  int64_t n) {
  const float *want = golden_f32(g, name);
  CHECK(want != NULL);
  if (!want) return INFINITY;
  return CHECK_CLOSE(what, got, want, n, ATOL, RTOL);
}

static void golden_sdpa(const char *name, attn_backend be) {
  char path[256];
  snprintf(path, sizeof path, "tests/golden/var_sdpa_%s.safetensors", name);
  attn_st *g = NULL;
  CHECK_OK(attn_st_load(path, &g));
  if (!g) return;
  attn_sdpa_desc d;
  golden_var_desc(g, &d);
  const int64_t nq = d.B * d.Hq * d.Lq * d.D, nk = d.B * d.Hkv * d.Lk * d.D;
  const int64_t nv = d.B * d.Hkv * d.Lk * d.Dv, no = d.B * d.Hq * d.Lq * d.Dv;
  const int64_t R = 2 * d.shaw_max - 1;
  float *q, *k;
  golden_rope rope;
  golden_var_qk(g, &d, &q, &k, &rope);
  float *out = malloc(no * sizeof(float)), *lse = malloc(d.B * d.Hq * d.Lq * sizeof(float));
  float *dq = malloc(nq * sizeof(float)), *dk = malloc(nk * sizeof(float));
  float *dv = malloc(nv * sizeof(float));
  float *drel = d.rel_bias ? malloc(d.Hq * d.rel_buckets * sizeof(float)) : NULL;
  float *dsk = d.shaw_k ? malloc(R * d.D * sizeof(float)) : NULL;
  float *dsv = d.shaw_v ? malloc(R * d.Dv * sizeof(float)) : NULL;
  d.rel_bias_grad = drel;
  d.shaw_k_grad = dsk;
  d.shaw_v_grad = dsv;
  const float *v = golden_f32(g, "v");
  CHECK_OK(attn_sdpa_forward_f32(&d, be, q, k, v, out, lse, NULL));
  CHECK_OK(attn_sdpa_backward_f32(&d, be, q, k, v, out, lse, golden_f32(g, "dout"), dq, dk, dv));
  golden_rope_backward(&rope, &d, dq, dk);
  double e[8] = {0};
  e[0] = cmp("out", out, g, "out", no);
  e[1] = cmp("lse", lse, g, "lse", d.B * d.Hq * d.Lq);
  e[2] = cmp("dq", dq, g, "dq", nq);
  e[3] = cmp("dk", dk, g, "dk", nk);
  e[4] = cmp("dv", dv, g, "dv", nv);
  if (drel) e[5] = cmp("drel_bias", drel, g, "drel_bias", d.Hq * d.rel_buckets);
  if (dsk) e[6] = cmp("dshaw_k", dsk, g, "dshaw_k", R * d.D);
  if (dsv) e[7] = cmp("dshaw_v", dsv, g, "dshaw_v", R * d.Dv);
  printf("  golden %-5s %-17s max abs err: out %.1e lse %.1e dq %.1e dk %.1e dv %.1e "
         "tables %.1e %.1e %.1e\n",
         attn_backend_name(be), name, e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7]);
  free(q), free(k), free(out), free(lse), free(dq), free(dk), free(dv);
  free(drel), free(dsk), free(dsv);
  attn_st_free(g);
}

static const char *const sdpa_cases[] = {
    "alibi_causal",  "alibi_decode", "t5_bidir",         "t5_causal",     "shaw",
    "shaw_k_offset", "block",        "rope_interleaved", "rope_half_gqa", "combo",
    "rope_partial"};
#define NCASES (sizeof sdpa_cases / sizeof sdpa_cases[0])

static void test_golden_math(void) {
  for (size_t i = 0; i < NCASES; i++)
    golden_sdpa(sdpa_cases[i], ATTN_BACKEND_MATH);
}
static void test_golden_auto(void) {
  for (size_t i = 0; i < NCASES; i++)
    golden_sdpa(sdpa_cases[i], ATTN_BACKEND_AUTO);
}
static void test_golden_flash(void) { /* the schemes fused in the flash tiles */
  for (size_t i = 0; i < NCASES; i++)
    golden_sdpa(sdpa_cases[i], ATTN_BACKEND_FLASH);
}

/* T5 buckets and ALiBi slopes exactly as HF / BLOOM compute them */
static void test_tables(void) {
  attn_st *g = NULL;
  CHECK_OK(attn_st_load("tests/golden/var_tables.safetensors", &g));
  if (!g) return;
  const attn_tensor *rel = attn_st_get(g, "rel");
  const int cfg[][3] = {{32, 128, 1}, {32, 128, 0}, {8, 20, 1}, {16, 64, 0}, {64, 1000, 1}};
  for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
    char name[64];
    snprintf(name, sizeof name, "bucket_%d_%d_%d", cfg[c][0], cfg[c][1], cfg[c][2]);
    const attn_tensor *b = attn_st_get(g, name);
    CHECK(b && b->shape[0] == rel->shape[0]);
    if (!b) continue;
    int bad = 0;
    for (int64_t i = 0; i < rel->shape[0]; i++) {
      int64_t r = ((const int64_t *)rel->data)[i], want = ((const int64_t *)b->data)[i];
      int64_t got = attn_t5_bucket(r, cfg[c][2], cfg[c][0], cfg[c][1]);
      if (got != want && bad++ < 3)
        printf("  %s: rel %lld bucket %lld, want %lld\n", name, (long long)r, (long long)got,
               (long long)want);
    }
    CHECK(bad == 0);
  }
  const int Hs[] = {1, 2, 3, 5, 6, 8, 12, 16, 24, 40};
  for (size_t c = 0; c < sizeof Hs / sizeof Hs[0]; c++) {
    char name[32];
    snprintf(name, sizeof name, "alibi_%d", Hs[c]);
    float s[64];
    CHECK_OK(attn_alibi_slopes(Hs[c], s));
    CHECK_CLOSE(name, s, golden_f32(g, name), Hs[c], 0.0, 2e-7);
  }
  CHECK_ERR(attn_alibi_slopes(0, (float[1]){0}), ATTN_EINVAL);
  attn_st_free(g);
}

static void test_rope_golden(void) {
  attn_st *g = NULL;
  CHECK_OK(attn_st_load("tests/golden/var_rope.safetensors", &g));
  if (!g) return;
  const attn_tensor *x = attn_st_get(g, "x");
  const int64_t N = x->shape[0], L = x->shape[1], H = x->shape[2], D = x->shape[3];
  const int64_t n = N * L * H * D;
  float *y = malloc(n * sizeof(float)), *back = malloc(n * sizeof(float));
  const char *names[2] = {"interleaved", "half"};
  for (int l = 0; l < 2; l++) {
    attn_rope_layout lay;
    CHECK_OK(attn_rope_layout_from_name(names[l], &lay));
    char yn[32], dn[32];
    snprintf(yn, sizeof yn, "y_%s", names[l]);
    snprintf(dn, sizeof dn, "dx_%s", names[l]);
    CHECK_OK(attn_rope_f32(x->data, y, N, L, H, D, 10000.0f, 3, lay));
    double ey = CHECK_CLOSE(yn, y, golden_f32(g, yn), n, 1e-6, 1e-6);
    CHECK_OK(attn_rope_backward_f32(golden_f32(g, "dy"), y, N, L, H, D, 10000.0f, 3, lay));
    double ed = CHECK_CLOSE(dn, y, golden_f32(g, dn), n, 1e-6, 1e-6);
    printf("  rope %-11s max abs err: y %.1e dx %.1e\n", names[l], ey, ed);
    /* in place, and the backward undoes the forward */
    memcpy(y, x->data, n * sizeof(float));
    CHECK_OK(attn_rope_f32(y, y, N, L, H, D, 500.0f, 7, lay));
    CHECK_OK(attn_rope_backward_f32(y, back, N, L, H, D, 500.0f, 7, lay));
    CHECK_CLOSE("inverse", back, (const float *)x->data, n, 1e-6, 1e-6);
  }
  CHECK_ERR(attn_rope_f32(y, y, 1, 1, 1, 3, 10000.0f, 0, ATTN_ROPE_HALF), ATTN_EINVAL);
  CHECK_ERR(attn_rope_f32(y, y, 1, 1, 1, 4, 1.0f, 0, ATTN_ROPE_HALF), ATTN_EINVAL);
  CHECK_ERR(attn_rope_f32(y, y, 1, 1, 1, 4, 100.0f, -1, ATTN_ROPE_HALF), ATTN_EINVAL);
  attn_rope_layout lay;
  CHECK_ERR(attn_rope_layout_from_name("gptj", &lay), ATTN_EINVAL);
  free(y), free(back);
  attn_st_free(g);
}

/* Partial rotary: the first R dims of each head rotated exactly as a RoPE
 * of dimension R on those dims alone, the other D - R copied unchanged (in
 * and out of place), backward the inverse; bad R refused. */
static void test_rope_partial(void) {
  enum { N = 2, L = 5, H = 3, D = 10, R = 6 };
  float x[N * L * H * D], y[N * L * H * D], xs[N * L * H * R], ys[N * L * H * R];
  fill_uniform(x, N * L * H * D, 7, -1, 1);
  for (int i = 0; i < N * L * H; i++) memcpy(xs + i * R, x + i * D, R * sizeof(float));
  for (int lay = 0; lay < 2; lay++) {
    CHECK_OK(attn_rope_partial_f32(x, y, N, L, H, D, R, 500.0f, 4, (attn_rope_layout)lay));
    CHECK_OK(attn_rope_f32(xs, ys, N, L, H, R, 500.0f, 4, (attn_rope_layout)lay));
    int bad = 0;
    for (int i = 0; i < N * L * H; i++) {
      bad += memcmp(y + i * D, ys + i * R, R * sizeof(float)) != 0;
      bad += memcmp(y + i * D + R, x + i * D + R, (D - R) * sizeof(float)) != 0;
    }
    CHECK(bad == 0);
    CHECK_OK(attn_rope_partial_backward_f32(y, y, N, L, H, D, R, 500.0f, 4, (attn_rope_layout)lay));
    CHECK_CLOSE("partial inverse", y, x, N * L * H * D, 1e-6, 1e-6);
  }
  CHECK_ERR(attn_rope_partial_f32(x, y, N, L, H, D, 5, 500.0f, 0, ATTN_ROPE_HALF), ATTN_EINVAL);
  CHECK_ERR(attn_rope_partial_f32(x, y, N, L, H, D, 12, 500.0f, 0, ATTN_ROPE_HALF), ATTN_EINVAL);
  CHECK_ERR(attn_rope_partial_f32(x, y, N, L, H, D, 0, 500.0f, 0, ATTN_ROPE_HALF), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "rotary") != NULL);
}

/* Token-by-token (and chunked) decoding through the KV cache equals the full
 * causal forward, with RoPE, ALiBi, T5 and Shaw keys, grouped heads. */
static void decode_case(attn_backend be, int chunk, int schemes) {
  const int64_t B = 2, Hq = 4, Hkv = 2, L = 13, D = 8, Dv = 6;
  const int64_t nq = B * Hq * L * D, nk = B * Hkv * L * D, nv = B * Hkv * L * Dv;
  float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nv * 4);
  float *out = malloc(B * Hq * L * Dv * 4), *lse = malloc(B * Hq * L * 4);
  float slopes[4], rel[4 * 16], shaw[7 * 8];
  uint8_t blocks[16];
  fill_uniform(q, nq, 1, -1, 1);
  fill_uniform(k, nk, 2, -1, 1);
  fill_uniform(v, nv, 3, -1, 1);
  fill_uniform(rel, 64, 4, -1, 1);
  fill_uniform(shaw, 56, 5, -1, 1);
  CHECK_OK(attn_alibi_slopes(Hq, slopes));
  /* RoPE on the full sequences (positions 0..L-1) */
  CHECK_OK(attn_rope_f32(q, q, B * Hq, L, 1, D, 10000.0f, 0, ATTN_ROPE_HALF));
  CHECK_OK(attn_rope_f32(k, k, B * Hkv, L, 1, D, 10000.0f, 0, ATTN_ROPE_HALF));
  attn_sdpa_desc d;
  attn_sdpa_desc_init(&d, B, Hq, Hkv, L, L, D, Dv);
  d.causal = 1;
  if (schemes) {
    d.alibi_slopes = slopes;
    d.rel_bias = rel;
    d.rel_buckets = 16;
    d.rel_max_distance = 10;
    d.shaw_k = shaw;
    d.shaw_max = 4;
    /* one block layout for the final length: its row stride is fixed */
    CHECK_OK(attn_block_sparse_bigbird(blocks, 4, 4, 1, 1, 1, 9, 1));
    blocks[3 * 4 + 1] = 0;
    d.block_mask = blocks;
    d.block_size = 4;
    d.block_cols = 4;
  }
  CHECK_OK(attn_sdpa_forward_f32(&d, be, q, k, v, out, lse, NULL));

  attn_kv_cache c = {0};
  CHECK_OK(attn_kv_cache_init(&c, B, Hkv, D, Dv, 2)); /* small: exercises growth */
  float *qs = malloc(B * Hq * chunk * D * 4), *ks = malloc(B * Hkv * chunk * D * 4);
  float *vs = malloc(B * Hkv * chunk * Dv * 4), *os = malloc(B * Hq * chunk * Dv * 4);
  float *ls = malloc(B * Hq * chunk * 4);
  double maxerr = 0;
  for (int64_t t0 = 0; t0 < L; t0 += chunk) {
    const int64_t n = L - t0 < chunk ? L - t0 : chunk;
    for (int64_t bh = 0; bh < B * Hq; bh++) /* rows t0..t0+n-1 of each head */
      memcpy(qs + bh * n * D, q + (bh * L + t0) * D, n * D * 4);
    for (int64_t bh = 0; bh < B * Hkv; bh++) {
      memcpy(ks + bh * n * D, k + (bh * L + t0) * D, n * D * 4);
      memcpy(vs + bh * n * Dv, v + (bh * L + t0) * Dv, n * Dv * 4);
    }
    CHECK_OK(attn_kv_cache_append(&c, ks, vs, n));
    CHECK_OK(attn_kv_cache_attend(&c, &d, be, qs, n, os, ls));
    for (int64_t bh = 0; bh < B * Hq; bh++) {
      double e =
          CHECK_CLOSE("step out", os + bh * n * Dv, out + (bh * L + t0) * Dv, n * Dv, 2e-6, 1e-5);
      CHECK_CLOSE("step lse", ls + bh * n, lse + bh * L + t0, n, 2e-6, 1e-5);
      if (e > maxerr) maxerr = e;
    }
  }
  CHECK(c.len == L && c.cap >= L);
  printf("  decode %-5s chunk %d schemes %d: max abs err vs full forward %.1e\n",
         attn_backend_name(be), chunk, schemes, maxerr);
  CHECK_ERR(attn_kv_cache_attend(&c, &d, be, qs, L + 1, os, ls), ATTN_EINVAL);
  attn_kv_cache_reset(&c);
  CHECK(c.len == 0);
  attn_kv_cache_free(&c);
  free(q), free(k), free(v), free(out), free(lse), free(qs), free(ks), free(vs), free(os), free(ls);
}

static void test_decode(void) {
  decode_case(ATTN_BACKEND_MATH, 1, 1);
  decode_case(ATTN_BACKEND_MATH, 3, 1);
  decode_case(ATTN_BACKEND_AUTO, 1, 1);
  decode_case(ATTN_BACKEND_FLASH, 1, 0); /* causal with q_offset on the fused kernel */
  decode_case(ATTN_BACKEND_FLASH, 4, 0);
  decode_case(ATTN_BACKEND_FLASH, 1, 1); /* schemes at absolute positions, fused */
}

/* The block layout gives exactly what its dense bool mask gives. */
static void test_block_sparse(void) {
  const int64_t B = 1, H = 2, L = 40, D = 4, bs = 8, nb = 5;
  uint8_t bm[25], dense[40 * 40], bm2[25];
  CHECK_OK(attn_block_sparse_bigbird(bm, nb, nb, 1, 1, 1, 42, 0));
  CHECK_OK(attn_block_sparse_bigbird(bm2, nb, nb, 1, 1, 1, 42, 0));
  CHECK(!memcmp(bm, bm2, sizeof bm)); /* seeded */
  for (int a = 0; a < nb; a++) {
    CHECK(bm[a * nb] && bm[a]); /* global block 0 */
    int count = 0;
    for (int c = 0; c < nb; c++) {
      if (abs(a - c) <= 1) CHECK(bm[a * nb + c]);
      count += bm[a * nb + c];
    }
    int base = 0;
    for (int c = 0; c < nb; c++)
      base += abs(a - c) <= 1 || a == 0 || c == 0;
    CHECK(count == (base + 1 <= nb ? base + 1 : nb)); /* one random block if room */
  }
  uint8_t cz[36];
  CHECK_OK(attn_block_sparse_bigbird(cz, 6, 6, 0, 0, 2, 7, 1));
  for (int a = 0; a < 6; a++)
    for (int c = a + 1; c < 6; c++)
      CHECK(cz[a * 6 + c] == 0);
  CHECK_ERR(attn_block_sparse_bigbird(NULL, 2, 2, 0, 0, 0, 0, 0), ATTN_EINVAL);

  CHECK_OK(attn_block_sparse_expand(bm, bs, L, L, dense));
  const int64_t n = B * H * L * D;
  float q[320], k[320], v[320], dout[320], o1[320], o2[320], l1[80], l2[80];
  float g1[3][320], g2[3][320];
  fill_uniform(q, n, 11, -2, 2);
  fill_uniform(k, n, 12, -2, 2);
  fill_uniform(v, n, 13, -1, 1);
  fill_uniform(dout, n, 14, -1, 1);
  attn_sdpa_desc a, b;
  attn_sdpa_desc_init(&a, B, H, H, L, L, D, D);
  b = a;
  a.block_mask = bm;
  a.block_size = bs;
  b.bool_mask = dense;
  b.bool_mask_stride[2] = L;
  b.bool_mask_stride[3] = 1;
  CHECK_OK(attn_sdpa_forward_f32(&a, ATTN_BACKEND_MATH, q, k, v, o1, l1, NULL));
  CHECK_OK(attn_sdpa_forward_f32(&b, ATTN_BACKEND_MATH, q, k, v, o2, l2, NULL));
  CHECK_CLOSE("out", o1, o2, n, 0, 0);
  CHECK_CLOSE("lse", l1, l2, B * H * L, 0, 0);
  CHECK_OK(
      attn_sdpa_backward_f32(&a, ATTN_BACKEND_MATH, q, k, v, o1, l1, dout, g1[0], g1[1], g1[2]));
  CHECK_OK(
      attn_sdpa_backward_f32(&b, ATTN_BACKEND_MATH, q, k, v, o2, l2, dout, g2[0], g2[1], g2[2]));
  for (int x = 0; x < 3; x++)
    CHECK_CLOSE("grad", g1[x], g2[x], n, 0, 0);
  /* the layout and the dense mask through the fused kernel agree within rounding */
  CHECK_OK(attn_sdpa_forward_f32(&b, ATTN_BACKEND_FLASH, q, k, v, o2, l2, NULL));
  CHECK_CLOSE("flash out (dense)", o2, o1, n, 1e-6, 1e-5);
  CHECK_OK(attn_sdpa_forward_f32(&a, ATTN_BACKEND_FLASH, q, k, v, o2, l2, NULL));
  CHECK_CLOSE("flash out (blocks)", o2, o1, n, 1e-6, 1e-5);
  CHECK_OK(
      attn_sdpa_backward_f32(&a, ATTN_BACKEND_FLASH, q, k, v, o2, l2, dout, g2[0], g2[1], g2[2]));
  for (int x = 0; x < 3; x++)
    CHECK_CLOSE("flash grad (blocks)", g2[x], g1[x], n, 1e-6, 1e-5);
}

/* Schemes through explicit flash agree with math; bad variant fields are
 * errors naming them. */
static void test_validation(void) {
  float q[64], k[64], v[64], o[64], l[16], slopes[2] = {0.5f, 0.25f}, rb[16] = {0}, sk[12];
  fill_uniform(q, 64, 1, -1, 1);
  fill_uniform(k, 64, 2, -1, 1);
  fill_uniform(v, 64, 3, -1, 1);
  fill_uniform(sk, 12, 4, -1, 1);
  attn_sdpa_desc d;
  attn_sdpa_desc_init(&d, 1, 2, 2, 8, 8, 4, 4);
  d.alibi_slopes = slopes;
  float o2[64], l2[16];
  CHECK_OK(attn_sdpa_forward_f32(&d, ATTN_BACKEND_FLASH, q, k, v, o, l, NULL));
  CHECK_OK(attn_sdpa_forward_f32(&d, ATTN_BACKEND_MATH, q, k, v, o2, l2, NULL));
  CHECK_CLOSE("flash alibi", o, o2, 64, 1e-6, 1e-5);
  d.q_offset = -1; /* bottom-right alignment: allowed, but not with a block layout */
  CHECK_OK(attn_sdpa_forward_f32(&d, ATTN_BACKEND_MATH, q, k, v, o, l, NULL));
  d.block_mask = (const uint8_t *)"\1\1\1\1";
  d.block_size = 4;
  CHECK_ERR(attn_sdpa_forward_f32(&d, ATTN_BACKEND_MATH, q, k, v, o, l, NULL), ATTN_EINVAL);
  d.block_mask = NULL;
  attn_sdpa_desc_init(&d, 1, 2, 2, 8, 8, 4, 4);
  d.rel_bias = rb;
  d.rel_buckets = 8;
  d.rel_max_distance = 2; /* must exceed the exact range (2 when bidirectional) */
  d.rel_bidirectional = 1;
  CHECK_ERR(attn_sdpa_forward_f32(&d, ATTN_BACKEND_MATH, q, k, v, o, l, NULL), ATTN_EINVAL);
  d.rel_max_distance = 3;
  CHECK_OK(attn_sdpa_forward_f32(&d, ATTN_BACKEND_MATH, q, k, v, o, l, NULL));
  d.rel_buckets = 3;
  CHECK_ERR(attn_sdpa_forward_f32(&d, ATTN_BACKEND_MATH, q, k, v, o, l, NULL), ATTN_EINVAL);
  attn_sdpa_desc_init(&d, 1, 2, 2, 8, 8, 4, 4);
  d.shaw_k = sk;
  CHECK_ERR(attn_sdpa_forward_f32(&d, ATTN_BACKEND_MATH, q, k, v, o, l, NULL), ATTN_EINVAL);
  attn_sdpa_desc_init(&d, 1, 2, 2, 8, 8, 4, 4);
  d.block_mask = (const uint8_t *)"\1";
  CHECK_ERR(attn_sdpa_forward_f32(&d, ATTN_BACKEND_MATH, q, k, v, o, l, NULL), ATTN_EINVAL);
  d.block_size = 4;
  d.block_cols = 1; /* fewer than ceil(8/4) */
  CHECK_ERR(attn_sdpa_forward_f32(&d, ATTN_BACKEND_MATH, q, k, v, o, l, NULL), ATTN_EINVAL);
}

/* Outputs and table gradients do not depend on the thread count (a problem
 * big enough for the math path to use several threads). */
static void test_threads(void) {
  const int64_t B = 2, Hq = 4, Hkv = 2, L = 96, D = 16, M = 9, NB = 16;
  const int64_t nq = B * Hq * L * D, nk = B * Hkv * L * D, R = 2 * M - 1;
  float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nk * 4), *dout = malloc(nq * 4);
  float slopes[4], rel[4 * 16], *sk = malloc(R * D * 4), *sv = malloc(R * D * 4);
  fill_uniform(q, nq, 1, -1, 1);
  fill_uniform(k, nk, 2, -1, 1);
  fill_uniform(v, nk, 3, -1, 1);
  fill_uniform(dout, nq, 4, -1, 1);
  fill_uniform(rel, Hq * NB, 5, -1, 1);
  fill_uniform(sk, R * D, 6, -1, 1);
  fill_uniform(sv, R * D, 7, -1, 1);
  CHECK_OK(attn_alibi_slopes(Hq, slopes));
  attn_sdpa_desc d;
  attn_sdpa_desc_init(&d, B, Hq, Hkv, L, L, D, D);
  d.causal = 1;
  d.alibi_slopes = slopes;
  d.rel_bias = rel;
  d.rel_buckets = NB;
  d.rel_max_distance = 40;
  d.shaw_k = sk;
  d.shaw_v = sv;
  d.shaw_max = M;
  const int64_t ns[6] = {nq, B * Hq * L, nq, nk, Hq * NB, R * D};
  float *res[2][7];
  for (int r = 0; r < 2; r++) {
    attn_set_num_threads(r == 0 ? 1 : 3);
    for (int x = 0; x < 6; x++)
      res[r][x] = malloc(ns[x] * 4);
    res[r][6] = malloc(R * D * 4);
    d.rel_bias_grad = res[r][4];
    d.shaw_k_grad = res[r][5];
    d.shaw_v_grad = res[r][6];
    float *dv = malloc(nk * 4);
    CHECK_OK(attn_sdpa_forward_f32(&d, ATTN_BACKEND_MATH, q, k, v, res[r][0], res[r][1], NULL));
    CHECK_OK(attn_sdpa_backward_f32(&d, ATTN_BACKEND_MATH, q, k, v, res[r][0], res[r][1], dout,
                                    res[r][2], res[r][3], dv));
    free(dv);
  }
  attn_set_num_threads(1);
  for (int x = 0; x < 7; x++) {
    CHECK(!memcmp(res[0][x], res[1][x], (x < 6 ? ns[x] : R * D) * 4));
    free(res[0][x]), free(res[1][x]);
  }
  free(q), free(k), free(v), free(dout), free(sk), free(sv);
}

/* The tile operations give the same on [R, nk] tiles with a row stride as on
 * whole rows (what the math path runs): the flash fusion reuses them. */
static void test_tiles(void) {
  enum { LQ = 7, LK = 11, M = 3, NR = 2 * M - 1, H = 2, NB = 8 };
  float slopes[H] = {0.5f, 0.125f}, rel[H * NB], qr[LQ * NR], x[LQ * LK], a[LQ * LK], b[LQ * LK];
  uint8_t bm[4 * 3];
  fill_uniform(rel, H * NB, 1, -1, 1);
  fill_uniform(qr, LQ * NR, 2, -1, 1);
  fill_uniform(x, LQ * LK, 3, -1, 1);
  for (int e = 0; e < 12; e++)
    bm[e] = e % 5 != 1;
  x[2 * LK + 3] = -INFINITY; /* masked before: stays masked */
  attn_sdpa_desc d;
  attn_sdpa_desc_init(&d, 1, H, H, LQ, LK, 4, 4);
  d.q_offset = 2;
  d.alibi_slopes = slopes;
  d.rel_bias = rel;
  d.rel_buckets = NB;
  d.rel_max_distance = 9;
  d.shaw_k = qr; /* only its presence matters here */
  d.shaw_max = M;
  d.block_mask = bm;
  d.block_size = 3;
  for (int h = 0; h < H; h++) {
    memcpy(a, x, sizeof x);
    memcpy(b, x, sizeof x);
    for (int i = 0; i < LQ; i++)
      attn_pos_tile_logits(&d, h, i, 1, 0, LK, a + i * LK, LK, qr + i * NR, 0);
    for (int i0 = 0; i0 < LQ; i0 += 3)
      for (int j0 = 0; j0 < LK; j0 += 4) {
        const int R = LQ - i0 < 3 ? LQ - i0 : 3, nk = LK - j0 < 4 ? LK - j0 : 4;
        attn_pos_tile_logits(&d, h, i0, R, j0, nk, b + i0 * LK + j0, LK, qr + i0 * NR, NR);
      }
    CHECK_CLOSE("tile logits", b, a, LQ * LK, 0, 0);
    CHECK(a[2 * LK + 3] == -INFINITY);
    CHECK(a[0] != x[0]); /* something was added */
  }
  /* scatter, gather and the T5 gradient, tiled vs whole */
  float sa[LQ * NR] = {0}, sb[LQ * NR] = {0}, ga[NB] = {0}, gb[NB] = {0};
  memcpy(a, x, sizeof x);
  memcpy(b, x, sizeof x);
  a[2 * LK + 3] = b[2 * LK + 3] = 0.0f;
  attn_pos_shaw_scatter(&d, 0, LQ, 0, LK, a, LK, sa, NR);
  attn_pos_t5_grad(&d, 0, LQ, 0, LK, a, LK, ga);
  attn_pos_shaw_gather(&d, 0, LQ, 0, LK, qr, NR, a, LK);
  for (int i0 = 0; i0 < LQ; i0 += 3)
    for (int j0 = 0; j0 < LK; j0 += 4) {
      const int R = LQ - i0 < 3 ? LQ - i0 : 3, nk = LK - j0 < 4 ? LK - j0 : 4;
      attn_pos_shaw_scatter(&d, i0, R, j0, nk, b + i0 * LK + j0, LK, sb + i0 * NR, NR);
      attn_pos_t5_grad(&d, i0, R, j0, nk, b + i0 * LK + j0, LK, gb);
      attn_pos_shaw_gather(&d, i0, R, j0, nk, qr + i0 * NR, NR, b + i0 * LK + j0, LK);
    }
  CHECK_CLOSE("scatter", sb, sa, LQ * NR, 1e-6, 0);
  CHECK_CLOSE("t5 grad", gb, ga, NB, 1e-6, 0);
  CHECK_CLOSE("gather", b, a, LQ * LK, 0, 0);
}

/* ---- the tool ----------------------------------------------------------------- */
static char bin[512];

static int run_tool(const char *args, char *err, size_t nerr) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "'%s' %s >/dev/null 2>/tmp/attn_var_err.%d", bin, args, (int)getpid());
  int rc = system(cmd);
  char ep[64];
  snprintf(ep, sizeof ep, "/tmp/attn_var_err.%d", (int)getpid());
  err[0] = '\0';
  FILE *f = fopen(ep, "r");
  if (f) {
    size_t n = fread(err, 1, nerr - 1, f);
    err[n] = '\0';
    fclose(f);
  }
  remove(ep);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

static const char *const inputs[] = {"q",        "k",      "v",      "dout",      "alibi_slopes",
                                     "rel_bias", "shaw_k", "shaw_v", "block_mask"};

/* The input part of golden file g to path, without tensor skip_t and
 * metadata key skip_m, plus metadata add_k = add_v (each may be NULL). */
static void write_input(const attn_st *g, const char *path, const char *skip_t, const char *skip_m,
                        const char *add_k, const char *add_v) {
  attn_st *in = NULL;
  CHECK_OK(attn_st_new(&in));
  for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
    const attn_tensor *t = attn_st_get(g, inputs[i]);
    if (t && (!skip_t || strcmp(skip_t, inputs[i])))
      CHECK_OK(attn_st_add(in, inputs[i], t->dtype, t->ndim, t->shape, t->data));
  }
  for (int i = 0; i < attn_st_meta_count(g); i++) {
    const char *k = attn_st_meta_key(g, i);
    if (!skip_m || strcmp(skip_m, k)) CHECK_OK(attn_st_set_meta(in, k, attn_st_meta(g, k)));
  }
  if (add_k) CHECK_OK(attn_st_set_meta(in, add_k, add_v));
  CHECK_OK(attn_st_save(in, path));
  attn_st_free(in);
}

static const char *const results[] = {"out", "lse",       "dq",      "dk",
                                      "dv",  "drel_bias", "dshaw_k", "dshaw_v"};

/* One run of the tool on a golden file's inputs (edited as write_input);
 * want_err NULL: must succeed and match the golden results; else must fail
 * with a message containing want_err. */
static void cli_case(const char *name, const char *skip_t, const char *skip_m, const char *add_k,
                     const char *add_v, const char *want_err) {
  char in[64], out[64], args[512], err[2048], path[256];
  snprintf(in, sizeof in, "/tmp/attn_var_in.%d.st", (int)getpid());
  snprintf(out, sizeof out, "/tmp/attn_var_out.%d.st", (int)getpid());
  snprintf(path, sizeof path, "tests/golden/var_sdpa_%s.safetensors", name);
  attn_st *g = NULL, *o = NULL;
  CHECK_OK(attn_st_load(path, &g));
  if (!g) return;
  write_input(g, in, skip_t, skip_m, add_k, add_v);
  remove(out);
  snprintf(args, sizeof args, "sdpa %s %s", in, out);
  int rc = run_tool(args, err, sizeof err);
  if (want_err) {
    CHECK(rc != 0 && strstr(err, want_err));
    if (!(rc != 0 && strstr(err, want_err))) printf("  %s: rc %d, '%s'\n", name, rc, err);
    CHECK(attn_st_load(out, &o) != ATTN_OK); /* no output on failure */
  } else {
    CHECK(rc == 0);
    if (rc) printf("  %s: %s\n", name, err);
    CHECK_OK(attn_st_load(out, &o));
    for (size_t r = 0; o && r < sizeof results / sizeof results[0]; r++) {
      const attn_tensor *w = attn_st_get(g, results[r]), *t = attn_st_get(o, results[r]);
      CHECK(!w == !t);
      if (w && t) CHECK_CLOSE(results[r], t->data, w->data, attn_tensor_numel(w), ATOL, RTOL);
    }
  }
  attn_st_free(o);
  attn_st_free(g);
  remove(in);
  remove(out);
}

static void test_cli(void) {
  const char *env = getenv("ATTN_BIN");
  if (env) snprintf(bin, sizeof bin, "%s", env); /* else main's <dir of this program>/../attn */
  cli_case("combo", NULL, NULL, NULL, NULL, NULL);
  cli_case("t5_causal", NULL, NULL, NULL, NULL, NULL);
  cli_case("rope_half_gqa", NULL, NULL, NULL, NULL, NULL);
  cli_case("rope_partial", NULL, NULL, NULL, NULL, NULL); /* metadata rope_dim */
  cli_case("rope_partial", NULL, NULL, "rope_dim", "3", "rope_dim");
  cli_case("rope_partial", NULL, NULL, "rope_dim", "18", "rope_dim");
  cli_case("rope_partial", NULL, "rope", NULL, NULL, "rope_dim");
  cli_case("shaw", NULL, NULL, NULL, NULL, NULL);
  /* the standard slopes from metadata alibi=1 equal the golden (BLOOM) ones */
  cli_case("alibi_causal", "alibi_slopes", NULL, "alibi", "1", NULL);
  cli_case("alibi_causal", NULL, NULL, "alibi", "1", "alibi");
  cli_case("combo", NULL, "block_size", NULL, NULL, "block_size");
  cli_case("t5_causal", NULL, "rel_max_distance", NULL, NULL, "rel_max_distance");
  cli_case("rope_interleaved", NULL, NULL, "rope", "gptj", "rope layout");
  cli_case("block", NULL, NULL, "q_offset", "-2", "q_offset"); /* a block layout needs >= 0 */
}

int main(int argc, char **argv) {
  (void)argc;
  const char *slash = strrchr(argv[0], '/');
  snprintf(bin, sizeof bin, "%.*s/../attn", slash ? (int)(slash - argv[0]) : 1,
           slash ? argv[0] : ".");
  attn_set_num_threads(1); /* one thread except the thread-count checks */
  RUN(test_golden_math);
  RUN(test_golden_auto);
  RUN(test_golden_flash);
  RUN(test_tables);
  RUN(test_rope_golden);
  RUN(test_rope_partial);
  RUN(test_decode);
  RUN(test_block_sparse);
  RUN(test_validation);
  RUN(test_threads);
  RUN(test_tiles);
  RUN(test_cli);
  HARNESS_END();
}
