/* nn.MultiheadAttention's extra key rows, as torch 1.13's
 * F.multi_head_attention_forward builds them:
 *   k = static_k if given, else the projected key     [B, Lk_base, E]
 *   add_bias_kv:   k = cat(k, bias_k) (one row per batch), v likewise;
 *   add_zero_attn: k = cat(k, 0), v = cat(v, 0);
 *   attn_mask and key_padding_mask padded with "allowed" for the new rows.
 * s->k, s->v hold the result [B, Lk, E] (Lk = Lk_base + add_bias_kv +
 * add_zero_attn), so the SDPA, dropout and attention weights see every row;
 * the backward splits dk / dv back into the projections, static_k / static_v
 * and bias_k / bias_v (the zero rows have no gradient). */
#include <string.h>

#include "nn/nn_internal.h"

int attn_nn_mha_extra(const attn_mha *m, const float *static_k, const float *static_v) {
  return m->c.add_bias_kv || m->c.add_zero_attn || static_k || static_v;
}

attn_status attn_nn_mha_extend_kv(const attn_mha *m, const attn_params *p, attn_mha_saved *s,
                                  const float *kp, const float *vp, const float *static_k,
                                  const float *static_v) {
  const int64_t B = s->B, Lk = s->Lk, Lb = s->Lk_base, Lin = s->Lk_in, E = m->c.embed_dim;
  const int64_t H = m->c.num_heads, hd = m->head_dim;
  float *dst[2] = {s->k, s->v};
  const float *proj[2] = {kp, vp}, *stat[2] = {static_k, static_v};
  for (int i = 0; i < 2; i++)
    for (int64_t b = 0; b < B; b++) {
      float *rows = dst[i] + b * Lk * E;
      if (stat[i]) {  // [B*H, Lb, hd] -> [Lb, H*hd]
        for (int64_t h = 0; h < H; h++)
          for (int64_t j = 0; j < Lb; j++)
            memcpy(rows + j * E + h * hd, stat[i] + ((b * H + h) * Lb + j) * hd,
                   (size_t)hd * sizeof(float));
      } else {
        memcpy(rows, proj[i] + b * Lin * E, (size_t)(Lin * E) * sizeof(float));
      }
      int64_t j = Lb;
      if (m->c.add_bias_kv)
        memcpy(rows + j++ * E, attn_params_data(p, m->bias_kv[i]), (size_t)E * sizeof(float));
      if (m->c.add_zero_attn) memset(rows + j * E, 0, (size_t)E * sizeof(float));
    }
  return ATTN_OK;
}

/* [rows, cols] -> [rows, cols + pad] with zero bytes in the new columns
 * (bool 0 = allowed, float 0.0 = nothing added) */
static void *pad_cols(attn_mha_saved *s, const void *src, int64_t rows, int64_t cols, int64_t pad,
                      size_t es) {
  char *d = attn_nn_alloc(&s->arena, rows * (cols + pad), es);
  if (!d) return NULL;
  for (int64_t r = 0; r < rows; r++) {
    memcpy(d + (size_t)(r * (cols + pad)) * es, (const char *)src + (size_t)(r * cols) * es,
           (size_t)cols * es);
    memset(d + (size_t)(r * (cols + pad) + cols) * es, 0, (size_t)pad * es);
  }
  return d;
}

attn_status attn_nn_mha_pad_masks(const attn_mha *m, const attn_mha_masks *in, attn_mha_saved *s,
                                  attn_mha_masks *out) {
  *out = *in;
  if (in->causal)
    return attn_set_error(ATTN_EUNSUPPORTED, "mha: causal with add_bias_kv, add_zero_attn or "
                          "static_k / static_v (the appended keys have no position)");
  const int64_t B = s->B, Lb = s->Lk_base, pad = s->Lk - s->Lk_base;
  const int64_t am_rows = (in->attn_per_head ? B * m->c.num_heads : 1) * s->Lq;
  if (in->key_padding_bool &&
      !(out->key_padding_bool = pad_cols(s, in->key_padding_bool, B, Lb, pad, 1)))
    return ATTN_ENOMEM;
  if (in->key_padding_float &&
      !(out->key_padding_float = pad_cols(s, in->key_padding_float, B, Lb, pad, sizeof(float))))
    return ATTN_ENOMEM;
  if (in->attn_bool && !(out->attn_bool = pad_cols(s, in->attn_bool, am_rows, Lb, pad, 1)))
    return ATTN_ENOMEM;
  if (in->attn_float &&
      !(out->attn_float = pad_cols(s, in->attn_float, am_rows, Lb, pad, sizeof(float))))
    return ATTN_ENOMEM;
  return ATTN_OK;
}

attn_status attn_nn_mha_split_dkv(const attn_mha *m, attn_params *p, const attn_mha_saved *s,
                                  const float *dk, const float *dv, float *dkp, float *dvp,
                                  float *dstatic_k, float *dstatic_v) {
  const int64_t B = s->B, Lk = s->Lk, Lb = s->Lk_base, Lin = s->Lk_in, E = m->c.embed_dim;
  const int64_t H = m->c.num_heads, hd = m->head_dim;
  const float *src[2] = {dk, dv};
  float *proj[2] = {dkp, dvp}, *stat[2] = {dstatic_k, dstatic_v};
  const int is_static[2] = {s->static_k, s->static_v};
  for (int i = 0; i < 2; i++)
    for (int64_t b = 0; b < B; b++) {
      const float *rows = src[i] + b * Lk * E;
      if (is_static[i] && stat[i]) {  // [Lb, H*hd] -> [B*H, Lb, hd], accumulated
        for (int64_t h = 0; h < H; h++)
          for (int64_t j = 0; j < Lb; j++)
            for (int64_t c = 0; c < hd; c++)
              stat[i][((b * H + h) * Lb + j) * hd + c] += rows[j * E + h * hd + c];
      } else if (!is_static[i]) {
        memcpy(proj[i] + b * Lin * E, rows, (size_t)(Lin * E) * sizeof(float));
      }
      if (m->c.add_bias_kv) {
        float *g = attn_params_grad(p, m->bias_kv[i]);
        for (int64_t e = 0; e < E; e++) g[e] += rows[Lb * E + e];
      }
    }
  return ATTN_OK;
}
