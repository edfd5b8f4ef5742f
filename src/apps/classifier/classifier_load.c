/* A classifier checkpoint into a model: the classifier owns its loading, so
 * that inference (classifier_ensemble.c, attn predict) needs nothing of its
 * training (classifier_train.h, which writes the checkpoints). */
#include <string.h>

#include "apps/classifier/classifier.h"

attn_status attn_clf_load(const char *path, attn_clf *m, attn_st **file) {
  if (file) *file = NULL;
  if (!path || !m) return attn_set_error(ATTN_EINVAL, "clf_load: NULL argument");
  memset(m, 0, sizeof *m);
  attn_st *st_file;
  attn_status st = attn_st_load(path, &st_file);
  if (st) return st;
  const char *cj = attn_st_meta(st_file, "config");
  attn_clf_config c;
  if (!cj) st = attn_set_error(ATTN_EFORMAT, "%s: no \"config\" metadata (not a classifier checkpoint)", path);
  if (!st) st = attn_clf_config_from_json(cj, &c);
  if (!st) st = attn_clf_check_file(&c, st_file);  // before allocating what the config claims
  if (!st) st = attn_clf_create(m, &c);
  // an int8 file (attn quantize): dequantized params + its Linears in int8
  if (!st) st = attn_quant_load_params(&m->p, st_file, 0, &m->qlinears);
  if (!st) st = attn_clf_check_leftovers(m, st_file);
  if (st) {
    attn_prefix_error(st, path);
    attn_clf_free(m);
    attn_st_free(st_file);
    return st;
  }
  if (file) *file = st_file;
  else attn_st_free(st_file);
  return ATTN_OK;
}
