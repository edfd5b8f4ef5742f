/* attn predict's --picture, --save-attention and --member: the attention of
 * one member of the model on each message, drawn and saved
 * (cli_predict_attention.h). */
#include "cli/cli_predict_attention.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apps/classifier/classifier_viz_message.h"
#include "apps/viz/viz.h"

/* Why files cannot be written into dir; NULL when they can. */
static const char *unusable_dir(const char *dir) {
  struct stat sb;
  return stat(dir, &sb)               ? strerror(errno)
         : !S_ISDIR(sb.st_mode)       ? "not a directory"
         : access(dir, W_OK | X_OK)   ? strerror(errno)
                                      : NULL;
}

/* DIR exists (made if missing, with its parents) and is writable; 0, or 1
 * after saying why not. */
static int ready_dir(const char *opt, const char *dir) {
  char buf[4096];
  const char *why = NULL;
  if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf) why = "name too long";
  for (char *p = buf + 1; !why && *p; p++)
    if (*p == '/' && p[-1] != '/') {
      *p = '\0';
      if (mkdir(buf, 0777) && errno != EEXIST) why = strerror(errno);
      *p = '/';
    }
  if (!why && mkdir(buf, 0777) && errno != EEXIST) why = strerror(errno);
  if (!why) why = unusable_dir(buf);
  if (why) fprintf(stderr, "attn predict: %s %s: %s\n", opt, dir, why);
  return why != NULL;
}

/* The folder OUT goes into is writable (checked before any work). */
static int ready_out(const char *out) {
  char dir[4096];
  const char *slash = strrchr(out, '/');
  snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - out) + (slash == out) : 1, slash ? out : ".");
  if (!out[0] || (slash && !slash[1])) {
    fprintf(stderr, "attn predict: --save-attention '%s': a file name is needed\n", out);
    return 1;
  }
  const char *why = unusable_dir(dir);
  if (why) {
    fprintf(stderr, "attn predict: --save-attention %s: %s: %s\n", out, dir, why);
    return 1;
  }
  return 0;
}

int cli_predict_out_ready(const cli_predict_out *o) {
  return (o->picture && ready_dir("--picture", o->picture)) || (o->save && ready_out(o->save));
}

void cli_predict_out_free(cli_predict_out *o) {
  for (int i = 0; i < o->nstems; i++) free(o->stems[i]);
  free(o->stems);
  o->stems = NULL, o->nstems = 0;
}

/* FILE's stem for output names: its base name without the extension, bytes
 * other than [A-Za-z0-9._-] as '_', "stdin" for "-", made unique among the
 * files given before with "-2", "-3"... (malloc'd; NULL: out of memory). */
static char *file_stem(cli_predict_out *o, const char *path) {
  const char *base = strrchr(path, '/');
  base = !strcmp(path, "-") ? "stdin" : base ? base + 1 : path;
  size_t n = strlen(base);
  const char *dot = strrchr(base, '.');
  if (dot && dot != base) n = (size_t)(dot - base);
  if (n == 0) base = "message", n = 7;
  if (n > 100) n = 100;
  char *s = malloc(n + 16);
  if (!s) return NULL;
  for (size_t i = 0; i < n; i++) {
    char c = base[i];
    s[i] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                   c == '-' || c == '_' ? c : '_';
  }
  s[n] = '\0';
  for (int k = 2, clash = 1; clash; k++) {
    clash = 0;
    for (int i = 0; i < o->nstems; i++) clash |= !strcmp(o->stems[i], s);
    if (clash) snprintf(s + n, 16, "-%d", k);
  }
  o->stems[o->nstems++] = s;
  return s;
}

/* The attention of the drawn member on one message: saved and drawn. */
attn_status cli_predict_out_write(cli_predict_out *o, const attn_clf_ens *e, const attn_bpe *bpe,
                                 const char *path, const int32_t *ids, size_t n, const char *pred) {
  char *stem = file_stem(o, path);
  if (!stem) return attn_set_error(ATTN_ENOMEM, "out of memory");
  attn_clf_msg_attn a;
  attn_status st = attn_clf_msg_attention(&e->m[o->member], bpe, ids, (int64_t)n, &a);
  char member[64] = "", file[4400], title[512];
  if (e->n > 1) snprintf(member, sizeof member, "%d of %d", o->member + 1, e->n);
  snprintf(title, sizeof title, "%.200s (%s%s%s)", path, pred, member[0] ? ", member " : "", member);
  if (!st && o->save) {
    size_t len = strlen(o->save);
    int ext = len > 12 && !strcmp(o->save + len - 12, ".safetensors");
    if (o->many) /* OUT.safetensors -> OUT_<stem>.safetensors */
      snprintf(file, sizeof file, "%.*s_%s.safetensors", (int)(ext ? len - 12 : len), o->save, stem);
    else
      snprintf(file, sizeof file, "%s", o->save);
    const char *kv[] = {"model.kind", "classifier",
                        "model.pool", e->m[o->member].c.pool == ATTN_CLF_POOL_MEANMAX ? "mean+max" : "mean",
                        "model.file", o->model,
                        "model.member", member[0] ? member : "1 of 1",
                        "message.file", path,
                        "prediction", pred,
                        NULL};
    st = attn_clf_msg_save(file, &a, kv);
    if (!st) fprintf(stderr, "attn predict: %s: attention saved to %s (attn viz / attn diagnose read it)\n", path, file);
    else attn_prefix_error(st, "--save-attention");
  }
  if (!st && o->picture) {
    snprintf(file, sizeof file, "%s/%s", o->picture, stem);
    st = attn_clf_msg_pictures(file, &a, title, NULL, NULL);
    int page = a.layers * a.heads * a.n * a.n <= ATTN_VIZ_HTML_MAX_VALUES;
    if (!st)
      fprintf(stderr, "attn predict: %s: pictures %s_layer*.png, %s%s, %s_diagnosis.txt (%lld "
                      "layer(s) x %lld head(s), %zu tokens%s%s)\n",
              path, file, page ? file : "no page: too many weights for ", page ? ".html" : "it",
              file, (long long)a.layers, (long long)a.heads, n, member[0] ? ", member " : "", member);
    else attn_prefix_error(st, "--picture");
  }
  attn_clf_msg_attn_free(&a);
  return st;
}

