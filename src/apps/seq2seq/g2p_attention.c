/* A G2P model's cross attention on one word's output, replayed through the
 * incremental decoder (g2p_attention.h). */
#include "apps/seq2seq/g2p_attention.h"

#include <stdlib.h>
#include <string.h>

#include "apps/viz/viz.h"

void attn_g2p_cross_free(attn_g2p_cross *c) {
  if (!c) return;
  free(c->probs);
  free(c->out_labels);
  free(c->src_labels);
  free(c->letters);
  memset(c, 0, sizeof *c);
}

static attn_status check(const attn_g2p_model *m, const int32_t *src, int32_t src_len,
                         const int32_t *ph, int len, int eos) {
  if (!m || !src || (len > 0 && !ph))
    return attn_set_error(ATTN_EINVAL, "g2p cross attention: NULL argument");
  if (src_len < 1 || src_len > m->c.max_src)
    return attn_set_error(ATTN_EINVAL, "g2p cross attention: a word of %d letters; this model reads 1 to %lld",
                          src_len, (long long)m->c.max_src);
  if (len < 0 || len > m->c.max_tgt - 1 || (eos != 0 && eos != 1) || len + eos < 1)
    return attn_set_error(ATTN_EINVAL, "g2p cross attention: %d phonemes%s (0 to %lld, and at least one row)",
                          len, eos ? " + </s>" : "", (long long)(m->c.max_tgt - 1));
  for (int32_t j = 0; j < src_len; j++)
    if (src[j] < ATTN_G2P_SPECIAL || src[j] >= m->vocab_src)
      return attn_set_error(ATTN_EINVAL, "g2p cross attention: letter %d has id %d, not a grapheme of the model",
                            j + 1, src[j]);
  for (int t = 0; t < len; t++)
    if (ph[t] < ATTN_G2P_SPECIAL || ph[t] >= m->vocab_tgt)
      return attn_set_error(ATTN_EINVAL, "g2p cross attention: phoneme %d has id %d, not a phoneme",
                            t + 1, ph[t]);
  return ATTN_OK;
}

/* The labels of both axes. */
static attn_status labels(const attn_g2p_model *m, const int32_t *src, const int32_t *ph,
                          int len, attn_g2p_cross *c) {
  c->out_labels = malloc((size_t)c->l_out * sizeof *c->out_labels);
  c->src_labels = malloc((size_t)c->l_src * sizeof *c->src_labels);
  c->letters = malloc((size_t)c->l_src * 2);
  if (!c->out_labels || !c->src_labels || !c->letters)
    return attn_set_error(ATTN_ENOMEM, "g2p cross attention: out of memory");
  for (int64_t t = 0; t < c->l_out; t++)
    c->out_labels[t] = attn_g2p_phone_name_for(t < len ? ph[t] : ATTN_G2P_EOS, (int)m->c.stress);
  for (int64_t j = 0; j < c->l_src; j++) {
    c->letters[2 * j] = m->g.chars[src[j] - ATTN_G2P_SPECIAL];
    c->letters[2 * j + 1] = '\0';
    c->src_labels[j] = c->letters + 2 * j;
  }
  return ATTN_OK;
}

attn_status attn_g2p_cross_attention(const attn_g2p_model *m, const attn_nn_ctx *ctx,
                                     const int32_t *src, int32_t src_len, const int32_t *ph,
                                     int len, int eos, attn_g2p_cross *out) {
  if (!out) return attn_set_error(ATTN_EINVAL, "g2p cross attention: NULL result");
  memset(out, 0, sizeof *out);
  attn_status st = check(m, src, src_len, ph, len, eos);
  if (st) return st;
  const int64_t L = m->c.dec_layers, H = m->c.heads, T = len + eos, S = src_len;
  out->layers = L, out->heads = H, out->l_out = T, out->l_src = S;
  out->probs = malloc((size_t)(L * H * T * S) * sizeof *out->probs);
  float *step = malloc((size_t)(L * H * S) * sizeof *step); /* [L, 1 row, H, S] */
  if (!out->probs || !step) st = attn_set_error(ATTN_ENOMEM, "g2p cross attention: out of memory");
  if (!st) st = labels(m, src, ph, len, out);
  attn_nn_ctx run = {0};
  if (ctx) run = *ctx;
  run.training = 0;
  attn_g2p_saved sv = {0};
  attn_g2p_stepper d = {0};
  int32_t lens[1] = {src_len};
  if (!st) st = attn_g2p_encode(m, &run, &sv, src, lens, 1, S);
  if (!st) st = attn_g2p_stepper_init(&d, m, &run, &sv, 1);
  for (int64_t t = 0; !st && t < T; t++) {
    const int32_t tok = t == 0 ? ATTN_G2P_BOS : ph[t - 1];
    st = attn_g2p_stepper_step_cross(&d, &tok, t, step);
    for (int64_t l = 0; !st && l < L; l++)
      for (int64_t h = 0; h < H; h++)
        memcpy(out->probs + ((l * H + h) * T + t) * S, step + (l * H + h) * S,
               (size_t)S * sizeof *step);
  }
  attn_g2p_stepper_free(&d);
  attn_g2p_saved_free(&sv);
  free(step);
  if (st) attn_g2p_cross_free(out);
  return st;
}

attn_status attn_g2p_cross_save(const char *path, const attn_g2p_cross *c, const char *const *kv) {
  if (!c || !c->probs) return attn_set_error(ATTN_EINVAL, "g2p cross attention: nothing to save");
  const char *all[64] = {"attention", "cross", "model.kind", "g2p"};
  int n = 4;
  for (int i = 0; kv && kv[i] && n < 62; i += 2) all[n++] = kv[i], all[n++] = kv[i + 1];
  all[n] = NULL;
  return attn_viz_save_f32(path, c->probs, c->layers, c->heads, c->l_out, c->l_src, c->out_labels,
                           c->src_labels, all);
}
