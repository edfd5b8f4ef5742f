/* The SDPA golden files read into a descriptor: tests/golden/sdpa_*
 * (tools/golden_sdpa.py: test_sdpa.c, test_flash.c) and var_sdpa_*
 * (tools/golden_variants.py: test_variants.c, test_flash_variants.c), whose
 * q and k may carry RoPE (applied here to copies, and undone on dq, dk). The
 * descriptor points into the file's tensors. */
#ifndef ATTN_TEST_SDPA_GOLDEN_H
#define ATTN_TEST_SDPA_GOLDEN_H

#include <stdint.h>

#include "harness.h"

/* the f32 data of tensor name, or NULL */
static inline const float *golden_f32(const attn_st *g, const char *name) {
  const attn_tensor *t = attn_st_get(g, name);
  return t ? (const float *)t->data : NULL;
}

static inline int64_t golden_meta_int(const attn_st *g, const char *key, int64_t dflt) {
  const char *s = attn_st_meta(g, key);
  return s ? strtoll(s, NULL, 10) : dflt;
}

/* strides of a mask of shape m broadcast (numpy rules) to [B, Hq, Lq, Lk];
 * 0 if it does not broadcast */
static inline int golden_mask_strides(const attn_tensor *m, const int64_t full[4], int64_t st[4]) {
  if (m->ndim > 4) return 0;
  int64_t inner = 1;
  for (int a = 3; a >= 0; a--) {
    int sd = a - (4 - m->ndim);
    st[a] = 0;
    if (sd < 0) continue;
    if (m->shape[sd] != 1 && m->shape[sd] != full[a]) return 0;
    if (m->shape[sd] != 1) st[a] = inner;
    inner *= m->shape[sd];
  }
  return 1;
}

/* An sdpa_* file (q, k, v present, 4-d): shapes, causal, window, scale,
 * key_lens, and the bool or additive mask (checked to broadcast). */
static inline void golden_sdpa_desc(const attn_st *g, attn_sdpa_desc *d) {
  const attn_tensor *q = attn_st_get(g, "q"), *k = attn_st_get(g, "k"), *v = attn_st_get(g, "v");
  attn_sdpa_desc_init(d, q->shape[0], q->shape[1], k->shape[1], q->shape[2], k->shape[2],
                      q->shape[3], v->shape[3]);
  const char *m;
  if ((m = attn_st_meta(g, "causal"))) d->causal = atoi(m);
  if ((m = attn_st_meta(g, "window_left"))) d->window_left = atoll(m);
  if ((m = attn_st_meta(g, "window_right"))) d->window_right = atoll(m);
  if ((m = attn_st_meta(g, "scale"))) d->has_scale = 1, d->scale = strtof(m, NULL);
  const attn_tensor *kl = attn_st_get(g, "key_lens"), *mask = attn_st_get(g, "mask");
  if (kl) d->key_lens = kl->data;
  if (mask) {
    const int64_t full[4] = {d->B, d->Hq, d->Lq, d->Lk};
    if (mask->dtype == ATTN_BOOL) {
      d->bool_mask = mask->data;
      CHECK(golden_mask_strides(mask, full, d->bool_mask_stride));
    } else {
      d->add_mask = mask->data;
      CHECK(golden_mask_strides(mask, full, d->add_mask_stride));
    }
  }
}

/* A var_sdpa_* file: shapes, causal, window, q_offset, scale and the
 * position tables (ALiBi slopes, T5 bias, Shaw tables, block layout). */
static inline void golden_var_desc(const attn_st *g, attn_sdpa_desc *d) {
  const attn_tensor *q = attn_st_get(g, "q"), *k = attn_st_get(g, "k"), *v = attn_st_get(g, "v");
  attn_sdpa_desc_init(d, q->shape[0], q->shape[1], k->shape[1], q->shape[2], k->shape[2],
                      q->shape[3], v->shape[3]);
  d->causal = (int)golden_meta_int(g, "causal", 0);
  d->window_left = golden_meta_int(g, "window_left", -1);
  d->window_right = golden_meta_int(g, "window_right", -1);
  d->q_offset = golden_meta_int(g, "q_offset", 0);
  if (attn_st_meta(g, "scale")) {
    d->has_scale = 1;
    d->scale = strtof(attn_st_meta(g, "scale"), NULL);
  }
  d->alibi_slopes = golden_f32(g, "alibi_slopes");
  const attn_tensor *rb = attn_st_get(g, "rel_bias");
  if (rb) {
    d->rel_bias = rb->data;
    d->rel_buckets = rb->shape[1];
    d->rel_max_distance = golden_meta_int(g, "rel_max_distance", 0);
    d->rel_bidirectional = (int)golden_meta_int(g, "rel_bidirectional", 0);
  }
  const attn_tensor *sk = attn_st_get(g, "shaw_k"), *sv = attn_st_get(g, "shaw_v");
  d->shaw_k = sk ? sk->data : NULL;
  d->shaw_v = sv ? sv->data : NULL;
  if (sk || sv) d->shaw_max = ((sk ? sk : sv)->shape[0] + 1) / 2;
  const attn_tensor *bm = attn_st_get(g, "block_mask");
  if (bm) {
    d->block_mask = bm->data;
    d->block_size = golden_meta_int(g, "block_size", 0);
  }
}

/* RoPE of a var_sdpa_* file (meta "rope", "rope_theta", "rope_dim"), if any */
typedef struct {
  int on;
  attn_rope_layout lay;
  float theta;
  int64_t dim; /* rotated dims of a head (partial rotary) */
} golden_rope;

/* Copies of the file's q and k (malloc'd, [B, H, L, D] contiguous) with its
 * RoPE applied (queries at positions from d->q_offset). */
static inline void golden_var_qk(const attn_st *g, const attn_sdpa_desc *d, float **q, float **k,
                                 golden_rope *r) {
  const int64_t nq = d->B * d->Hq * d->Lq * d->D, nk = d->B * d->Hkv * d->Lk * d->D;
  *q = malloc(nq * sizeof(float));
  *k = malloc(nk * sizeof(float));
  memcpy(*q, golden_f32(g, "q"), nq * sizeof(float));
  memcpy(*k, golden_f32(g, "k"), nk * sizeof(float));
  const char *rope = attn_st_meta(g, "rope");
  r->on = rope != NULL;
  r->lay = ATTN_ROPE_HALF;
  r->theta = 10000.0f;
  if (rope) {
    CHECK_OK(attn_rope_layout_from_name(rope, &r->lay));
    r->theta = strtof(attn_st_meta(g, "rope_theta"), NULL);
    const char *rd = attn_st_meta(g, "rope_dim");
    r->dim = rd ? strtoll(rd, NULL, 10) : d->D;
    CHECK_OK(attn_rope_partial_f32(*q, *q, d->B * d->Hq, d->Lq, 1, d->D, r->dim, r->theta,
                                   d->q_offset, r->lay));
    CHECK_OK(attn_rope_partial_f32(*k, *k, d->B * d->Hkv, d->Lk, 1, d->D, r->dim, r->theta, 0,
                                   r->lay));
  }
}

/* dq, dk through the RoPE's backward (gradients of the file's q and k) */
static inline void golden_rope_backward(const golden_rope *r, const attn_sdpa_desc *d, float *dq,
                                        float *dk) {
  if (!r->on) return;
  CHECK_OK(attn_rope_partial_backward_f32(dq, dq, d->B * d->Hq, d->Lq, 1, d->D, r->dim, r->theta,
                                          d->q_offset, r->lay));
  CHECK_OK(attn_rope_partial_backward_f32(dk, dk, d->B * d->Hkv, d->Lk, 1, d->D, r->dim, r->theta,
                                          0, r->lay));
}

#endif
