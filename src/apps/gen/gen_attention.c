/* A generation's attention as a file for attn viz (lm_generate.h): the
 * probabilities of each new token over the prompt and the tokens before it,
 * every layer and head, labelled by the tokens' text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/gen/gen.h"
#include "apps/viz/viz.h"

char *attn_lm_token_label(const char *bytes, size_t n) {
  const unsigned char *b = (const unsigned char *)bytes;
  char *o = malloc(2 * n + 1);
  if (!o) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    const unsigned c = b[i];
    if (c == '\n' || c == '\t')
      o[k++] = '\\', o[k++] = c == '\n' ? 'n' : 't';
    else if (c < 0x20 || c == 0x7f)
      o[k++] = '?';
    else if (c < 0x80)
      o[k++] = (char)c;
    else {
      const size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
      size_t j = 1;
      while (len > 1 && j < len && i + j < n && (b[i + j] & 0xC0) == 0x80)
        j++;
      if (len > 1 && j == len) {
        memcpy(o + k, b + i, len);
        k += len, i += len - 1;
      } else {
        o[k++] = '?';
      }
    }
  }
  o[k] = '\0';
  return o;
}

attn_status attn_lm_save_attention(const char *path, const attn_lm_generation *g, int64_t layers,
                                   int64_t heads, const int32_t *prompt, int64_t np,
                                   attn_lm_token_bytes_fn bytes, const void *tok) {
  if (!path || !g || !g->probs || !prompt || !bytes)
    return attn_set_error(ATTN_EINVAL, "save attention: no attention in this generation");
  const int64_t ctx = np + g->n;
  char **lab = calloc((size_t)ctx, sizeof *lab);
  int bad = !lab;
  for (int64_t i = 0; !bad && i < ctx; i++) {
    size_t n = 0;
    const char *b = bytes(tok, i < np ? prompt[i] : g->ids[i - np], &n);
    bad = !(lab[i] = attn_lm_token_label(b ? b : "", b ? n : 0));
  }
  char npb[32];
  snprintf(npb, sizeof npb, "%lld", (long long)np);
  const char *kv[] = {"model.kind", "decoder", "prompt_tokens", npb, NULL};
  attn_status st =
      bad ? attn_set_error(ATTN_ENOMEM, "save attention: out of memory")
          : attn_viz_save_f32(path, g->probs, layers, heads, g->n, ctx,
                              (const char *const *)lab + np, (const char *const *)lab, kv);
  for (int64_t i = 0; lab && i < ctx; i++)
    free(lab[i]);
  free(lab);
  return st;
}
