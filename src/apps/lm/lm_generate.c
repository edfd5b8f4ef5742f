/* attn_lm_generate: the LM's decoder through the generation kit's loop
 * (lm_generate.h, apps/gen/gen.h). */
#include <string.h>

#include "apps/lm/lm_generate.h"

static attn_status lm_step(void *d, const int32_t *ids, int64_t n, float *last, float *probs) {
  return attn_lm_decoder_step(d, ids, n, NULL, last, probs);
}

attn_status attn_lm_generate(const attn_lm_model *m, const int32_t *prompt, int64_t np,
                             int64_t n_new, const attn_lm_sampling *s, const attn_lm_kv_spec *kv,
                             int int8_weights, int want_probs, attn_lm_token_fn cb, void *user,
                             attn_lm_generation *out) {
  if (!m || !prompt || !s || !out) return attn_set_error(ATTN_EINVAL, "lm generate: NULL argument");
  memset(out, 0, sizeof *out);
  if (np >= 1 && n_new >= 1 && np + n_new > m->c.max_len)
    return attn_set_error(ATTN_EINVAL,
                          "lm generate: the prompt's %lld tokens + %lld new ones exceed the "
                          "model's context of %lld tokens (shorten the prompt or ask fewer)",
                          (long long)np, (long long)n_new, (long long)m->c.max_len);
  attn_lm_decoder d;
  attn_status st = attn_lm_decoder_init(&d, m, kv, np >= 1 && n_new >= 1 ? np + n_new : 1);
  if (!st && int8_weights) st = attn_lm_decoder_set_int8(&d);
  if (st) {
    attn_lm_decoder_free(&d);
    return st;
  }
  const attn_lm_stepper sp = {lm_step, &d, m->c.vocab, m->c.layers * m->c.heads, -1};
  st = attn_lm_generate_steps(&sp, prompt, np, n_new, s, want_probs, cb, user, out);
  attn_lm_decoder_free(&d);
  return st;
}
