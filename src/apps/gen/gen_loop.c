/* The generation loop for any incremental decoder, and the decoders'
 * scratch and LM head (gen.h). */
#include <stdlib.h>
#include <string.h>

#include "apps/gen/gen.h"
#include "apps/train/train_progress.h"

void attn_lm_decoder_work_free(attn_lm_decoder_work *w) {
  if (!w) return;
  attn_lm_kv_free(&w->kv);
  attn_ffn_saved_free(&w->fs);
  attn_qlinear_set_free(w->ql);
  free(w->scratch);
  memset(w, 0, sizeof *w);
}

attn_status attn_lm_scratch_reserve(float **scratch, int64_t *cap, int64_t n, int64_t E) {
  if (n <= *cap) return ATTN_OK;
  float *s = realloc(*scratch, (size_t)(n * (7 * E + 2)) * sizeof *s);
  if (!s)
    return attn_set_error(ATTN_ENOMEM, "decoder: out of memory for %lld positions", (long long)n);
  *scratch = s;
  *cap = n;
  return ATTN_OK;
}

attn_status attn_lm_step_check(const char *who, const int32_t *ids, int64_t n, int64_t pos,
                               int64_t cap, const char *cap_name, int64_t V) {
  if (n < 1 || pos + n > cap)
    return attn_set_error(ATTN_EINVAL,
                          "%s: %lld new positions after %lld exceed the %s of %lld "
                          "tokens",
                          who, (long long)n, (long long)pos, cap_name, (long long)cap);
  for (int64_t i = 0; i < n; i++)
    if (ids[i] < 0 || ids[i] >= V)
      return attn_set_error(ATTN_EINVAL, "%s: token id %d outside the vocabulary of %lld", who,
                            ids[i], (long long)V);
  return ATTN_OK;
}

attn_status attn_lm_head_logits(const attn_nn_ctx *ctx, const float *a, const float *W, int64_t n,
                                int64_t E, int64_t V, float *logits, float *last) {
  if (logits) {
    attn_status st = attn_dense_forward_ctx(ctx, a, W, NULL, logits, n, E, V);
    if (!st && last) memcpy(last, logits + (n - 1) * V, (size_t)V * sizeof *last);
    return st;
  }
  return last ? attn_dense_forward_ctx(ctx, a + (n - 1) * E, W, NULL, last, 1, E, V) : ATTN_OK;
}

void attn_lm_generation_free(attn_lm_generation *g) {
  if (!g) return;
  free(g->ids);
  free(g->probs);
  memset(g, 0, sizeof *g);
}

/* rows i0.. of step probs [layers, H, n, len] into out [layers, H, rows, ctx] (zero padded) */
static void copy_probs(float *out, const float *step, int64_t LH, int64_t rows, int64_t ctx,
                       int64_t row0, int64_t n, int64_t len) {
  for (int64_t lh = 0; lh < LH; lh++)
    for (int64_t i = 0; i < n; i++) {
      float *dst = out + (lh * rows + row0 + i) * ctx;
      memcpy(dst, step + (lh * n + i) * len, (size_t)len * sizeof *dst);
      memset(dst + len, 0, (size_t)(ctx - len) * sizeof *dst);
    }
}

attn_status attn_lm_generate_steps(const attn_lm_stepper *sp, const int32_t *prompt, int64_t np,
                                   int64_t n_new, const attn_lm_sampling *s, int want_probs,
                                   attn_lm_token_fn cb, void *user, attn_lm_generation *out) {
  if (!sp || !sp->step || !prompt || !s || !out)
    return attn_set_error(ATTN_EINVAL, "lm generate: NULL argument");
  memset(out, 0, sizeof *out);
  attn_status st = attn_lm_sampling_check(s);
  if (st) return st;
  if (np < 1)
    return attn_set_error(ATTN_EINVAL, "lm generate: an empty prompt (at least one token)");
  if (n_new < 1)
    return attn_set_error(ATTN_EINVAL, "lm generate: %lld new tokens (at least 1)",
                          (long long)n_new);
  const int64_t V = sp->vocab, LH = sp->probs_rows, ctx = np + n_new;
  float *logits = malloc((size_t)V * sizeof *logits);
  float *step = want_probs ? malloc((size_t)(LH * ctx) * sizeof *step) : NULL;
  out->ids = malloc((size_t)n_new * sizeof *out->ids);
  if (want_probs) out->probs = malloc((size_t)(LH * n_new * ctx) * sizeof *out->probs);
  if (!logits || !out->ids || (want_probs && (!step || !out->probs)))
    st = attn_set_error(ATTN_ENOMEM, "lm generate: out of memory");
  const double t0 = attn_train_now();
  if (!st) st = sp->step(sp->decoder, prompt, np, logits, NULL);
  const double t1 = attn_train_now();
  out->prefill_s = t1 - t0;
  for (int64_t t = 0; !st && t < n_new; t++) {
    int32_t id;
    if ((st = attn_lm_sample(s, logits, V, (uint64_t)t, &id))) break;
    out->ids[t] = id;
    out->n = t + 1;
    if (cb) cb(id, user);
    const int more = t + 1 < n_new && id != sp->eos;
    /* the last token is fed only for its attention */
    if (more || want_probs) st = sp->step(sp->decoder, &id, 1, more ? logits : NULL, step);
    if (!st && want_probs) copy_probs(out->probs, step, LH, n_new, ctx, t, 1, np + t + 1);
    if (!more) break;
  }
  out->decode_s = attn_train_now() - t1;
  out->context = np + out->n;
  free(logits);
  free(step);
  if (st) attn_lm_generation_free(out);
  return st;
}
