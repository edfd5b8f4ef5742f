/* Greedy decoding (g2p_decode.h). */
#include "apps/seq2seq/g2p_decode.h"

#include <stdlib.h>
#include <string.h>

/* the best phoneme of logits row x (specials other than EOS never chosen) */
static int32_t pick(const float *x, int64_t V) {
  int32_t best = ATTN_G2P_EOS;
  for (int32_t v = ATTN_G2P_SPECIAL; v < V; v++)
    if (x[v] > x[best]) best = v;
  return best;
}

attn_status attn_g2p_greedy(const attn_g2p_model *m, const attn_nn_ctx *ctx,
                            const int32_t *const *src, const int32_t *src_lens, int n, int batch,
                            int32_t *out, int *out_len) {
  if (n < 0 || batch < 1) return attn_set_error(ATTN_EINVAL, "g2p_greedy: bad arguments");
  int64_t T = m->c.max_tgt, V = m->vocab_tgt, S = m->c.max_src;
  for (int i = 0; i < n; i++)
    if (src_lens[i] < 1 || src_lens[i] > S)
      return attn_set_error(ATTN_EINVAL, "word %d has %d letters; this model reads 1 to %lld", i + 1,
                            src_lens[i], (long long)S);
  int32_t *sb = malloc((size_t)((int64_t)batch * S) * sizeof *sb);
  int32_t *tb = malloc((size_t)((int64_t)batch * T) * sizeof *tb);
  int32_t *pre = malloc((size_t)((int64_t)batch * T) * sizeof *pre);
  int *done = malloc((size_t)batch * sizeof *done);
  attn_g2p_saved sv = {0};
  attn_status st = sb && tb && pre && done ? ATTN_OK : attn_set_error(ATTN_ENOMEM, "g2p: out of memory");
  for (int i0 = 0; !st && i0 < n; i0 += batch) {
    int B = n - i0 < batch ? n - i0 : batch;
    int64_t Ls = 0;
    for (int b = 0; b < B; b++)
      if (src_lens[i0 + b] > Ls) Ls = src_lens[i0 + b];
    for (int b = 0; b < B; b++) {
      int64_t l = src_lens[i0 + b];
      memcpy(sb + b * Ls, src[i0 + b], (size_t)l * sizeof *sb);
      for (int64_t t = l; t < Ls; t++) sb[b * Ls + t] = ATTN_G2P_PAD;
      tb[b * T] = ATTN_G2P_BOS;
      done[b] = 0;
      out_len[i0 + b] = 0;
    }
    st = attn_g2p_encode(m, ctx, &sv, sb, src_lens + i0, B, Ls);
    int left = B;
    for (int64_t t = 1; !st && t < T && left > 0; t++) {
      for (int b = 0; b < B; b++) memcpy(pre + b * t, tb + b * T, (size_t)t * sizeof *pre);
      st = attn_g2p_decode(m, ctx, &sv, pre, t);
      for (int b = 0; !st && b < B; b++) {
        int32_t y = done[b] ? ATTN_G2P_PAD : pick(sv.logits + ((int64_t)b * t + t - 1) * V, V);
        tb[b * T + t] = y;
        if (done[b]) continue;
        if (y == ATTN_G2P_EOS) {
          done[b] = 1;
          left--;
        } else {
          out[(int64_t)(i0 + b) * T + out_len[i0 + b]++] = y;
        }
      }
    }
  }
  attn_g2p_saved_free(&sv);
  free(sb);
  free(tb);
  free(pre);
  free(done);
  return st;
}
