/* Row-wise dropout (residual sublayers, feed-forward) of a batch, or of
 * packed rows (attn_nn_ctx.pack_cu): each packed sequence draws at the
 * place its rows have in the padded batch, so packing keeps the masks of
 * the real tokens. */
#include "nn/nn_internal.h"

attn_status attn_nn_dropout_rows(const attn_nn_ctx *ctx, const float *x, float *y, uint8_t *mask,
                                 int64_t n, float p, uint64_t site) {
  uint64_t seed = attn_nn_dropout_seed(ctx, site);
  if (!ctx->pack_cu) return attn_dropout_f32(x, y, mask, n, p, seed, attn_nn_dropout_offset(ctx, n));
  int64_t S = ctx->pack_seqs, T = ctx->pack_cu[S];
  if (S <= 0 || T <= 0 || n % T || ctx->pack_len <= 0)
    return attn_set_error(ATTN_EINVAL, "dropout: packed rows (%lld sequences, %lld rows) do not "
                          "match a tensor of %lld elements", (long long)S, (long long)T, (long long)n);
  int64_t w = n / T, per_seq = ctx->pack_len * w;
  uint64_t base = attn_nn_dropout_offset(ctx, S * per_seq);
  attn_status st = ATTN_OK;
  for (int64_t s = 0; !st && s < S; s++) {
    int64_t r0 = ctx->pack_cu[s], len = ctx->pack_cu[s + 1] - r0;
    st = attn_dropout_f32(x + r0 * w, y + r0 * w, mask ? mask + r0 * w : NULL, len * w, p, seed,
                          base + (uint64_t)(s * per_seq));
  }
  return st;
}
