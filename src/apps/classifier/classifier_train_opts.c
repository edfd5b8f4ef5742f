/* The training options that shape a run's numbers, as JSON: saved in every
 * checkpoint of attn train ("train.options") so that --resume goes on with
 * the options the run was started with. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/classifier/classifier_ensemble.h"
#include "apps/classifier/classifier_train.h"
#include "io/json.h"

typedef enum { F_INT, F_DOUBLE, F_FLOAT, F_I64 } field_type;

typedef struct {
  const char *key;
  field_type type;
  size_t offset;
} field;

#define OPT(k, t, m) {k, t, offsetof(attn_train_opts, m)}
static const field FIELDS[] = {
    OPT("epochs", F_INT, epochs),
    OPT("batch", F_INT, batch),
    OPT("chunk_batches", F_INT, chunk_batches),
    OPT("lr", F_DOUBLE, lr),
    OPT("min_lr", F_DOUBLE, min_lr),
    OPT("weight_decay", F_DOUBLE, weight_decay),
    OPT("warmup_frac", F_DOUBLE, warmup_frac),
    OPT("clip", F_DOUBLE, clip),
    OPT("label_smoothing", F_FLOAT, label_smoothing),
    OPT("token_dropout", F_FLOAT, token_dropout),
    OPT("ema", F_DOUBLE, ema),
    OPT("qat", F_INT, qat),
    OPT("select_by_acc", F_INT, select_by_acc),
    OPT("loss_scale", F_FLOAT, loss_scale),
    OPT("loss_scale_interval", F_I64, loss_scale_interval),
    OPT("members", F_INT, members),
};
#undef OPT
enum { NFIELDS = (int)(sizeof FIELDS / sizeof FIELDS[0]) };

attn_status attn_train_opts_to_json(const attn_train_opts *o, char **json) {
  *json = NULL;
  char buf[1024];
  size_t n = (size_t)snprintf(buf, sizeof buf, "{\"seed\":\"%llu\",\"precision\":\"%s\",\"qat_act\":\"%s\"",
                              (unsigned long long)o->seed, attn_precision_name(o->precision),
                              o->qat_act == ATTN_QAT_ACT_ROW ? "row" : "tensor");
  for (int i = 0; i < NFIELDS && n < sizeof buf; i++) {
    const char *p = (const char *)o + FIELDS[i].offset;
    const char *k = FIELDS[i].key;
    switch (FIELDS[i].type) {  // %.17g / %.9g: the exact double / float back
      case F_INT: n += (size_t)snprintf(buf + n, sizeof buf - n, ",\"%s\":%d", k, *(const int *)p); break;
      case F_I64:
        n += (size_t)snprintf(buf + n, sizeof buf - n, ",\"%s\":%lld", k, (long long)*(const int64_t *)p);
        break;
      case F_DOUBLE:
        n += (size_t)snprintf(buf + n, sizeof buf - n, ",\"%s\":%.17g", k, *(const double *)p);
        break;
      default:
        n += (size_t)snprintf(buf + n, sizeof buf - n, ",\"%s\":%.9g", k, (double)*(const float *)p);
        break;
    }
  }
  if (n + 2 > sizeof buf) return attn_set_error(ATTN_EINVAL, "train options: JSON too long");
  snprintf(buf + n, sizeof buf - n, "}");
  *json = strdup(buf);
  return *json ? ATTN_OK : attn_set_error(ATTN_ENOMEM, "train options: out of memory");
}

/* *v's string for key: absent (NULL, ok) or a string (else an error). */
static attn_status get_string(const json_value *v, const char *key, const char **out) {
  const json_value *x = attn_json_get(v, key);
  *out = NULL;
  if (!x) return ATTN_OK;
  if (x->type != JSON_STRING)
    return attn_set_error(ATTN_EFORMAT, "train options: '%s' is not a string", key);
  *out = x->str;
  return ATTN_OK;
}

attn_status attn_train_opts_from_json(const char *json, attn_train_opts *out) {
  if (!json || !out) return attn_set_error(ATTN_EINVAL, "train options: NULL argument");
  json_value *v = NULL;
  char err[128];
  if (attn_json_parse(json, strlen(json), &v, err, sizeof err))
    return attn_set_error(ATTN_EFORMAT, "train options: %s", err);
  attn_train_opts o = *out;
  attn_status st = v->type == JSON_OBJECT ? ATTN_OK
                                          : attn_set_error(ATTN_EFORMAT, "train options: not an object");
  const char *s = NULL;
  if (!st) st = get_string(v, "seed", &s);
  if (!st && s) {
    char *end;
    o.seed = strtoull(s, &end, 10);
    if (end == s || *end) st = attn_set_error(ATTN_EFORMAT, "train options: seed '%.30s'", s);
  }
  if (!st) st = get_string(v, "precision", &s);
  if (!st && s) st = attn_precision_from_name(s, &o.precision);
  if (!st) st = get_string(v, "qat_act", &s);
  if (!st && s) {
    if (!strcmp(s, "row")) o.qat_act = ATTN_QAT_ACT_ROW;
    else if (!strcmp(s, "tensor")) o.qat_act = ATTN_QAT_ACT_TENSOR;
    else st = attn_set_error(ATTN_EFORMAT, "train options: qat_act '%.30s'", s);
  }
  for (int i = 0; !st && i < NFIELDS; i++) {
    const json_value *x = attn_json_get(v, FIELDS[i].key);
    if (!x) continue;  // older checkpoints: the caller's value stays
    if (x->type != JSON_NUMBER || !isfinite(x->number)) {
      st = attn_set_error(ATTN_EFORMAT, "train options: '%s' is not a number", FIELDS[i].key);
      break;
    }
    char *p = (char *)&o + FIELDS[i].offset;
    double d = x->number;
    switch (FIELDS[i].type) {
      case F_INT: *(int *)p = (int)d; break;
      case F_I64: *(int64_t *)p = (int64_t)d; break;
      case F_DOUBLE: *(double *)p = d; break;
      default: *(float *)p = (float)d; break;
    }
  }
  if (!st && (o.epochs <= 0 || o.batch <= 0 || o.batch > 4096 || o.chunk_batches <= 0 ||
              !(o.token_dropout >= 0 && o.token_dropout < 1) || !(o.ema >= 0 && o.ema < 1) ||
              !(o.lr >= 0) || !(o.clip >= 0) || o.members < 1 || o.members > ATTN_CLF_ENS_MAX))
    st = attn_set_error(ATTN_EFORMAT, "train options: a value is out of range (epochs %d, batch %d, "
                        "token_dropout %g, ema %g, lr %g, clip %g, members %d)", o.epochs, o.batch,
                        (double)o.token_dropout, o.ema, o.lr, o.clip, o.members);
  attn_json_free(v);
  if (!st) *out = o;
  return st;
}
