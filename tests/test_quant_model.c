/* Quantized models: `attn quantize` files (round trip within scale/2, every
 * other tensor byte-identical, metadata), the int8 Linear table running an
 * encoder layer in int8, and QAT (forward = fake quantization of the f32
 * Linear, EMA observer, straight-through backward; per-row activations
 * computing what the exported int8 model computes). */
#include <unistd.h>

#include "attn/quant.h"
#include "harness.h"

static char tmpdir[64];

static void test_linear_weight_rules(void) {
  attn_tensor t = {ATTN_F32, 2, {4, 3}, NULL};
  CHECK(attn_quant_is_linear_weight("enc.0.self_attn.in_proj_weight", &t));
  CHECK(attn_quant_is_linear_weight("enc.0.self_attn.out_proj.weight", &t));
  CHECK(attn_quant_is_linear_weight("enc.0.linear1.weight", &t));
  CHECK(attn_quant_is_linear_weight("fc.weight", &t));
  CHECK(attn_quant_is_linear_weight("attn.q_proj_weight", &t));
  CHECK(!attn_quant_is_linear_weight("embedding.weight", &t));
  CHECK(!attn_quant_is_linear_weight("positions.weight", &t));
  CHECK(!attn_quant_is_linear_weight("enc.0.norm1.weight", &t));
  CHECK(!attn_quant_is_linear_weight("fc.bias", &t));
  CHECK(!attn_quant_is_linear_weight("optim.m.fc.weightx", &t));
  attn_tensor v = {ATTN_F32, 1, {4}, NULL};
  CHECK(!attn_quant_is_linear_weight("fc.weight", &v));  // 1-D
  attn_tensor h = {ATTN_F16, 2, {4, 3}, NULL};
  CHECK(!attn_quant_is_linear_weight("fc.weight", &h));
}

/* A small model file: Linear weights and everything else. */
static attn_st *model_st(void) {
  attn_st *st;
  if (attn_st_new(&st)) return NULL;
  static float w1[12 * 8], b1[12], w2[16 * 8], emb[10 * 8], ln[8], fc[2 * 8];
  fill_uniform(w1, 12 * 8, 1, -1, 1);
  fill_uniform(b1, 12, 2, -1, 1);
  fill_uniform(w2, 16 * 8, 3, -0.2f, 0.2f);
  for (int k = 0; k < 8; k++) w2[3 * 8 + k] = 0.0f;  // an all-zero channel
  fill_uniform(emb, 10 * 8, 4, -1, 1);
  fill_uniform(ln, 8, 5, 0, 2);
  fill_uniform(fc, 2 * 8, 6, -3, 3);
  int64_t s1[2] = {12, 8}, sb[1] = {12}, s2[2] = {16, 8}, se[2] = {10, 8}, sl[1] = {8},
          sf[2] = {2, 8}, si[1] = {3};
  int64_t ids[3] = {7, 8, 9};
  attn_status s = attn_st_add_f32(st, "enc.self_attn.in_proj_weight", 2, s1, w1);
  if (!s) s = attn_st_add_f32(st, "enc.self_attn.in_proj_bias", 1, sb, b1);
  if (!s) s = attn_st_add_f32(st, "enc.linear1.weight", 2, s2, w2);
  if (!s) s = attn_st_add_f32(st, "embedding.weight", 2, se, emb);
  if (!s) s = attn_st_add_f32(st, "enc.norm1.weight", 1, sl, ln);
  if (!s) s = attn_st_add_f32(st, "fc.weight", 2, sf, fc);
  if (!s) s = attn_st_add(st, "tokens", ATTN_I64, 1, si, ids);
  if (!s) s = attn_st_set_meta(st, "config", "{\"d_model\": 8}");
  if (s) {
    attn_st_free(st);
    return NULL;
  }
  return st;
}

static int64_t numel(const attn_tensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
  return n;
}

static void test_quantize_file_round_trip(void) {
  char in[128], out[128];
  snprintf(in, sizeof in, "%s/model.safetensors", tmpdir);
  snprintf(out, sizeof out, "%s/model.int8.safetensors", tmpdir);
  attn_st *m = model_st();
  CHECK(m != NULL);
  if (!m) return;
  CHECK_OK(attn_st_save(m, in));
  attn_quant_report rep;
  CHECK_OK(attn_quantize_file(in, out, &rep));
  CHECK(rep.tensors == 7 && rep.quantized == 3);
  CHECK(rep.linear_f32_bytes == (12 * 8 + 16 * 8 + 2 * 8) * 4);
  CHECK(rep.linear_i8_bytes == (12 * 8 + 16 * 8 + 2 * 8) + (12 + 16 + 2) * 4);
  CHECK(rep.file_out_bytes > 0 && rep.file_out_bytes < rep.file_in_bytes);
  attn_st *q = NULL, *d = NULL;
  CHECK_OK(attn_st_load(out, &q));
  if (!q) goto done;
  CHECK(attn_st_is_quantized(q) && !attn_st_is_quantized(m));
  CHECK(attn_st_meta(q, "config") && !strcmp(attn_st_meta(q, "config"), "{\"d_model\": 8}"));
  CHECK(attn_st_count(q) == 10);
  const char *lin[3] = {"enc.self_attn.in_proj_weight", "enc.linear1.weight", "fc.weight"};
  for (int i = 0; i < 3; i++) {
    const attn_tensor *t = attn_st_get(q, lin[i]), *w = attn_st_get(m, lin[i]);
    char sn[96];
    snprintf(sn, sizeof sn, "%s.scale", lin[i]);
    const attn_tensor *s = attn_st_get(q, sn);
    CHECK(t && t->dtype == ATTN_I8 && s && s->dtype == ATTN_F32 && s->shape[0] == w->shape[0]);
    if (!t || !s) continue;
    int64_t rows = w->shape[0], n = w->shape[1];
    const int8_t *qv = t->data;
    const float *sc = s->data, *wv = w->data;
    int bad = 0;
    for (int64_t r = 0; r < rows; r++) {
      float mx = 0;
      for (int64_t k = 0; k < n; k++) mx = fmaxf(mx, fabsf(wv[r * n + k]));
      bad += sc[r] != mx / 127.0f;  // attn_quantize_weights_s8's scale
      for (int64_t k = 0; k < n; k++)  // dequantized within scale / 2
        bad += fabsf(sc[r] * qv[r * n + k] - wv[r * n + k]) > sc[r] * 0.5f * (1 + 1e-5f);
    }
    CHECK(bad == 0);
  }
  const attn_tensor *z = attn_st_get(q, "enc.linear1.weight.scale");
  CHECK(z && ((const float *)z->data)[3] == 0.0f);  // the zero channel: scale 0
  const char *other[4] = {"enc.self_attn.in_proj_bias", "embedding.weight", "enc.norm1.weight",
                          "tokens"};
  for (int i = 0; i < 4; i++) {  // byte-identical
    const attn_tensor *a = attn_st_get(m, other[i]), *b = attn_st_get(q, other[i]);
    CHECK(b && a->dtype == b->dtype && a->ndim == b->ndim &&
          !memcmp(a->data, b->data, (size_t)numel(a) * attn_dtype_size(a->dtype)));
  }
  // dequantized set: F32 again, scales dropped, "quantized" dropped
  CHECK_OK(attn_dequantize_st(q, &d));
  if (d) {
    CHECK(attn_st_count(d) == 7 && !attn_st_is_quantized(d));
    const attn_tensor *t = attn_st_get(d, "fc.weight"), *w = attn_st_get(m, "fc.weight");
    CHECK(t && t->dtype == ATTN_F32);
    if (t) CHECK_CLOSE("fc.weight", t->data, w->data, 16, 3.0 / 127, 0);
  }
  // quantizing twice is refused; so is a file without Linears
  attn_st *again = NULL;
  CHECK_ERR(attn_quantize_st(q, &again, NULL), ATTN_EINVAL);
done:
  attn_st_free(m);
  attn_st_free(q);
  attn_st_free(d);
  unlink(in);
  unlink(out);
}

static void test_quantize_no_linear(void) {
  char in[128], out[128];
  snprintf(in, sizeof in, "%s/nolin.safetensors", tmpdir);
  snprintf(out, sizeof out, "%s/nolin.int8.safetensors", tmpdir);
  attn_st *m;
  CHECK_OK(attn_st_new(&m));
  float v[4] = {1, 2, 3, 4};
  int64_t s = 4;
  CHECK_OK(attn_st_add_f32(m, "norm.weight", 1, &s, v));
  CHECK_OK(attn_st_save(m, in));
  CHECK_ERR(attn_quantize_file(in, out, NULL), ATTN_EINVAL);
  CHECK(access(out, F_OK) != 0);
  attn_st_free(m);
  unlink(in);
}

/* A training checkpoint's optimizer state is dropped, not quantized: the
 * int8 file is an inference model (attn quantize OUT/last.safetensors). */
static void test_quantize_drops_optimizer_state(void) {
  attn_st *m, *q = NULL;
  CHECK_OK(attn_st_new(&m));
  float w[6] = {1, -2, 3, 4, 5, -6};
  int64_t s[2] = {2, 3};
  CHECK_OK(attn_st_add_f32(m, "fc.weight", 2, s, w));
  CHECK_OK(attn_st_add_f32(m, "optim.m.fc.weight", 2, s, w));
  CHECK_OK(attn_st_add_f32(m, "optim.v.fc.weight", 2, s, w));
  CHECK_OK(attn_quantize_st(m, &q, NULL));
  CHECK(q && attn_st_get(q, "fc.weight") && attn_st_get(q, "fc.weight")->dtype == ATTN_I8);
  CHECK(q && !attn_st_get(q, "optim.m.fc.weight") && !attn_st_get(q, "optim.v.fc.weight"));
  CHECK(q && attn_st_count(q) == 2); /* fc.weight, fc.weight.scale */
  attn_st_free(q);
  attn_st_free(m);
}

/* An encoder layer quantized, loaded back (dequantized params + int8 table)
 * and run with ctx.qlinears: 6 int8 Linears (q, k, v, out_proj, linear1,
 * linear2); each Linear gives attn_qlinear_forward's bits; the layer output
 * stays near the f32 output of the dequantized weights (int8 activations
 * per row: 2e-2 of the output's max). */
/* An encoder layer (E 32, 4 heads, FF 64) m in p with its weights drawn, a
 * second one m2 in p2 (zeros) to load a file into, p stored as st and its
 * int8 file q (attn_quantize_st). */
enum { EP_B = 2, EP_L = 7, EP_E = 32, EP_H = 4, EP_FF = 64 };
typedef struct {
  attn_params p, p2;
  attn_encoder_layer m, m2;
  attn_st *st, *q;
} enc_pair;

static void enc_pair_make(enc_pair *e) {
  attn_layer_config c = {EP_E, EP_H, EP_FF, 0.0f, ATTN_ACT_RELU, 1e-5f, 0, 1};
  memset(e, 0, sizeof *e);
  attn_params_init(&e->p);
  attn_params_init(&e->p2);
  CHECK_OK(attn_encoder_declare(&e->m, &e->p, "enc.", &c));
  CHECK_OK(attn_params_alloc(&e->p));
  CHECK_OK(attn_encoder_init(&e->m, &e->p, ATTN_INIT_TORCH, 4));
  CHECK_OK(attn_encoder_declare(&e->m2, &e->p2, "enc.", &c));
  CHECK_OK(attn_params_alloc(&e->p2));
  CHECK_OK(attn_st_new(&e->st));
  CHECK_OK(attn_params_store_st(&e->p, e->st, 0, NULL));
  CHECK_OK(attn_quantize_st(e->st, &e->q, NULL));
}

static void enc_pair_free(enc_pair *e) {
  attn_st_free(e->st);
  attn_st_free(e->q);
  attn_params_free(&e->p);
  attn_params_free(&e->p2);
}

static void test_qlinear_encoder(void) {
  enum { B = EP_B, L = EP_L, E = EP_E, FF = EP_FF };
  enc_pair ep;
  enc_pair_make(&ep);
  attn_params *p2 = &ep.p2;
  attn_encoder_layer *m2 = &ep.m2;
  attn_st *st = ep.st, *q = ep.q, *d = NULL;
  CHECK_OK(attn_dequantize_st(q, &d));
  attn_qlinear_set *qs = NULL, *none = NULL;
  CHECK_OK(attn_quant_load_params(p2, st, 0, &none));  // an f32 file: no table
  CHECK(none == NULL);
  CHECK_OK(attn_quant_load_params(p2, q, 0, &qs));
  CHECK(attn_qlinear_set_count(qs) == 6);
  int same = 1;  // the params are the dequantized file
  for (int v = 0; v < p2->count; v++) {
    const attn_tensor *t = attn_st_get(d, p2->views[v].name);
    size_t bytes = sizeof(float) * (size_t)p2->views[v].numel;
    same &= t && !memcmp(t->data, attn_params_data(p2, v), bytes);
  }
  CHECK(same);
  CHECK(attn_qlinear_set_bytes(qs) > 0);
  static float src[B * L * E], y32[B * L * E], y8[B * L * E];
  fill_uniform(src, B * L * E, 3, -1, 1);
  attn_nn_ctx ctx = {0};
  attn_encoder_saved s = {0};
  CHECK_OK(attn_encoder_forward(m2, p2, &ctx, &s, src, B, L, NULL, y32));
  ctx.qlinears = qs;
  CHECK_OK(attn_encoder_forward(m2, p2, &ctx, &s, src, B, L, NULL, y8));
  double mx = 0;
  for (int i = 0; i < B * L * E; i++)  // (not fmax: see test_qat_rows_match_int8)
    if (fabs(y32[i]) > mx) mx = fabs(y32[i]);
  CHECK_CLOSE("int8 encoder", y8, y32, B * L * E, 2e-2 * mx, 0);
  int diff = 0;
  for (int i = 0; i < B * L * E; i++) diff += y8[i] != y32[i];
  CHECK(diff > 0);  // the int8 path ran
  // one Linear: the table's entry, bit for bit
  const float *W1 = attn_params_data(p2, m2->ff.l1.weight);
  const attn_qlinear *ql = attn_qlinear_set_find(qs, W1, FF, E);
  CHECK(ql != NULL);
  static float h1[B * L * FF], h2[B * L * FF];
  CHECK_OK(attn_linear_forward_ctx(&m2->ff.l1, p2, &ctx, src, h1, B * L));
  if (ql) CHECK_OK(attn_qlinear_forward(ql, src, B * L, h2));
  CHECK(!memcmp(h1, h2, sizeof h1));
  // the file's int8 values and scales are the table's
  const attn_tensor *t = attn_st_get(q, "enc.linear1.weight");
  const attn_tensor *ts = attn_st_get(q, "enc.linear1.weight.scale");
  if (ql && t && ts) {
    CHECK(!memcmp(ql->w, t->data, (size_t)(FF * E)));
    CHECK(!memcmp(ql->scale, ts->data, sizeof(float) * FF));
  }
  // int8 Linears are inference-only
  static float dy[B * L * FF], dx[B * L * E];
  attn_params_zero_grad(p2);
  CHECK_ERR(attn_linear_backward_ctx(&m2->ff.l1, p2, &ctx, src, dy, dx, B * L), ATTN_EINVAL);
  attn_encoder_saved_free(&s);
  attn_qlinear_set_free(qs);
  attn_st_free(d);
  enc_pair_free(&ep);
}

/* QAT forward = the f32 Linear on fake-quantized x (per tensor, observer
 * range) and W (per channel), bit for bit; the observer follows the EMA. */
static void test_qat_forward(void) {
  enum { R = 6, I = 16, O = 8 };
  static float x[R * I], x2[R * I], W[O * I], b[O], y[R * O], want[R * O], xq[R * I], wq[O * I];
  fill_uniform(x, R * I, 1, -1, 3);
  fill_uniform(x2, R * I, 2, -2, 1);
  fill_uniform(W, O * I, 3, -1, 1);
  fill_uniform(b, O, 4, -1, 1);
  attn_qat *qat;
  CHECK_OK(attn_qat_new(&qat, 0));
  attn_nn_ctx ctx = {0};
  ctx.training = 1;
  ctx.qat = qat;
  CHECK_OK(attn_dense_forward_ctx(&ctx, x, W, b, y, R, I, O));
  float lo = INFINITY, hi = -INFINITY, olo, ohi;
  for (int i = 0; i < R * I; i++) lo = fminf(lo, x[i]), hi = fmaxf(hi, x[i]);
  CHECK(attn_qat_range(qat, W, &olo, &ohi) && olo == lo && ohi == hi);
  CHECK(attn_qat_count(qat) == 1);
  float sx, sw[O];
  int32_t zx;
  CHECK_OK(attn_quant_params_u8(lo, hi, &sx, &zx));
  CHECK_OK(attn_fake_quant_per_tensor_f32(x, xq, NULL, R * I, sx, zx, 0, 255));
  CHECK_OK(attn_quant_scales_per_channel_f32(W, O, I, sw));
  CHECK_OK(attn_fake_quant_per_channel_f32(W, wq, NULL, O, I, sw, -127, 127));
  CHECK_OK(attn_dense_forward_f32(xq, wq, b, want, R, I, O));
  CHECK(!memcmp(y, want, sizeof y));
  int changed = 0;
  for (int i = 0; i < R * I; i++) changed += xq[i] != x[i];
  CHECK(changed > 0);
  // second batch: EMA with c = 0.01
  CHECK_OK(attn_dense_forward_ctx(&ctx, x2, W, b, y, R, I, O));
  float lo2 = INFINITY, hi2 = -INFINITY;
  for (int i = 0; i < R * I; i++) lo2 = fminf(lo2, x2[i]), hi2 = fmaxf(hi2, x2[i]);
  float elo = lo + 0.01f * (lo2 - lo), ehi = hi + 0.01f * (hi2 - hi);
  CHECK(attn_qat_range(qat, W, &olo, &ohi) && olo == elo && ohi == ehi);
  // eval: the observer stays
  ctx.training = 0;
  CHECK_OK(attn_dense_forward_ctx(&ctx, x, W, b, y, R, I, O));
  CHECK(attn_qat_range(qat, W, &olo, &ohi) && olo == elo && ohi == ehi);
  CHECK_ERR(attn_qat_new(&qat, 2.0f), ATTN_EINVAL);
  attn_qat_free(ctx.qat);
}

/* STE: after an observer saw [0, 1), an input with values outside gets no
 * gradient there (clipped); elsewhere dx = dy · Wq, dW = dyᵀ · xq. */
static void test_qat_ste_mask(void) {
  enum { R = 5, I = 12, O = 6 };
  static float x[R * I], x2[R * I], W[O * I], y[R * O], dy[R * O], dx[R * I], dW[O * I],
      db[O];
  static float xq[R * I], wq[O * I], wdx[R * I], wdW[O * I];
  uint8_t mx[R * I];
  fill_uniform(x, R * I, 5, 0, 1);
  fill_uniform(x2, R * I, 6, -0.5f, 1.5f);
  fill_uniform(W, O * I, 7, -1, 1);
  fill_uniform(dy, R * O, 8, -1, 1);
  attn_qat *qat;
  CHECK_OK(attn_qat_new(&qat, 1e-6f));  // the range stays ~[0, 1)
  attn_nn_ctx ctx = {0};
  ctx.training = 1;
  ctx.qat = qat;
  CHECK_OK(attn_dense_forward_ctx(&ctx, x, W, NULL, y, R, I, O));
  CHECK_OK(attn_dense_forward_ctx(&ctx, x2, W, NULL, y, R, I, O));
  memset(dx, 0, sizeof dx), memset(dW, 0, sizeof dW), memset(db, 0, sizeof db);
  CHECK_OK(attn_dense_backward_ctx(&ctx, x2, W, dy, dx, dW, db, R, I, O));
  float lo, hi, sx, sw[O];
  int32_t zx;
  CHECK(attn_qat_range(qat, W, &lo, &hi));
  CHECK_OK(attn_quant_params_u8(lo, hi, &sx, &zx));
  CHECK_OK(attn_fake_quant_per_tensor_f32(x2, xq, mx, R * I, sx, zx, 0, 255));
  CHECK_OK(attn_quant_scales_per_channel_f32(W, O, I, sw));
  CHECK_OK(attn_fake_quant_per_channel_f32(W, wq, NULL, O, I, sw, -127, 127));
  CHECK_OK(attn_gemm_f32(0, 0, R, I, O, 1.0f, dy, O, wq, I, 0.0f, wdx, I));
  CHECK_OK(attn_gemm_f32(1, 0, O, I, R, 1.0f, dy, O, xq, I, 0.0f, wdW, I));
  int clipped = 0, bad = 0;
  for (int i = 0; i < R * I; i++) {
    int out_of_range = x2[i] < -sx * (zx + 0.5f) || x2[i] > sx * (255 - zx + 0.5f);
    clipped += !mx[i];
    bad += out_of_range == mx[i];  // mask 0 exactly where x was out of range
    bad += dx[i] != (mx[i] ? wdx[i] : 0.0f);
  }
  CHECK(clipped > 0 && clipped < R * I);
  CHECK(bad == 0);
  CHECK(!memcmp(dW, wdW, sizeof dW));
  // a backward for a Linear QAT never saw
  float W2[O * I];
  memcpy(W2, W, sizeof W2);
  CHECK_ERR(attn_dense_backward_ctx(&ctx, x2, W2, dy, dx, dW, db, R, I, O), ATTN_EINVAL);
  attn_qat_free(qat);
}

/* A QAT encoder layer trains: forward + backward run through every Linear
 * (6 observers) and the gradients stay near the f32 ones. */
static void test_qat_encoder(void) {
  enum { B = 2, L = 5, E = 16, H = 2, FF = 32 };
  attn_layer_config c = {E, H, FF, 0.0f, ATTN_ACT_GELU, 1e-5f, 1, 1};
  attn_params p;
  attn_params_init(&p);
  attn_encoder_layer m;
  CHECK_OK(attn_encoder_declare(&m, &p, "enc.", &c));
  CHECK_OK(attn_params_alloc(&p));
  CHECK_OK(attn_encoder_init(&m, &p, ATTN_INIT_TORCH, 9));
  static float src[B * L * E], dout[B * L * E], out[2][B * L * E], dsrc[2][B * L * E];
  fill_uniform(src, B * L * E, 1, -1, 1);
  fill_uniform(dout, B * L * E, 2, -1, 1);
  attn_qat *qat;
  CHECK_OK(attn_qat_new(&qat, 0));
  for (int k = 0; k < 2; k++) {
    attn_nn_ctx ctx = {0};
    ctx.training = 1;
    ctx.qat = k ? qat : NULL;
    attn_encoder_saved s = {0};
    memset(dsrc[k], 0, sizeof dsrc[k]);
    attn_params_zero_grad(&p);
    CHECK_OK(attn_encoder_forward(&m, &p, &ctx, &s, src, B, L, NULL, out[k]));
    CHECK_OK(attn_encoder_backward(&m, &p, &ctx, &s, src, dout, dsrc[k]));
    attn_encoder_saved_free(&s);
  }
  CHECK(attn_qat_count(qat) == 6);
  CHECK_CLOSE("qat out", out[1], out[0], B * L * E, 5e-2, 0);
  CHECK_CLOSE("qat dsrc", dsrc[1], dsrc[0], B * L * E, 1e-1, 0);
  CHECK(memcmp(out[1], out[0], sizeof out[0]) != 0);
  attn_qat_free(qat);
  attn_params_free(&p);
}

/* Export: the int8 file of a QAT model holds exactly the weights the QAT
 * forward used (fake-quantized W == scale * q of the file, bit for bit). */
static void test_qat_export_matches(void) {
  enum { O = 9, I = 20 };
  attn_params p;
  attn_params_init(&p);
  attn_linear l;
  CHECK_OK(attn_linear_declare(&l, &p, "head.", I, O, 1));
  CHECK_OK(attn_params_alloc(&p));
  CHECK_OK(attn_linear_init(&l, &p, ATTN_INIT_TORCH, 21));
  const float *W = attn_params_data(&p, l.weight);
  float sw[O], wq[O * I];
  CHECK_OK(attn_quant_scales_per_channel_f32(W, O, I, sw));
  CHECK_OK(attn_fake_quant_per_channel_f32(W, wq, NULL, O, I, sw, -127, 127));
  attn_st *st, *q = NULL, *d = NULL;
  CHECK_OK(attn_st_new(&st));
  CHECK_OK(attn_params_store_st(&p, st, 0, NULL));
  CHECK_OK(attn_quantize_st(st, &q, NULL));
  if (q) CHECK_OK(attn_dequantize_st(q, &d));
  const attn_tensor *t = d ? attn_st_get(d, "head.weight") : NULL;
  CHECK(t && t->dtype == ATTN_F32 && !memcmp(t->data, wq, sizeof wq));
  attn_st_free(st);
  attn_st_free(q);
  attn_st_free(d);
  attn_params_free(&p);
}

/* Per-row QAT (ATTN_QAT_ACT_ROW) simulates the dynamic int8 runtime: an
 * encoder layer's QAT forward equals the int8 model exported from the same
 * weights up to f32 summation order (far closer than f32 or per-tensor QAT
 * are to it), its STE passes every input gradient, and it needs no
 * observer history (the first batch is already quantized). */
static void test_qat_rows_match_int8(void) {
  enum { B = EP_B, L = EP_L, E = EP_E };
  enc_pair ep;
  enc_pair_make(&ep);
  attn_params *p = &ep.p, *p2 = &ep.p2;
  attn_encoder_layer *m = &ep.m, *m2 = &ep.m2;
  attn_qlinear_set *qs = NULL;
  CHECK_OK(attn_quant_load_params(p2, ep.q, 0, &qs));
  static float src[B * L * E], y32[B * L * E], y8[B * L * E], yrow[B * L * E], yten[B * L * E];
  fill_uniform(src, B * L * E, 3, -1, 1);
  attn_encoder_saved s = {0};
  attn_nn_ctx ctx = {0};
  CHECK_OK(attn_encoder_forward(m, p, &ctx, &s, src, B, L, NULL, y32));
  ctx.qlinears = qs;
  CHECK_OK(attn_encoder_forward(m2, p2, &ctx, &s, src, B, L, NULL, y8));
  attn_qat *rows, *tens;
  CHECK_OK(attn_qat_new(&rows, 0));
  CHECK_OK(attn_qat_set_activation(rows, ATTN_QAT_ACT_ROW));
  CHECK_ERR(attn_qat_set_activation(rows, (attn_qat_act)7), ATTN_EINVAL);
  CHECK_OK(attn_qat_new(&tens, 0));
  attn_nn_ctx cq = {0};
  cq.training = 1;  // training mode: the tensor observer takes this batch's range
  cq.qat = rows;
  CHECK_OK(attn_encoder_forward(m, p, &cq, &s, src, B, L, NULL, yrow));
  cq.qat = tens;
  CHECK_OK(attn_encoder_forward(m, p, &cq, &s, src, B, L, NULL, yten));
  double e_row = 0, e_f32 = 0, e_ten = 0;
  /* not fmax: a double fmax reduction of a constant-count loop crashes
   * aarch64-linux-gnu-gcc 12.2 ("internal compiler error: in
   * vect_transform_reduction"); the same maxima (no NaN here) */
  for (int i = 0; i < B * L * E; i++) {
    double a = fabs(yrow[i] - y8[i]), b = fabs(y32[i] - y8[i]), c = fabs(yten[i] - y8[i]);
    if (a > e_row) e_row = a;
    if (b > e_f32) e_f32 = b;
    if (c > e_ten) e_ten = c;
  }
  printf("  max |y - int8|: per-row QAT %.2e, per-tensor QAT %.2e, f32 %.2e\n", e_row, e_ten,
         e_f32);
  CHECK(e_row < 1e-4);
  CHECK(e_row < 0.05 * e_f32 && e_row < 0.05 * e_ten);
  // STE: nothing clipped, so dx = dy · Wq on every input
  enum { R = 5, I = 12, O = 6 };
  static float x[R * I], W[O * I], dy[R * O], y[R * O], dx[R * I], dW[O * I], db[O], wq[O * I],
      want[R * I], sw[O];
  fill_uniform(x, R * I, 11, -2, 3);
  fill_uniform(W, O * I, 12, -1, 1);
  fill_uniform(dy, R * O, 13, -1, 1);
  cq.qat = rows;
  CHECK_OK(attn_dense_forward_ctx(&cq, x, W, NULL, y, R, I, O));
  memset(dx, 0, sizeof dx), memset(dW, 0, sizeof dW), memset(db, 0, sizeof db);
  CHECK_OK(attn_dense_backward_ctx(&cq, x, W, dy, dx, dW, db, R, I, O));
  CHECK_OK(attn_quant_scales_per_channel_f32(W, O, I, sw));
  CHECK_OK(attn_fake_quant_per_channel_f32(W, wq, NULL, O, I, sw, -127, 127));
  CHECK_OK(attn_gemm_f32(0, 0, R, I, O, 1.0f, dy, O, wq, I, 0.0f, want, I));
  CHECK(!memcmp(dx, want, sizeof dx));
  float lo, hi;
  CHECK(!attn_qat_range(rows, W, &lo, &hi));  // no observer in row mode
  x[7] = NAN;
  CHECK_ERR(attn_dense_forward_ctx(&cq, x, W, NULL, y, R, I, O), ATTN_ENUMERIC);
  attn_encoder_saved_free(&s);
  attn_qat_free(rows);
  attn_qat_free(tens);
  attn_qlinear_set_free(qs);
  enc_pair_free(&ep);
}

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/attn_quant_XXXXXX");
  if (!mkdtemp(tmpdir)) return 1;
  RUN(test_linear_weight_rules);
  RUN(test_quantize_file_round_trip);
  RUN(test_quantize_no_linear);
  RUN(test_quantize_drops_optimizer_state);
  RUN(test_qlinear_encoder);
  RUN(test_qat_forward);
  RUN(test_qat_ste_mask);
  RUN(test_qat_encoder);
  RUN(test_qat_export_matches);
  RUN(test_qat_rows_match_int8);
  rmdir(tmpdir);
  HARNESS_END();
}
