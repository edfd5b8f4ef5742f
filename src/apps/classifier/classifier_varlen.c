/* When the classifier runs a batch packed (attn_clf.varlen): the names of
 * the modes and the rule of attn_clf_varlen_applies (classifier.h). */
#include <string.h>

#include "apps/classifier/classifier.h"

static const char *const NAMES[] = {"off", "on", "auto"};

attn_status attn_clf_varlen_from_name(const char *name, int *out) {
  for (int i = 0; name && i < 3; i++)
    if (!strcmp(name, NAMES[i])) {
      *out = i;
      return ATTN_OK;
    }
  return attn_set_error(ATTN_EINVAL, "varlen '%s': expected off, on or auto", name ? name : "");
}

const char *attn_clf_varlen_name(int v) { return v >= 0 && v < 3 ? NAMES[v] : "?"; }

int attn_clf_varlen_applies(const attn_clf *m, const attn_nn_ctx *ctx, const int32_t *lens,
                            int64_t B, int64_t L) {
  if (!m || m->varlen == ATTN_CLF_VARLEN_OFF || !lens || B <= 0 || L <= 0) return 0;
  if (m->qlinears || (ctx && (ctx->qat || ctx->qlinears)))
    return 0;
  for (int64_t l = 0; ctx && ctx->training && l < m->c.layers; l++)
    if (m->layer[l].self_attn.c.dropout > 0.0f) return 0;
  if (m->varlen == ATTN_CLF_VARLEN_ON) return 1;
  int64_t real = 0;
  for (int64_t b = 0; b < B; b++) real += lens[b];
  return 1.0 - (double)real / (double)(B * L) >= ATTN_CLF_VARLEN_AUTO_PAD;
}
