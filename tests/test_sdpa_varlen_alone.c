/* The f32 packed variable-length backward (attn/sdpa_varlen.h) on the
 * flash and auto backends runs each sequence on head-major scratch
 * (src/kernels/sdpa/sdpa_varlen_dense.c): its dq, dk, dv (and sink gradients,
 * summed in sequence order) are bit for bit those of each sequence run
 * alone on its packed rows, at 1 and 3 threads, for mixed lengths with
 * empty sequences (no queries, no keys), GQA, Dv != D, under no mask,
 * causal, a two-sided window, explicit q_offsets, sinks + softcap, and
 * row strides other than the packed ones. */
#include <stdint.h>
#include <string.h>

#include "attn/sdpa_varlen.h"
#include "harness.h"

enum { NS = 6, HQ = 4, HKV = 2, D = 16, DV = 24 };
static const int32_t lens_q[NS] = {70, 0, 33, 5, 130, 1}, lens_k[NS] = {70, 12, 0, 40, 130, 9};

static float *falloc(int64_t n) { return calloc((size_t)n + 1, sizeof(float)); }

static int same_bits(const float *a, const float *b, int64_t n) {
  return n == 0 || !memcmp(a, b, (size_t)n * sizeof(float));
}

/* config: 0 none, 1 causal, 2 window (10, 5), 3 causal with q_offsets,
 * 4 sinks + softcap (causal), 5 causal with padded q / out rows */
static void run_config(attn_backend be, int config, int threads) {
  int32_t cq[NS + 1] = {0}, ck[NS + 1] = {0};
  for (int s = 0; s < NS; s++)
    cq[s + 1] = cq[s] + lens_q[s], ck[s + 1] = ck[s] + lens_k[s];
  const int64_t tq = cq[NS], tk = ck[NS];
  const int64_t rq = HQ * D + (config == 5 ? 3 : 0), ro = HQ * DV + (config == 5 ? 5 : 0);
  attn_sdpa_desc d;
  attn_sdpa_desc_init(&d, NS, HQ, HKV, 130, 130, D, DV);
  d.causal = config == 1 || config >= 3;
  if (config == 2) d.window_left = 10, d.window_right = 5;
  int64_t offs[NS] = {-10, 3, 0, 40, -60, 2};
  if (config == 3) d.q_offsets = offs;
  float sinks[HQ], dsinks[HQ], ds[HQ], ds_sum[HQ] = {0};
  if (config == 4) {
    for (int h = 0; h < HQ; h++)
      sinks[h] = 0.5f * (float)h - 0.7f;
    d.sinks = sinks, d.sinks_grad = dsinks, d.softcap = 2.5f;
  }
  const int64_t sq[3] = {0, D, rq}, so[3] = {0, DV, ro}, sk[3] = {0, D, HKV * D},
                sv[3] = {0, DV, HKV * DV};
  memcpy(d.q_stride, sq, sizeof sq), memcpy(d.o_stride, so, sizeof so);
  memcpy(d.k_stride, sk, sizeof sk), memcpy(d.v_stride, sv, sizeof sv);
  const attn_sdpa_varlen vl = {cq, ck, tq, tk};
  float *q = falloc(tq * rq), *k = falloc(tk * HKV * D), *v = falloc(tk * HKV * DV);
  float *go = falloc(tq * ro), *o = falloc(tq * ro), *l = falloc(tq * HQ);
  float *dq = falloc(tq * rq), *dk = falloc(tk * HKV * D), *dv = falloc(tk * HKV * DV);
  fill_uniform(q, tq * rq, 31, -1, 1);
  fill_uniform(k, tk * HKV * D, 32, -1, 1);
  fill_uniform(v, tk * HKV * DV, 33, -1, 1);
  fill_uniform(go, tq * ro, 34, -1, 1);
  attn_set_num_threads(threads);
  CHECK_OK(attn_sdpa_varlen_forward(&d, &vl, be, q, k, v, o, l));
  CHECK_OK(attn_sdpa_varlen_backward(&d, &vl, be, q, k, v, o, l, go, dq, dk, dv));
  int ok = 1;
  for (int s = 0; s < NS; s++) { /* sequence s alone: B = 1 on its packed rows */
    attn_sdpa_desc x = d;
    x.B = 1, x.Lq = lens_q[s], x.Lk = lens_k[s];
    x.q_offsets = NULL;
    x.q_offset = config == 3 ? offs[s] : x.Lk - x.Lq;
    x.sinks_grad = config == 4 ? ds : NULL;
    const int64_t q0 = cq[s], k0 = ck[s], nq = lens_q[s], nk = lens_k[s];
    float *aq = falloc(nq * rq), *ak = falloc(nk * HKV * D), *av = falloc(nk * HKV * DV);
    CHECK_OK(attn_sdpa_backward_f32(&x, be, q + q0 * rq, k + k0 * HKV * D, v + k0 * HKV * DV,
                                    o + q0 * ro, l + q0 * HQ, go + q0 * ro, aq, ak, av));
    for (int64_t i = 0; i < nq; i++)
      for (int64_t h = 0; h < HQ; h++)
        ok &= same_bits(dq + (q0 + i) * rq + h * D, aq + i * rq + h * D, D);
    ok &= same_bits(dk + k0 * HKV * D, ak, nk * HKV * D);
    ok &= same_bits(dv + k0 * HKV * DV, av, nk * HKV * DV);
    for (int h = 0; config == 4 && h < HQ; h++)
      ds_sum[h] += ds[h];
    free(aq), free(ak), free(av);
  }
  if (config == 4) ok &= same_bits(dsinks, ds_sum, HQ);
  CHECK(ok);
  if (!ok)
    printf("  %s config %d, %d threads: not bit for bit each sequence alone\n",
           attn_backend_name(be), config, threads);
  attn_set_num_threads(0);
  free(q), free(k), free(v), free(go), free(o), free(l), free(dq), free(dk), free(dv);
}

static void run_backend(attn_backend be) {
  for (int config = 0; config < 6; config++)
    for (int t = 1; t <= 3; t += 2)
      run_config(be, config, t);
}

static void test_flash_alone(void) { run_backend(ATTN_BACKEND_FLASH); }
static void test_auto_alone(void) { run_backend(ATTN_BACKEND_AUTO); }

int main(void) {
  RUN(test_flash_alone);
  RUN(test_auto_alone);
  HARNESS_END();
}
