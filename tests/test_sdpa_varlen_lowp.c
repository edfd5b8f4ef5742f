/* Packed variable-length SDPA in bf16 and fp16 (forward and backward) and
 * int8 (forward) (attn/sdpa_varlen.h): five sequences of mixed lengths with
 * empty ones (no queries, no keys, more queries than keys), GQA, Dv != D,
 * under no mask, causal, causal + window, a two-sided window and explicit
 * q_offsets, with sinks and softcap:
 * - against the f32 math varlen on the same (rounded) values, with each
 *   dtype's tolerance as tests/test_sdpa_varlen.c's test_lowp_offsets
 *   (bf16 2e-2, fp16 1e-4, gradients 4x; int8 forward 5e-2; rows with no
 *   key agree exactly: out 0, lse -inf);
 * - bit for bit equal to each sequence run alone through the dtype's kernel
 *   (sink gradients: the per-sequence sums in sequence order);
 * - bad cu_seqlens and unsupported variants refused with a message;
 * - `attn bench varlen --dtype` runs each dtype (no timing checked). */
#include <stdint.h>
#include <string.h>

#include "attn/lowp.h"
#include "attn/sdpa_bf16.h"
#include "attn/sdpa_f16.h"
#include "attn/sdpa_i8.h"
#include "attn/sdpa_varlen.h"
#include "harness.h"
#include "round16.h"
#include "tool_run.h"

enum { NS = 5, HQ = 4, HKV = 2, D = 16, DV = 24 };
static const int32_t lens_q[NS] = {70, 0, 33, 5, 64}, lens_k[NS] = {70, 12, 0, 40, 30};
enum { BF16, F16, I8 };
static const char *const dtype_names[] = {"bf16", "f16", "i8"};

/* One packed batch: cu_seqlens, inputs (f32, and their 16-bit bits when
 * rounded), the math varlen results on the same values. */
typedef struct {
  int32_t cq[NS + 1], ck[NS + 1];
  int64_t tq, tk, nq, nk, nv, no, nl;
  attn_sdpa_varlen vl;
  attn_sdpa_desc d;
  int64_t offs[NS];
  float sinks[HQ], dsinks[HQ];
  float *q, *k, *v, *dout;
  uint16_t *q16, *k16, *v16;
  float *om, *lm, *gm[3];
} batch;

static float *falloc(int64_t n) { return calloc((size_t)n + 1, sizeof(float)); }

/* config: 0 none, 1 causal, 2 causal + window_left 20, 3 window (10, 5),
 * 4 causal with q_offsets, 5 sinks + softcap (causal) */
static void batch_init(batch *b, int dtype, int config) {
  memset(b, 0, sizeof *b);
  for (int s = 0; s < NS; s++) {
    b->cq[s + 1] = b->cq[s] + lens_q[s];
    b->ck[s + 1] = b->ck[s] + lens_k[s];
  }
  b->tq = b->cq[NS], b->tk = b->ck[NS];
  b->vl = (attn_sdpa_varlen){b->cq, b->ck, b->tq, b->tk};
  attn_sdpa_desc_init(&b->d, NS, HQ, HKV, 70, 70, D, DV);
  b->d.causal = config == 1 || config == 2 || config == 4 || config == 5;
  if (config == 2) b->d.window_left = 20;
  if (config == 3) b->d.window_left = 10, b->d.window_right = 5;
  if (config == 4) {
    const int64_t o[NS] = {-10, 3, 0, 40, -60};
    memcpy(b->offs, o, sizeof o);
    b->d.q_offsets = b->offs;
  }
  if (config == 5) {
    for (int h = 0; h < HQ; h++)
      b->sinks[h] = 0.5f * (float)h - 0.7f;
    b->d.sinks = b->sinks;
    b->d.softcap = 2.5f;
  }
  b->nq = b->tq * HQ * D, b->nk = b->tk * HKV * D, b->nv = b->tk * HKV * DV;
  b->no = b->tq * HQ * DV, b->nl = b->tq * HQ;
  b->q = falloc(b->nq), b->k = falloc(b->nk), b->v = falloc(b->nv), b->dout = falloc(b->no);
  fill_uniform(b->q, b->nq, 21, -1, 1);
  fill_uniform(b->k, b->nk, 22, -1, 1);
  fill_uniform(b->v, b->nv, 23, -1, 1);
  fill_uniform(b->dout, b->no, 24, -1, 1);
  if (dtype != I8) {
    b->q16 = calloc(b->nq + 1, 2), b->k16 = calloc(b->nk + 1, 2), b->v16 = calloc(b->nv + 1, 2);
    round16(b->q, b->q16, b->nq, dtype == BF16);
    round16(b->k, b->k16, b->nk, dtype == BF16);
    round16(b->v, b->v16, b->nv, dtype == BF16);
  }
  b->om = falloc(b->no), b->lm = falloc(b->nl);
  b->gm[0] = falloc(b->nq), b->gm[1] = falloc(b->nk), b->gm[2] = falloc(b->nv);
  attn_sdpa_desc dm = b->d;
  dm.sinks_grad = b->dsinks;
  CHECK_OK(attn_sdpa_varlen_forward(&dm, &b->vl, ATTN_BACKEND_MATH, b->q, b->k, b->v, b->om, b->lm));
  CHECK_OK(attn_sdpa_varlen_backward(&dm, &b->vl, ATTN_BACKEND_MATH, b->q, b->k, b->v, b->om,
                                     b->lm, b->dout, b->gm[0], b->gm[1], b->gm[2]));
}

static void batch_free(batch *b) {
  free(b->q), free(b->k), free(b->v), free(b->dout), free(b->q16), free(b->k16), free(b->v16);
  free(b->om), free(b->lm), free(b->gm[0]), free(b->gm[1]), free(b->gm[2]);
}

static attn_status fwd(int dtype, const attn_sdpa_desc *d, const attn_sdpa_varlen *vl,
                       const batch *b, float *out, float *lse) {
  switch (dtype) {
  case BF16: return attn_sdpa_varlen_forward_bf16(d, vl, b->q16, b->k16, b->v16, out, lse);
  case F16: return attn_sdpa_varlen_forward_f16(d, vl, b->q16, b->k16, b->v16, out, lse);
  default: return attn_sdpa_varlen_forward_i8(d, vl, b->q, b->k, b->v, out, lse);
  }
}

static attn_status bwd(int dtype, const attn_sdpa_desc *d, const attn_sdpa_varlen *vl,
                       const batch *b, const float *out, const float *lse, float *g[3]) {
  return dtype == BF16 ? attn_sdpa_varlen_backward_bf16(d, vl, b->q16, b->k16, b->v16, out, lse,
                                                        b->dout, g[0], g[1], g[2])
                       : attn_sdpa_varlen_backward_f16(d, vl, b->q16, b->k16, b->v16, out, lse,
                                                       b->dout, g[0], g[1], g[2]);
}

/* Sequence s of b alone: a B = 1 call of the dtype's kernel on its rows
 * (layout [len, H, W]: head stride W, row stride H * W). */
static attn_sdpa_desc alone_desc(const batch *b, int s) {
  attn_sdpa_desc x = b->d;
  x.B = 1, x.Lq = lens_q[s], x.Lk = lens_k[s];
  x.q_offsets = NULL;
  x.q_offset = b->d.q_offsets ? b->offs[s] : x.Lk - x.Lq;
  const int64_t sq[3] = {0, D, HQ * D}, sk[3] = {0, D, HKV * D}, sv[3] = {0, DV, HKV * DV},
                so[3] = {0, DV, HQ * DV};
  memcpy(x.q_stride, sq, sizeof sq), memcpy(x.k_stride, sk, sizeof sk);
  memcpy(x.v_stride, sv, sizeof sv), memcpy(x.o_stride, so, sizeof so);
  return x;
}

static int same_bits(const float *a, const float *b, int64_t n) {
  return n == 0 || !memcmp(a, b, (size_t)n * sizeof(float));
}

/* The packed results equal each sequence run alone (bit for bit). */
static void check_alone(int dtype, const batch *b, const float *out, const float *lse,
                        float *const g[3], const float *dsinks) {
  float ds_sum[HQ] = {0}, ds[HQ];
  for (int s = 0; s < NS; s++) {
    attn_sdpa_desc x = alone_desc(b, s);
    const int64_t q0 = b->cq[s], k0 = b->ck[s], nq = lens_q[s], nk = lens_k[s];
    float *o = falloc(nq * HQ * DV), *l = falloc(nq * HQ), *dq = falloc(nq * HQ * D);
    float *dk = falloc(nk * HKV * D), *dv = falloc(nk * HKV * DV);
    const uint16_t *q16 = b->q16 + q0 * HQ * D, *k16 = b->k16 + k0 * HKV * D;
    const uint16_t *v16 = b->v16 + k0 * HKV * DV;
    if (dtype == BF16)
      CHECK_OK(attn_sdpa_forward_bf16(&x, q16, k16, v16, o, l));
    else if (dtype == F16)
      CHECK_OK(attn_sdpa_forward_f16(&x, q16, k16, v16, o, l));
    else
      CHECK_OK(attn_sdpa_forward_i8(&x, b->q + q0 * HQ * D, b->k + k0 * HKV * D,
                                    b->v + k0 * HKV * DV, o, l));
    CHECK(same_bits(out + q0 * HQ * DV, o, nq * HQ * DV));
    CHECK(same_bits(lse + q0 * HQ, l, nq * HQ));
    if (g) {
      const float *go = b->dout + q0 * HQ * DV;
      x.sinks_grad = b->d.sinks ? ds : NULL;
      if (dtype == BF16)
        CHECK_OK(attn_sdpa_backward_bf16(&x, q16, k16, v16, o, l, go, dq, dk, dv));
      else
        CHECK_OK(attn_sdpa_backward_f16(&x, q16, k16, v16, o, l, go, dq, dk, dv));
      CHECK(same_bits(g[0] + q0 * HQ * D, dq, nq * HQ * D));
      CHECK(same_bits(g[1] + k0 * HKV * D, dk, nk * HKV * D));
      CHECK(same_bits(g[2] + k0 * HKV * DV, dv, nk * HKV * DV));
      for (int h = 0; b->d.sinks && h < HQ; h++)
        ds_sum[h] += ds[h];
    }
    free(o), free(l), free(dq), free(dk), free(dv);
  }
  if (g && dsinks) CHECK(same_bits(dsinks, ds_sum, HQ));
}

static void run_dtype(int dtype) {
  for (int config = 0; config < 6; config++) {
    if (dtype == I8 && config == 5) continue; /* int8: sinks/softcap covered by test_sdpa_i8 */
    batch b;
    batch_init(&b, dtype, config);
    float *out = falloc(b.no), *lse = falloc(b.nl);
    float *g[3] = {falloc(b.nq), falloc(b.nk), falloc(b.nv)}, dsinks[HQ];
    const double tol = dtype == BF16 ? 2e-2 : dtype == F16 ? 1e-4 : 5e-2;
    CHECK_OK(fwd(dtype, &b.d, &b.vl, &b, out, lse));
    double e[5] = {0};
    e[0] = CHECK_CLOSE("out", out, b.om, b.no, tol, tol);
    e[1] = CHECK_CLOSE("lse", lse, b.lm, b.nl, tol, tol);
    int64_t noinf = 0; /* rows with no key: sequence 2 (no keys) */
    for (int64_t i = 0; i < b.nl; i++)
      noinf += lse[i] == -INFINITY;
    CHECK(config == 5 ? noinf == 0 : noinf >= lens_q[2] * HQ);
    if (dtype != I8) {
      attn_sdpa_desc d = b.d;
      d.sinks_grad = d.sinks ? dsinks : NULL;
      CHECK_OK(bwd(dtype, &d, &b.vl, &b, b.om, b.lm, g));
      e[2] = CHECK_CLOSE("dq", g[0], b.gm[0], b.nq, 4 * tol, 4 * tol);
      e[3] = CHECK_CLOSE("dk", g[1], b.gm[1], b.nk, 4 * tol, 4 * tol);
      e[4] = CHECK_CLOSE("dv", g[2], b.gm[2], b.nv, 4 * tol, 4 * tol);
      if (d.sinks) CHECK_CLOSE("dsinks", dsinks, b.dsinks, HQ, 4 * tol, 4 * tol);
      /* gradients on the kernel's own forward, as a user would run */
      CHECK_OK(bwd(dtype, &d, &b.vl, &b, out, lse, g));
    }
    printf("  %-4s config %d max abs err: out %.1e lse %.1e dq %.1e dk %.1e dv %.1e\n",
           dtype_names[dtype], config, e[0], e[1], e[2], e[3], e[4]);
    check_alone(dtype, &b, out, lse, dtype == I8 ? NULL : g, b.d.sinks ? dsinks : NULL);
    free(out), free(lse), free(g[0]), free(g[1]), free(g[2]);
    batch_free(&b);
  }
}

static void test_bf16(void) { run_dtype(BF16); }
static void test_f16(void) { run_dtype(F16); }
static void test_i8(void) { run_dtype(I8); }

/* All sequences empty (total 0 rows): nothing to do, every dtype. */
static void test_all_empty(void) {
  const int32_t cu[3] = {0, 0, 0};
  const attn_sdpa_varlen vl = {cu, cu, 0, 0};
  attn_sdpa_desc d;
  attn_sdpa_desc_init(&d, 2, 2, 1, 0, 0, 8, 8);
  d.causal = 1;
  uint16_t h[1] = {0};
  float f[1] = {0}, o[1] = {7}, l[1] = {7}, g[3][1];
  CHECK_OK(attn_sdpa_varlen_forward_bf16(&d, &vl, h, h, h, o, l));
  CHECK_OK(attn_sdpa_varlen_backward_bf16(&d, &vl, h, h, h, o, l, f, g[0], g[1], g[2]));
  CHECK_OK(attn_sdpa_varlen_forward_f16(&d, &vl, h, h, h, o, l));
  CHECK_OK(attn_sdpa_varlen_backward_f16(&d, &vl, h, h, h, o, l, f, g[0], g[1], g[2]));
  CHECK_OK(attn_sdpa_varlen_forward_i8(&d, &vl, f, f, f, o, l));
  CHECK(o[0] == 7 && l[0] == 7);
}

/* The last error holds msg. */
static void check_msg(const char *msg) {
  const int ok = strstr(attn_last_error(), msg) != NULL;
  CHECK(ok);
  if (!ok) printf("  error: %s; expected: %s\n", attn_last_error(), msg);
}

/* Bad cu_seqlens and unsupported variants: a status and a message, the
 * same rules as the f32 varlen. */
static void test_bad_input(void) {
  static const struct {
    int32_t cq[3];
    const char *msg;
  } bad[] = {{{1, 2, 4}, "must start at 0"},
             {{0, 2, 1}, "decreases"},
             {{0, 2, 3}, "the tensor has 4 rows"},
             {{0, 1, 4}, "more than the maximum"}};
  const int32_t ck[3] = {0, 2, 4};
  uint16_t h[64] = {0};
  float f[64] = {0}, o[64], l[64], g[3][64];
  for (int dtype = 0; dtype < 3; dtype++)
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
      attn_sdpa_desc d;
      attn_sdpa_desc_init(&d, 2, 1, 1, 2, 2, 4, 4);
      const attn_sdpa_varlen vl = {bad[i].cq, ck, 4, 4};
      batch b = {.q16 = h, .k16 = h, .v16 = h, .q = f, .k = f, .v = f, .dout = f};
      CHECK(fwd(dtype, &d, &vl, &b, o, l) == ATTN_EINVAL);
      check_msg(bad[i].msg);
      if (dtype != I8) {
        float *gp[3] = {g[0], g[1], g[2]};
        CHECK(bwd(dtype, &d, &vl, &b, o, l, gp) == ATTN_EINVAL);
        check_msg(bad[i].msg);
      }
    }
  /* position variants: the kernels' own refusal; NULL cu_seqlens */
  attn_sdpa_desc d;
  attn_sdpa_desc_init(&d, 2, 1, 1, 2, 2, 4, 4);
  const int32_t cu[3] = {0, 2, 4};
  const float slopes[1] = {0.5f};
  d.alibi_slopes = slopes;
  const attn_sdpa_varlen vl = {cu, cu, 4, 4}, vn = {NULL, cu, 4, 4};
  batch b = {.q16 = h, .k16 = h, .v16 = h, .q = f, .k = f, .v = f, .dout = f};
  for (int dtype = 0; dtype < 3; dtype++) {
    CHECK(fwd(dtype, &d, &vl, &b, o, l) == ATTN_EUNSUPPORTED);
    check_msg("position variants");
    CHECK(fwd(dtype, &d, &vn, &b, o, l) == ATTN_EINVAL);
    check_msg("cu_seqlens_q is NULL");
  }
}

static char bin[512];

static void test_bench_dtype(void) {
  static const char *const dts[] = {"bf16", "fp16", "int8"};
  char args[256], so[4096], err[2048];
  for (int i = 0; i < 3; i++) {
    snprintf(args, sizeof args,
             "bench varlen --lens 8,40,3,0 --heads 2 --dim 8 --reps 1 --causal --dtype %s", dts[i]);
    int rc = tool_run("", bin, "/tmp", args, so, sizeof so, err, sizeof err);
    char want[32];
    snprintf(want, sizeof want, "%s flash", dts[i]);
    CHECK(rc == 0 && strstr(so, want) && strstr(so, "speedup"));
    CHECK(rc == 0 && (i == 2 ? strstr(so, "forward only") != NULL
                             : strstr(so, "backward padded") != NULL));
    if (rc) printf("  bench varlen --dtype %s: rc %d: %s\n", dts[i], rc, err);
  }
  int rc = tool_run("", bin, "/tmp", "bench varlen --dtype f8", so, sizeof so, err, sizeof err);
  CHECK(rc == 2 && strstr(err, "bad arguments"));
}

int main(int argc, char **argv) {
  (void)argc;
  tool_path(argv[0], bin, sizeof bin);
  RUN(test_bf16);
  RUN(test_f16);
  RUN(test_i8);
  RUN(test_all_empty);
  RUN(test_bad_input);
  RUN(test_bench_dtype);
  HARNESS_END();
}
