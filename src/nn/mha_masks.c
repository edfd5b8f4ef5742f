/* MHA masks: PyTorch's key_padding_mask [B, Lk] and attn_mask [Lq, Lk] or
 * [B*H, Lq, Lk] (bool: nonzero = NOT allowed; float: added) combined into one
 * SDPA mask [B, Hm, Lq, Lk] (Hm = H for a per-head attn_mask, else 1): a
 * "may attend" byte mask when both are bool, else an additive float mask
 * with -inf where a bool says not allowed. A bool key-padding mask alone that
 * is right padding in every row becomes SDPA key_lens instead (no mask). */
#include <math.h>
#include <stdint.h>

#include "nn/nn_internal.h"

/* key_lens[b] = the start of row b's padding when every row of the bool
 * key-padding mask [B, Lk] is 0 then 1 (right padding); 0 otherwise. */
static int right_padding_lens(const uint8_t *kpm, int64_t B, int64_t Lk, int32_t *key_lens) {
  if (Lk > INT32_MAX) return 0;
  for (int64_t b = 0; b < B; b++) {
    const uint8_t *row = kpm + b * Lk;
    int64_t n = 0;
    while (n < Lk && !row[n]) n++;
    for (int64_t j = n; j < Lk; j++)
      if (!row[j]) return 0;
    if (key_lens) key_lens[b] = (int32_t)n;
  }
  return 1;
}

attn_status attn_nn_mha_build_masks(const attn_mha *m, const attn_mha_masks *mk, attn_mha_saved *s) {
  s->mask_add = NULL;
  s->mask_allow = NULL;
  s->key_lens = NULL;
  s->mask_heads = 1;
  s->causal = mk ? mk->causal : 0;
  if (!mk) return ATTN_OK;
  if (mk->key_padding_bool && mk->key_padding_float)
    return attn_set_error(ATTN_EINVAL, "mha: key_padding_mask given both as bool and float");
  if (mk->attn_bool && mk->attn_float)
    return attn_set_error(ATTN_EINVAL, "mha: attn_mask given both as bool and float");
  int has_kpm = mk->key_padding_bool || mk->key_padding_float;
  int has_am = mk->attn_bool || mk->attn_float;
  if (!has_kpm && !has_am) return ATTN_OK;
  int64_t B = s->B, Lq = s->Lq, Lk = s->Lk, H = m->c.num_heads;
  // right padding only: key lengths let flash skip whole padded tiles (same result)
  if (!has_am && mk->key_padding_bool && right_padding_lens(mk->key_padding_bool, B, Lk, NULL)) {
    s->key_lens = (int32_t *)attn_nn_alloc(&s->arena, B, sizeof(int32_t));
    if (!s->key_lens) return ATTN_ENOMEM;
    right_padding_lens(mk->key_padding_bool, B, Lk, s->key_lens);
    return ATTN_OK;
  }
  int64_t Hm = has_am && mk->attn_per_head ? H : 1;
  int64_t n = B * Hm * Lq * Lk;
  int use_float = mk->key_padding_float || mk->attn_float;
  if (use_float) {
    s->mask_add = NN_ALLOC_F(&s->arena, n);
    if (!s->mask_add) return ATTN_ENOMEM;
  } else {
    s->mask_allow = NN_ALLOC_U8(&s->arena, n);
    if (!s->mask_allow) return ATTN_ENOMEM;
  }
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < Hm; h++)
      for (int64_t i = 0; i < Lq; i++)
        for (int64_t j = 0; j < Lk; j++) {
          int64_t am = (mk->attn_per_head ? (b * H + h) * Lq : 0) * Lk + i * Lk + j;
          int64_t o = ((b * Hm + h) * Lq + i) * Lk + j;
          int blocked = (mk->attn_bool && mk->attn_bool[am]) ||
                        (mk->key_padding_bool && mk->key_padding_bool[b * Lk + j]);
          if (use_float) {
            float v = 0.0f;
            if (mk->attn_float) v += mk->attn_float[am];
            if (mk->key_padding_float) v += mk->key_padding_float[b * Lk + j];
            s->mask_add[o] = blocked ? -INFINITY : v;
          } else {
            s->mask_allow[o] = (uint8_t)!blocked;
          }
        }
  s->mask_heads = Hm;
  return ATTN_OK;
}

void attn_nn_mha_desc(const attn_mha *m, const attn_mha_saved *s, attn_sdpa_desc *d) {
  int64_t E = m->c.embed_dim, H = m->c.num_heads, hd = m->head_dim;
  int64_t Hkv = m->c.num_kv_heads, Ekv = Hkv * hd;
  attn_sdpa_desc_init(d, s->B, H, Hkv, s->Lq, s->Lk, hd, hd);
  if (m->c.scale > 0.0f) {
    d->scale = m->c.scale;
    d->has_scale = 1;
  }
  d->causal = s->causal;
  d->dropout_p = s->drop_p; /* 0 unless the forward ran attention dropout */
  d->dropout_seed = s->drop_seed;
  d->dropout_batch0 = s->drop_batch0;
  // [B, L, H*hd] layouts: no split/merge copies
  int64_t qs[3] = {s->Lq * E, hd, E}, ks[3] = {s->Lk * Ekv, hd, Ekv};
  for (int i = 0; i < 3; i++) {
    d->q_stride[i] = d->o_stride[i] = qs[i];
    d->k_stride[i] = d->v_stride[i] = ks[i];
  }
  int64_t Hm = s->mask_heads, Lq = s->Lq, Lk = s->Lk;
  int64_t ms[4] = {Hm * Lq * Lk, Hm == 1 ? 0 : Lq * Lk, Lk, 1};
  if (s->mask_add) {
    d->add_mask = s->mask_add;
    for (int i = 0; i < 4; i++) d->add_mask_stride[i] = ms[i];
  }
  d->key_lens = s->key_lens;
  if (s->mask_allow) {
    d->bool_mask = s->mask_allow;
    for (int i = 0; i < 4; i++) d->bool_mask_stride[i] = ms[i];
  }
}

void attn_nn_mha_sdpa_call(const attn_mha *m, const attn_nn_ctx *ctx, const attn_mha_saved *s,
                           attn_sdpa_desc *d, attn_sdpa_args *a) {
  *a = (attn_sdpa_args){.out = s->ctx, .lse = s->lse};
  if (s->qkvh) { /* bf16 training (nn.h): q | k | v interleaved [B, L, 3E] in bf16 */
    const int64_t E = m->c.embed_dim;
    attn_nn_mha_desc_bf16(m, s, d);
    a->dtype = ATTN_BF16, a->q = s->qkvh, a->k = s->qkvh + E, a->v = s->qkvh + 2 * E;
  } else {
    attn_nn_mha_desc(m, s, d);
    a->path = (attn_sdpa_path)ctx->backend, a->q = s->q, a->k = s->k, a->v = s->v;
  }
}
