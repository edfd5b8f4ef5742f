/* G2P model files: the config and graphemes as metadata (g2p_model.h). */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/seq2seq/g2p_model.h"

typedef struct {
  const char *key;
  size_t off;
  int is_float; /* 0 int64, 1 float, 2 int flag */
  int optional; /* 1: absent in older files, then dflt */
  int dflt;
} field;

#define F(name) {"g2p." #name, offsetof(attn_g2p_config, name), 0, 0, 0}
static const field fields[] = {F(d_model),
                               F(heads),
                               F(ff),
                               F(enc_layers),
                               F(dec_layers),
                               F(max_src),
                               F(max_tgt),
                               {"g2p.dropout", offsetof(attn_g2p_config, dropout), 1, 0, 0},
                               {"g2p.tied", offsetof(attn_g2p_config, tied), 2, 0, 0},
                               {"g2p.stress", offsetof(attn_g2p_config, stress), 2, 1, 1},
                               {"g2p.reverse", offsetof(attn_g2p_config, reverse), 2, 1, 0},
                               {"g2p.both", offsetof(attn_g2p_config, both), 2, 1, 0}};
#undef F
#define NFIELDS (sizeof fields / sizeof fields[0])

attn_status attn_g2p_store_meta(const attn_g2p_model *m, attn_st *st) {
  char buf[64];
  attn_status s = ATTN_OK;
  for (size_t i = 0; !s && i < NFIELDS; i++) {
    const char *p = (const char *)&m->c + fields[i].off;
    if (fields[i].is_float == 1)
      snprintf(buf, sizeof buf, "%.9g", (double)*(const float *)p);
    else if (fields[i].is_float == 2)
      snprintf(buf, sizeof buf, "%d", *(const int *)p);
    else
      snprintf(buf, sizeof buf, "%lld", (long long)*(const int64_t *)p);
    s = attn_st_set_meta(st, fields[i].key, buf);
  }
  char chars[257];
  memcpy(chars, m->g.chars, (size_t)m->g.n);
  chars[m->g.n] = 0;
  if (!s) s = attn_st_set_meta(st, "g2p.graphemes", chars);
  return s;
}

attn_status attn_g2p_load(const char *path, attn_g2p_model *m, attn_st **file_out) {
  memset(m, 0, sizeof *m);
  if (file_out) *file_out = NULL;
  attn_st *st = NULL;
  attn_status s = attn_st_load(path, &st);
  if (s) return s;
  const char *chars = attn_st_meta(st, "g2p.graphemes");
  if (!chars) {
    int clf = attn_st_meta(st, "config") != NULL;
    attn_st_free(st);
    return attn_set_error(ATTN_EINVAL,
                          "%s: not a G2P model (no g2p.* metadata%s); train one with attn g2p train",
                          path, clf ? ": it looks like an attn train classifier" : "");
  }
  attn_g2p_config c;
  memset(&c, 0, sizeof c);
  for (size_t i = 0; !s && i < NFIELDS; i++) {
    const char *v = attn_st_meta(st, fields[i].key);
    char *end = NULL;
    double d = v ? strtod(v, &end) : fields[i].dflt;
    if ((v || !fields[i].optional) && (!v || end == v || *end))
      s = attn_set_error(ATTN_EINVAL, "%s: G2P metadata '%s' missing or not a number", path,
                         fields[i].key);
    char *p = (char *)&c + fields[i].off;
    if (fields[i].is_float == 1)
      *(float *)p = (float)d;
    else if (fields[i].is_float == 2)
      *(int *)p = d != 0;
    else
      *(int64_t *)p = d >= -1e15 && d <= 1e15 ? (int64_t)d : -1;
  }
  attn_g2p_graphemes g;
  if (!s) {
    attn_g2p_graphemes_make(&g, chars, (int)strlen(chars));
    s = attn_g2p_create(m, &c, &g);
    if (s) s = attn_set_error(s, "%s: %s", path, attn_last_error());
  }
  if (!s) {
    s = attn_params_load_st(&m->p, st, "", 0);
    if (s) {
      s = attn_set_error(s, "%s: %s", path, attn_last_error());
      attn_g2p_free(m);
    }
  }
  if (!s && file_out)
    *file_out = st;
  else
    attn_st_free(st);
  return s;
}

int attn_g2p_same_io(const attn_g2p_model *a, const attn_g2p_model *b) {
  return a->g.n == b->g.n && !memcmp(a->g.chars, b->g.chars, (size_t)a->g.n) &&
         a->c.max_src == b->c.max_src && a->c.max_tgt == b->c.max_tgt &&
         a->vocab_tgt == b->vocab_tgt;
}

/* the same architecture and inputs: parameters of one can be averaged with the other's */
static int same_model(const attn_g2p_model *a, const attn_g2p_model *b) {
  const attn_g2p_config *x = &a->c, *y = &b->c;
  return attn_g2p_same_io(a, b) && x->d_model == y->d_model && x->heads == y->heads &&
         x->ff == y->ff && x->enc_layers == y->enc_layers && x->dec_layers == y->dec_layers &&
         x->tied == y->tied && x->reverse == y->reverse && x->both == y->both &&
         a->p.numel == b->p.numel;
}

/* sum (+)= m's parameters; ATTN_EINVAL naming the tensor at a NaN or Inf */
static attn_status add_finite(double *sum, const attn_g2p_model *m, int add, const char *path) {
  for (int v = 0; v < m->p.count; v++) {
    const attn_param_view *pv = &m->p.views[v];
    const float *x = m->p.data + pv->offset;
    for (int64_t j = 0; j < pv->numel; j++)
      if (!isfinite(x[j]))
        return attn_set_error(ATTN_EINVAL, "%s: %s[%lld] is %g (not averaged)", path, pv->name,
                              (long long)j, (double)x[j]);
  }
  for (int64_t j = 0; j < m->p.numel; j++) sum[j] = (add ? sum[j] : 0.0) + m->p.data[j];
  return ATTN_OK;
}

attn_status attn_g2p_average(const char *const *paths, int n, attn_g2p_model *m) {
  memset(m, 0, sizeof *m);
  if (n < 1) return attn_set_error(ATTN_EINVAL, "g2p average: no model files");
  attn_status s = attn_g2p_load(paths[0], m, NULL);
  if (s) return s;
  double *sum = malloc((size_t)m->p.numel * sizeof *sum);
  if (!sum) s = attn_set_error(ATTN_ENOMEM, "g2p average: out of memory");
  if (!s) s = add_finite(sum, m, 0, paths[0]);
  for (int i = 1; !s && i < n; i++) {
    attn_g2p_model o;
    s = attn_g2p_load(paths[i], &o, NULL);
    if (s) break;
    if (!same_model(m, &o))
      s = attn_set_error(ATTN_EINVAL,
                         "%s: not the architecture or graphemes of %s (only checkpoints of one "
                         "training run can be averaged)", paths[i], paths[0]);
    if (!s) s = add_finite(sum, &o, 1, paths[i]);
    attn_g2p_free(&o);
  }
  for (int64_t j = 0; !s && j < m->p.numel; j++) m->p.data[j] = (float)(sum[j] / n);
  free(sum);
  if (s) attn_g2p_free(m);
  return s;
}

attn_status attn_g2p_save(const char *path, const attn_g2p_model *m, const attn_adam *opt,
                          const char *const *kv) {
  attn_st *extra = NULL;
  attn_status s = attn_st_new(&extra);
  if (!s) s = attn_g2p_store_meta(m, extra);
  for (int i = 0; !s && kv && kv[i] && kv[i + 1]; i += 2) s = attn_st_set_meta(extra, kv[i], kv[i + 1]);
  if (!s) s = attn_checkpoint_save(path, &m->p, opt, extra);
  attn_st_free(extra);
  return s;
}
