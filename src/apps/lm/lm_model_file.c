/* LM model files: the config and the tokenizer as metadata (lm_model.h). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/lm/lm_model.h"

#define F(name)                                                                                    \
  { "lm." #name, offsetof(attn_lm_config, name) }
static const struct {
  const char *key;
  size_t off;
} fields[] = {F(vocab), F(d_model), F(heads), F(ff), F(layers), F(max_len)};
#undef F
#define NFIELDS (sizeof fields / sizeof fields[0])

attn_status attn_lm_save(const char *path, const attn_lm_model *m, const attn_adam *opt,
                         const char *tokenizer, const char *const *kv) {
  if (!path || !m) return attn_set_error(ATTN_EINVAL, "lm save: NULL argument");
  attn_st *extra = NULL;
  attn_status s = attn_st_new(&extra);
  char buf[32];
  for (size_t i = 0; !s && i < NFIELDS; i++) {
    snprintf(buf, sizeof buf, "%lld",
             (long long)*(const int64_t *)((const char *)&m->c + fields[i].off));
    s = attn_st_set_meta(extra, fields[i].key, buf);
  }
  if (!s) s = attn_st_set_meta(extra, "lm.tied", m->c.tied ? "1" : "0");
  if (!s && tokenizer) s = attn_st_set_meta(extra, "tokenizer", tokenizer);
  for (int i = 0; !s && kv && kv[i] && kv[i + 1]; i += 2)
    s = attn_st_set_meta(extra, kv[i], kv[i + 1]);
  if (!s) s = attn_checkpoint_save(path, &m->p, opt, extra);
  attn_st_free(extra);
  return s;
}

attn_status attn_lm_load(const char *path, attn_lm_model *m, attn_st **file_out) {
  if (!path || !m) return attn_set_error(ATTN_EINVAL, "lm load: NULL argument");
  memset(m, 0, sizeof *m);
  if (file_out) *file_out = NULL;
  attn_st *st = NULL;
  attn_status s = attn_st_load(path, &st);
  if (s) return s;
  if (!attn_st_meta(st, "lm.vocab")) {
    attn_st_free(st);
    return attn_set_error(
        ATTN_EINVAL, "%s: not a language model (no lm.* metadata); train one with attn lm train",
        path);
  }
  attn_lm_config c;
  memset(&c, 0, sizeof c);
  for (size_t i = 0; !s && i < NFIELDS; i++) {
    const char *v = attn_st_meta(st, fields[i].key);
    char *end = NULL;
    long long x = v ? strtoll(v, &end, 10) : 0;
    if (!v || end == v || *end)
      s = attn_set_error(ATTN_EINVAL, "%s: LM metadata '%s' missing or not an integer", path,
                         fields[i].key);
    *(int64_t *)((char *)&c + fields[i].off) = x;
  }
  const char *t = attn_st_meta(st, "lm.tied");
  c.tied = !t || strcmp(t, "0") != 0;
  if (!s) {
    s = attn_lm_create(m, &c);
    if (s) s = attn_set_error(s, "%s: %s", path, attn_last_error());
  }
  if (!s) {
    s = attn_params_load_st(&m->p, st, "", 0);
    if (s) {
      s = attn_set_error(s, "%s: %s", path, attn_last_error());
      attn_lm_free(m);
    }
  }
  if (!s && file_out)
    *file_out = st;
  else
    attn_st_free(st);
  return s;
}
