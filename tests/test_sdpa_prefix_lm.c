/* Prefix-LM (attn_sdpa_desc.prefix_lens with causal: the first prefix_lens[b]
 * keys seen by every query, the rest causally) through the one SDPA entry
 * (attn_sdpa_forward / attn_sdpa_backward with attn_sdpa_args):
 *   - golden files from PyTorch (tools/golden_prefix_lm.py: the boolean mask
 *     built in torch, float64): f32 math and flash (both kernel sets), dense
 *     and packed varlen, forward and backward, within 1e-5 + 1e-4 relative;
 *   - bf16 and fp16 on every path this machine has, against the f32 math
 *     path on the same 16-bit values (dtype bf16/fp16, path math: the entry's
 *     widened reference), with test_sdpa_bf16.c's tolerances (out 2.5e-3
 *     bf16 / 1e-3 fp16 times max(1, max|v|), lse 2e-5 + 2e-5 |lse|, gradients 2^-7 of their
 *     largest magnitude + 1e-4); int8 forward on every path within its
 *     quantization bound (out 3e-2, lse 5e-2, as test_sdpa_softcap.c);
 *   - the prefix changes the answer (so none of the above could pass with
 *     the field ignored), the same bits at 1 and 3 threads;
 *   - the entry's refusals: prefix_lens without causal or out of [0, Lk],
 *     an int8 backward, a low-precision path for f32, unknown dtype / path,
 *     probs from a flash path. */
#include <stdint.h>
#include <string.h>

#include "attn.h"
#include "harness.h"
#include "kernels/flash/sdpa_flash.h"
#include "kernels/kern.h"
#include "sdpa_golden.h"
#include "sdpa_problem.h"

/* A plm_* file's descriptor (dense: q [B,Hq,Lq,D]; varlen: q [total,Hq,D]
 * with cu_seqlens) and its sizes. */
typedef struct {
  attn_st *g;
  attn_sdpa_desc d;
  attn_sdpa_varlen vl;
  int varlen;
  int64_t n[5]; /* out, lse, dq, dk, dv elements */
  const float *q, *k, *v, *dout;
} plm_file;

static int64_t max_len(const int32_t *cu, int64_t B) {
  int64_t m = 0;
  for (int64_t s = 0; s < B; s++)
    if (cu[s + 1] - cu[s] > m) m = cu[s + 1] - cu[s];
  return m;
}

static int plm_load(const char *name, plm_file *f) {
  char path[256];
  memset(f, 0, sizeof *f);
  snprintf(path, sizeof path, "tests/golden/plm_%s.safetensors", name);
  CHECK_OK(attn_st_load(path, &f->g));
  if (!f->g) return 0;
  const attn_tensor *cq = attn_st_get(f->g, "cu_seqlens_q"), *q = attn_st_get(f->g, "q");
  const attn_tensor *k = attn_st_get(f->g, "k"), *v = attn_st_get(f->g, "v");
  if (cq) {
    const attn_tensor *ck = attn_st_get(f->g, "cu_seqlens_k");
    const int64_t B = cq->shape[0] - 1;
    f->varlen = 1;
    f->vl = (attn_sdpa_varlen){cq->data, ck->data, q->shape[0], k->shape[0]};
    attn_sdpa_desc_init(&f->d, B, q->shape[1], k->shape[1], max_len(cq->data, B),
                        max_len(ck->data, B), q->shape[2], v->shape[2]);
    f->d.causal = 1;
    const int64_t tq = q->shape[0], tk = k->shape[0];
    const int64_t n[5] = {tq * f->d.Hq * f->d.Dv, tq * f->d.Hq, tq * f->d.Hq * f->d.D,
                          tk * f->d.Hkv * f->d.D, tk * f->d.Hkv * f->d.Dv};
    memcpy(f->n, n, sizeof n);
  } else {
    golden_sdpa_desc(f->g, &f->d);
    f->d.q_offset = golden_meta_int(f->g, "q_offset", 0);
    const attn_sdpa_desc *d = &f->d;
    const int64_t n[5] = {d->B * d->Hq * d->Lq * d->Dv, d->B * d->Hq * d->Lq,
                          d->B * d->Hq * d->Lq * d->D, d->B * d->Hkv * d->Lk * d->D,
                          d->B * d->Hkv * d->Lk * d->Dv};
    memcpy(f->n, n, sizeof n);
  }
  f->d.prefix_lens = attn_st_get(f->g, "prefix_lens")->data;
  f->q = golden_f32(f->g, "q"), f->k = golden_f32(f->g, "k"), f->v = golden_f32(f->g, "v");
  f->dout = golden_f32(f->g, "dout");
  return 1;
}

/* out, lse, dq, dk, dv of one call through the entry (a: dtype, path, q, k, v). */
static attn_status run(const plm_file *f, const attn_sdpa_desc *d, attn_sdpa_args a, float *x[5]) {
  a.varlen = f->varlen ? &f->vl : NULL;
  a.out = x[0], a.lse = x[1], a.dout = f->dout, a.dq = x[2], a.dk = x[3], a.dv = x[4];
  attn_status st = attn_sdpa_forward(d, &a);
  if (st || a.dtype == ATTN_I8) return st;
  return attn_sdpa_backward(d, &a);
}

static void alloc5(const plm_file *f, float *x[5]) {
  for (int i = 0; i < 5; i++)
    x[i] = sdpa_zeros(f->n[i]);
}
static void free5(float *x[5]) {
  for (int i = 0; i < 5; i++)
    free(x[i]);
}

/* The varlen file's lse is [Hq, total_q]; the kernels give each sequence's
 * [Hq, len] block at Hq * cu_seqlens_q[s]. */
static void lse_to_file_layout(const plm_file *f, const float *lse, float *out) {
  const int32_t *cq = f->vl.cu_seqlens_q;
  const int64_t Hq = f->d.Hq, tq = f->vl.total_q;
  for (int64_t s = 0; s < f->d.B; s++) {
    const int64_t len = cq[s + 1] - cq[s];
    for (int64_t h = 0; h < Hq; h++)
      for (int64_t i = 0; i < len; i++)
        out[h * tq + cq[s] + i] = lse[Hq * cq[s] + h * len + i];
  }
}

static const char *const NAMES[5] = {"out", "lse", "dq", "dk", "dv"};

static void golden_case(const char *name) {
  plm_file f;
  if (!plm_load(name, &f)) return;
  const attn_flash_ops *sets[2] = {attn_flash_ops_generic(), attn_kern_get()->flash};
  for (int r = 0; r < 4; r++) { /* math, flash (entry), portable set, the level's set */
    if (r == 3 && sets[1] == sets[0]) continue;
    if (r >= 2 && f.varlen) continue; /* the kernel sets directly: dense only */
    float *x[5];
    alloc5(&f, x);
    if (r < 2) {
      CHECK_OK(run(&f, &f.d,
                   (attn_sdpa_args){
                       .path = r ? ATTN_PATH_FLASH : ATTN_PATH_MATH, .q = f.q, .k = f.k, .v = f.v},
                   x));
    } else {
      const attn_flash_ops *ops = sets[r - 2];
      CHECK_OK(attn_sdpa_forward_flash_ops(ops, &f.d, f.q, f.k, f.v, x[0], x[1]));
      CHECK_OK(attn_sdpa_backward_flash_ops(ops, &f.d, f.q, f.k, f.v, x[0], x[1], f.dout, x[2],
                                            x[3], x[4]));
    }
    if (f.varlen) {
      float *l = sdpa_zeros(f.n[1]);
      lse_to_file_layout(&f, x[1], l);
      free(x[1]);
      x[1] = l;
    }
    int before = h_case_failed;
    h_case_failed = 0;
    for (int i = 0; i < 5; i++)
      CHECK_CLOSE(NAMES[i], x[i], golden_f32(f.g, NAMES[i]), f.n[i], 1e-5, 1e-4);
    if (h_case_failed)
      printf("  ^ plm_%s, %s\n", name, r == 0 ? "math" : r == 1 ? "flash" : sets[r - 2]->name);
    h_case_failed |= before;
    free5(x);
  }
  attn_st_free(f.g);
}

static void test_golden_dense(void) {
  golden_case("basic");
  golden_case("long");
  golden_case("combined");
}

static void test_golden_varlen(void) { golden_case("varlen"); }

/* The prefix matters: without it the same call differs by more than any
 * tolerance above. */
static void test_prefix_changes_the_answer(void) {
  plm_file f;
  if (!plm_load("long", &f)) return;
  float *x[5], *y[5];
  alloc5(&f, x), alloc5(&f, y);
  attn_sdpa_desc plain = f.d;
  plain.prefix_lens = NULL;
  const attn_sdpa_args a = {.path = ATTN_PATH_FLASH, .q = f.q, .k = f.k, .v = f.v};
  CHECK_OK(run(&f, &f.d, a, x));
  CHECK_OK(run(&f, &plain, a, y));
  double m = 0;
  for (int64_t i = 0; i < f.n[0]; i++)
    if (fabs((double)x[0][i] - y[0][i]) > m) m = fabs((double)x[0][i] - y[0][i]);
  CHECK(m > 0.05);
  free5(x), free5(y);
  attn_st_free(f.g);
}

static void round16(float *x, uint16_t *h, int64_t n, int bf16) {
  for (int64_t i = 0; i < n; i++) {
    h[i] = bf16 ? attn_f32_to_bf16(x[i]) : attn_f32_to_f16(x[i]);
    x[i] = bf16 ? attn_bf16_to_f32(h[i]) : attn_f16_to_f32(h[i]);
  }
}

/* bf16 / fp16 on every path here against the widened math reference; int8
 * forward on every path against the f32 math path. */
static void lowp_case(const char *name) {
  plm_file f;
  if (!plm_load(name, &f)) return;
  const int64_t nq = f.n[2], nk = f.n[3], nv = f.n[4];
  static const attn_sdpa_path paths[] = {ATTN_PATH_AUTO, ATTN_PATH_PORTABLE, ATTN_PATH_SIMD,
                                         ATTN_PATH_AMX, ATTN_PATH_F32};
  for (int bf16 = 1; bf16 >= 0; bf16--) {
    float *q = malloc(nq * 4), *k = malloc(nk * 4), *v = malloc(nv * 4);
    uint16_t *qh = malloc(nq * 2), *kh = malloc(nk * 2), *vh = malloc(nv * 2);
    memcpy(q, f.q, nq * 4), memcpy(k, f.k, nk * 4), memcpy(v, f.v, nv * 4);
    round16(q, qh, nq, bf16), round16(k, kh, nk, bf16), round16(v, vh, nv, bf16);
    float *ref[5], *ref32[5];
    alloc5(&f, ref), alloc5(&f, ref32);
    const int dt = bf16 ? ATTN_BF16 : ATTN_F16;
    CHECK_OK(run(&f, &f.d,
                 (attn_sdpa_args){.dtype = dt, .path = ATTN_PATH_MATH, .q = qh, .k = kh, .v = vh},
                 ref));
    /* the widened reference is the f32 math path on the rounded values, exactly */
    CHECK_OK(
        run(&f, &f.d, (attn_sdpa_args){.path = ATTN_PATH_MATH, .q = q, .k = k, .v = v}, ref32));
    for (int i = 0; i < 5; i++)
      CHECK_CLOSE(NAMES[i], ref[i], ref32[i], f.n[i], 0, 0);
    for (unsigned p = 0; p < sizeof paths / sizeof paths[0]; p++) {
      if (!attn_sdpa_path_available(dt, paths[p])) continue;
      float *x[5];
      alloc5(&f, x);
      const attn_status st = run(
          &f, &f.d, (attn_sdpa_args){.dtype = dt, .path = paths[p], .q = qh, .k = kh, .v = vh}, x);
      CHECK_OK(st);
      int before = h_case_failed;
      h_case_failed = 0;
      const double vmax = fmax(1.0, sdpa_max_abs(v, nv)); /* the bounds are for |v| <= 1 */
      CHECK_CLOSE("out", x[0], ref[0], f.n[0], (bf16 ? 2.5e-3 : 1e-3) * vmax, 0);
      CHECK_CLOSE("lse", x[1], ref[1], f.n[1], 2e-5, 2e-5);
      for (int i = 2; i < 5; i++)
        CHECK_CLOSE(NAMES[i], x[i], ref[i], f.n[i], 1e-4 + sdpa_max_abs(ref[i], f.n[i]) / 128, 0);
      if (h_case_failed)
        printf("  ^ plm_%s %s path %s\n", name, bf16 ? "bf16" : "fp16",
               attn_sdpa_path_name(paths[p]));
      h_case_failed |= before;
      free5(x);
    }
    free5(ref), free5(ref32);
    free(q), free(k), free(v), free(qh), free(kh), free(vh);
  }
  /* int8: f32 q, k, v quantized per call */
  float *ref[5];
  alloc5(&f, ref);
  CHECK_OK(attn_sdpa_forward(&f.d, &(attn_sdpa_args){.path = ATTN_PATH_MATH,
                                                     .varlen = f.varlen ? &f.vl : NULL,
                                                     .q = f.q,
                                                     .k = f.k,
                                                     .v = f.v,
                                                     .out = ref[0],
                                                     .lse = ref[1]}));
  for (unsigned p = 0; p < 4; p++) {
    if (!attn_sdpa_path_available(ATTN_I8, paths[p])) continue;
    float *x[5];
    alloc5(&f, x);
    CHECK_OK(run(&f, &f.d,
                 (attn_sdpa_args){.dtype = ATTN_I8, .path = paths[p], .q = f.q, .k = f.k, .v = f.v},
                 x));
    CHECK_CLOSE("i8 out", x[0], ref[0], f.n[0], 3e-2, 1e-2);
    CHECK_CLOSE("i8 lse", x[1], ref[1], f.n[1], 5e-2, 1e-2);
    free5(x);
  }
  free5(ref);
  attn_st_free(f.g);
}

static void test_low_precision(void) {
  lowp_case("basic");
  lowp_case("long");
  lowp_case("combined");
  lowp_case("varlen");
}

static void test_threads_same_bits(void) {
  plm_file f;
  if (!plm_load("long", &f)) return;
  float *x[5], *y[5];
  alloc5(&f, x), alloc5(&f, y);
  const attn_sdpa_args a = {.path = ATTN_PATH_FLASH, .q = f.q, .k = f.k, .v = f.v};
  attn_set_num_threads(1);
  CHECK_OK(run(&f, &f.d, a, x));
  attn_set_num_threads(3);
  CHECK_OK(run(&f, &f.d, a, y));
  attn_set_num_threads(1);
  for (int i = 0; i < 5; i++)
    CHECK(memcmp(x[i], y[i], (size_t)f.n[i] * 4) == 0);
  free5(x), free5(y);
  attn_st_free(f.g);
}

/* A refusal: status st and a message naming `word`. */
#define CHECK_REFUSED(expr, st, word)                                                              \
  do {                                                                                             \
    CHECK_ERR(expr, st);                                                                           \
    if (!strstr(attn_last_error(), word)) {                                                        \
      printf("  message '%s' does not name '%s'\n", attn_last_error(), word);                      \
      CHECK(0);                                                                                    \
    }                                                                                              \
  } while (0)

static void test_bad_input(void) {
  plm_file f;
  if (!plm_load("basic", &f)) return;
  float *x[5];
  alloc5(&f, x);
  attn_sdpa_args a = {.q = f.q,
                      .k = f.k,
                      .v = f.v,
                      .out = x[0],
                      .lse = x[1],
                      .dout = f.dout,
                      .dq = x[2],
                      .dk = x[3],
                      .dv = x[4]};
  attn_sdpa_desc d = f.d;
  d.causal = 0;
  for (int p = 0; p < 3; p++) {
    a.path = (attn_sdpa_path)p;
    CHECK_REFUSED(attn_sdpa_forward(&d, &a), ATTN_EINVAL, "prefix_lens");
    CHECK_REFUSED(attn_sdpa_backward(&d, &a), ATTN_EINVAL, "prefix_lens");
  }
  int32_t bad[2][2] = {{13, 0}, {3, -1}}; /* Lk = 12 */
  for (int i = 0; i < 2; i++) {
    d = f.d;
    d.prefix_lens = bad[i];
    CHECK_REFUSED(attn_sdpa_forward(&d, &a), ATTN_EINVAL, "prefix_lens");
  }
  a.path = ATTN_PATH_AUTO;
  a.dtype = ATTN_I8;
  CHECK_REFUSED(attn_sdpa_backward(&f.d, &a), ATTN_EUNSUPPORTED, "int8");
  a.path = ATTN_PATH_MATH;
  CHECK_REFUSED(attn_sdpa_forward(&f.d, &a), ATTN_EUNSUPPORTED, "int8");
  a.dtype = ATTN_F32;
  a.path = ATTN_PATH_AMX;
  CHECK_REFUSED(attn_sdpa_forward(&f.d, &a), ATTN_EINVAL, "amx");
  a.dtype = ATTN_F16; /* fp16 has no AMX or f32 path: refused by name, not by number */
  CHECK_REFUSED(attn_sdpa_forward(&f.d, &a), ATTN_EUNSUPPORTED, "'amx'");
  a.dtype = ATTN_F32;
  a.path = (attn_sdpa_path)42;
  CHECK_REFUSED(attn_sdpa_forward(&f.d, &a), ATTN_EINVAL, "path");
  a.path = ATTN_PATH_AUTO;
  a.dtype = ATTN_I64;
  CHECK_REFUSED(attn_sdpa_forward(&f.d, &a), ATTN_EINVAL, "dtype");
  a.dtype = ATTN_F32;
  float *probs = sdpa_zeros(f.d.B * f.d.Hq * f.d.Lq * f.d.Lk);
  a.probs = probs;
  a.path = ATTN_PATH_FLASH;
  CHECK_REFUSED(attn_sdpa_forward(&f.d, &a), ATTN_EUNSUPPORTED, "probs");
  a.path = ATTN_PATH_AUTO; /* auto with probs: the math path, prefix-LM included */
  CHECK_OK(attn_sdpa_forward(&f.d, &a));
  CHECK_CLOSE("out", x[0], golden_f32(f.g, "out"), f.n[0], 1e-5, 1e-4);
  CHECK_REFUSED(attn_sdpa_forward(NULL, &a), ATTN_EINVAL, "descriptor");
  CHECK_REFUSED(attn_sdpa_forward(&f.d, NULL), ATTN_EINVAL, "args");
  free(probs);
  free5(x);
  attn_st_free(f.g);
  /* varlen: a prefix longer than its sequence's keys */
  if (!plm_load("varlen", &f)) return;
  alloc5(&f, x);
  int32_t pl[4];
  memcpy(pl, f.d.prefix_lens, sizeof pl);
  pl[1] = 4; /* sequence 1 has 3 keys */
  d = f.d;
  d.prefix_lens = pl;
  a = (attn_sdpa_args){.varlen = &f.vl, .q = f.q, .k = f.k, .v = f.v, .out = x[0], .lse = x[1]};
  CHECK_REFUSED(attn_sdpa_forward(&d, &a), ATTN_EINVAL, "prefix_lens");
  d = f.d;
  d.causal = 0;
  CHECK_REFUSED(attn_sdpa_forward(&d, &a), ATTN_EINVAL, "prefix_lens");
  free5(x);
  attn_st_free(f.g);
}

int main(void) {
  attn_set_num_threads(1);
  printf("# level %s\n", attn_isa_name(attn_isa_active()));
  RUN(test_golden_dense);
  RUN(test_golden_varlen);
  RUN(test_prefix_changes_the_answer);
  RUN(test_low_precision);
  RUN(test_threads_same_bits);
  RUN(test_bad_input);
  HARNESS_END();
}
