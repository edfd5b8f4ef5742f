/* The flash backend on strided q, k, v, out, dout gives the same bits as on
 * contiguous heads: the tile loops read strided operands through dense
 * copies (sdpa_flash_layout.c: the forward's q rows per item and v per key
 * block, the backward's q and dout per call, k per key block, chunk 0's dq
 * in dense rows), which must change no value and write nothing outside the
 * views. Layouts: [B, L, H, D] exactly (rows 64-byte aligned, 2 KB apart
 * as in a d_model 512 layer), padded rows (unaligned), and q/k/v as views
 * of one [B, L, 3, H, D] projection; with whole tiles (the fused forward),
 * key chunks (partial dq buffers), causal and grouped heads. */
#include <stdint.h>

#include "harness.h"
#include "strided_layout.h"

typedef struct {
  int64_t B, Hq, Hkv, Lq, Lk, D, Dv;
  int causal;
} shape;

typedef struct {
  int64_t pitch_extra; /* floats after each head's D (0: exactly [B, L, H, D]) */
  int64_t slots;       /* heads' rows interleaved with slots - 1 other tensors' (3: qkv) */
} layout;

static float *falloc(int64_t n) { return malloc(sizeof(float) * (size_t)(n > 0 ? n : 1)); }

static float *random_floats(int64_t n, unsigned seed) {
  float *x = falloc(n);
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    x[i] = (float)((seed >> 8) & 0xFFFF) / 32768.0f - 1.0f;
  }
  return x;
}

static float *to_layout(const float *x, int64_t B, int64_t H, int64_t L, int64_t n, layout lay,
                        int64_t st[3], int64_t *total) {
  return layout_scatter(x, B, H, L, n, lay.pitch_extra, lay.slots, st, total);
}

static void check_same(const char *what, const float *a, const float *b, int64_t n) {
  int same = memcmp(a, b, sizeof(float) * (size_t)n) == 0;
  if (!same) printf("  %s differs from the contiguous run\n", what);
  CHECK(same);
}

static void run_case(shape s, layout lay, unsigned seed) {
  /* ATTN_TEST_SAMPLE (tests/harness.h): each test's first layout always */
  if (seed % 10 != 0 && !h_sample()) return;
  const int64_t nq = s.B * s.Hq * s.Lq * s.D, nk = s.B * s.Hkv * s.Lk * s.D;
  const int64_t nv = s.B * s.Hkv * s.Lk * s.Dv, no = s.B * s.Hq * s.Lq * s.Dv;
  const int64_t nl = s.B * s.Hq * s.Lq;
  float *q = random_floats(nq, seed), *k = random_floats(nk, seed + 1);
  float *v = random_floats(nv, seed + 2), *dout = random_floats(no, seed + 3);
  float *out = falloc(no), *lse = falloc(nl), *dq = falloc(nq), *dk = falloc(nk), *dv = falloc(nv);
  attn_sdpa_desc d;
  attn_sdpa_desc_init(&d, s.B, s.Hq, s.Hkv, s.Lq, s.Lk, s.D, s.Dv);
  d.causal = s.causal;
  CHECK_OK(attn_sdpa_forward_f32(&d, ATTN_BACKEND_FLASH, q, k, v, out, lse, NULL));
  CHECK_OK(attn_sdpa_backward_f32(&d, ATTN_BACKEND_FLASH, q, k, v, out, lse, dout, dq, dk, dv));

  attn_sdpa_desc e = d;
  int64_t tq, tk, tv, to;
  float *sq = to_layout(q, s.B, s.Hq, s.Lq, s.D, lay, e.q_stride, &tq);
  float *sk = to_layout(k, s.B, s.Hkv, s.Lk, s.D, lay, e.k_stride, &tk);
  float *sv = to_layout(v, s.B, s.Hkv, s.Lk, s.Dv, lay, e.v_stride, &tv);
  float *sdo = to_layout(dout, s.B, s.Hq, s.Lq, s.Dv, lay, e.o_stride, &to);
  float *so = to_layout(NULL, s.B, s.Hq, s.Lq, s.Dv, lay, e.o_stride, &to);
  float *sdq = to_layout(NULL, s.B, s.Hq, s.Lq, s.D, lay, e.q_stride, &tq);
  float *sdk = to_layout(NULL, s.B, s.Hkv, s.Lk, s.D, lay, e.k_stride, &tk);
  float *sdv = to_layout(NULL, s.B, s.Hkv, s.Lk, s.Dv, lay, e.v_stride, &tv);
  float *lse2 = falloc(nl), *back = falloc(nq + nk + nv + no);
  CHECK_OK(attn_sdpa_forward_f32(&e, ATTN_BACKEND_FLASH, sq, sk, sv, so, lse2, NULL));
  CHECK_OK(
      attn_sdpa_backward_f32(&e, ATTN_BACKEND_FLASH, sq, sk, sv, so, lse2, sdo, sdq, sdk, sdv));
  CHECK(layout_gather(so, back, s.B, s.Hq, s.Lq, s.Dv, e.o_stride, to));
  check_same("out", back, out, no);
  check_same("lse", lse2, lse, nl);
  CHECK(layout_gather(sdq, back, s.B, s.Hq, s.Lq, s.D, e.q_stride, tq));
  check_same("dq", back, dq, nq);
  CHECK(layout_gather(sdk, back, s.B, s.Hkv, s.Lk, s.D, e.k_stride, tk));
  check_same("dk", back, dk, nk);
  CHECK(layout_gather(sdv, back, s.B, s.Hkv, s.Lk, s.Dv, e.v_stride, tv));
  check_same("dv", back, dv, nv);
  /* the inputs are read only */
  CHECK(layout_gather(sq, back, s.B, s.Hq, s.Lq, s.D, e.q_stride, tq));
  check_same("q after the calls", back, q, nq);
  CHECK(layout_gather(sdo, back, s.B, s.Hq, s.Lq, s.Dv, e.o_stride, to));
  check_same("dout after the calls", back, dout, no);
  free(q), free(k), free(v), free(dout), free(out), free(lse), free(dq), free(dk), free(dv);
  free(sq), free(sk), free(sv), free(sdo), free(so), free(sdq), free(sdk), free(sdv);
  free(lse2), free(back);
}

static const layout LAYOUTS[] = {{0, 1}, {3, 1}, {0, 3}};

/* whole 64-key tiles for every row group (the fused forward), 4 key blocks
 * for 2 (b, head) items: the backward splits keys into chunks */
static void test_whole_tiles_and_key_chunks(void) {
  shape s = {1, 2, 2, 200, 256, 64, 64, 0};
  for (int i = 0; i < 3; i++) run_case(s, LAYOUTS[i], 10u + (unsigned)i);
}

static void test_causal_grouped_heads(void) {
  shape s = {2, 4, 2, 150, 130, 40, 24, 1};
  for (int i = 0; i < 3; i++) run_case(s, LAYOUTS[i], 20u + (unsigned)i);
}

/* many (b, head) items: one key chunk each (dq in dense rows, copied out) */
static void test_one_chunk_per_item(void) {
  shape s = {3, 4, 4, 70, 90, 64, 64, 0};
  for (int i = 0; i < 3; i++) run_case(s, LAYOUTS[i], 30u + (unsigned)i);
}

/* strided equals contiguous with 2 threads and with 1 */
static void test_thread_counts(void) {
  shape s = {1, 2, 1, 100, 200, 64, 64, 1};
  attn_set_num_threads(2);
  run_case(s, LAYOUTS[0], 40u);
  attn_set_num_threads(1);
  run_case(s, LAYOUTS[2], 41u);
  attn_set_num_threads(0);
}

int main(void) {
  RUN(test_whole_tiles_and_key_chunks);
  RUN(test_causal_grouped_heads);
  RUN(test_one_chunk_per_item);
  RUN(test_thread_counts);
  HARNESS_END();
}
