/* The LM's corpus: documents from a folder, split by document (lm_data.h). */
#include "apps/lm/lm_data.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

attn_status attn_lm_read_file(const char *path, char **text, size_t *len) {
  *text = NULL;
  *len = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return attn_set_error(ATTN_EINVAL, "cannot open '%s': %s", path, strerror(errno));
  size_t cap = 1 << 16, n = 0;
  char *b = malloc(cap);
  while (b) {
    if (n + 1 >= cap) {
      char *nb = realloc(b, cap * 2);
      if (!nb) break;
      b = nb, cap *= 2;
    }
    size_t r = fread(b + n, 1, cap - n - 1, f);
    n += r;
    if (!r) break;
  }
  int err = ferror(f);
  fclose(f);
  if (!b || err || n + 1 > cap) {
    free(b);
    return attn_set_error(err ? ATTN_EINVAL : ATTN_ENOMEM, "'%s': %s", path,
                          err ? "read error" : "out of memory");
  }
  b[n] = '\0';
  *text = b;
  *len = n;
  return ATTN_OK;
}

void attn_lm_corpus_free(attn_lm_corpus *c) {
  if (!c) return;
  for (int i = 0; i < c->n; i++) {
    if (c->names) free(c->names[i]);
    if (c->texts) free(c->texts[i]);
  }
  free(c->names);
  free(c->texts);
  free(c->lens);
  free(c->is_val);
  memset(c, 0, sizeof *c);
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static int is_txt(const char *n) {
  size_t k = strlen(n);
  return n[0] != '.' && k > 4 && !strcmp(n + k - 4, ".txt");
}

attn_status attn_lm_corpus_read(const char *path, attn_lm_corpus *c) {
  if (!path || !c) return attn_set_error(ATTN_EINVAL, "corpus: NULL argument");
  memset(c, 0, sizeof *c);
  struct stat sb;
  if (stat(path, &sb)) return attn_set_error(ATTN_EINVAL, "corpus '%s': %s", path, strerror(errno));
  int cap = 0;
  attn_status st = ATTN_OK;
  if (S_ISDIR(sb.st_mode)) {
    DIR *d = opendir(path);
    if (!d) return attn_set_error(ATTN_EINVAL, "corpus '%s': %s", path, strerror(errno));
    struct dirent *e;
    while (!st && (e = readdir(d))) {
      if (!is_txt(e->d_name)) continue;
      if (c->n == cap) {
        cap = cap ? 2 * cap : 256;
        char **nn = realloc(c->names, (size_t)cap * sizeof *nn);
        if (!nn)
          st = attn_set_error(ATTN_ENOMEM, "corpus: out of memory");
        else
          c->names = nn;
      }
      if (!st && !(c->names[c->n++] = strdup(e->d_name)))
        st = attn_set_error(ATTN_ENOMEM, "corpus: out of memory");
    }
    closedir(d);
    if (!st && c->n) qsort(c->names, (size_t)c->n, sizeof *c->names, by_name);
  } else {
    const char *base = strrchr(path, '/');
    c->names = malloc(sizeof *c->names);
    if (!c->names || !(c->names[0] = strdup(base ? base + 1 : path)))
      st = attn_set_error(ATTN_ENOMEM, "corpus: out of memory");
    else
      c->n = 1;
  }
  if (!st && !c->n)
    st = attn_set_error(
        ATTN_EINVAL,
        "corpus '%s': no .txt documents in it (fetch the addresses with tools/fetch_sotu.sh)",
        path);
  if (!st) {
    c->texts = calloc((size_t)c->n, sizeof *c->texts);
    c->lens = calloc((size_t)c->n, sizeof *c->lens);
    c->is_val = calloc((size_t)c->n, sizeof *c->is_val);
    if (!c->texts || !c->lens || !c->is_val)
      st = attn_set_error(ATTN_ENOMEM, "corpus: out of memory");
  }
  size_t total = 0;
  for (int i = 0; !st && i < c->n; i++) {
    char full[4096];
    if (S_ISDIR(sb.st_mode))
      snprintf(full, sizeof full, "%s/%s", path, c->names[i]);
    else
      snprintf(full, sizeof full, "%s", path);
    st = attn_lm_read_file(full, &c->texts[i], &c->lens[i]);
    total += c->lens[i];
    c->is_val[i] = c->n >= 10 ? i % 10 == 4 : i == c->n - 1 && c->n > 1;
    c->n_val += c->is_val[i];
  }
  if (!st && !total) st = attn_set_error(ATTN_EINVAL, "corpus '%s': every document is empty", path);
  c->n_train = c->n - c->n_val;
  if (st) attn_lm_corpus_free(c);
  return st;
}

attn_status attn_lm_corpus_join(const attn_lm_corpus *c, int val, char **text, size_t *len) {
  size_t n = 0;
  for (int i = 0; i < c->n; i++)
    if (c->is_val[i] == val) n += c->lens[i] + 2;
  char *b = malloc(n + 1);
  if (!b) return attn_set_error(ATTN_ENOMEM, "corpus: out of memory");
  size_t o = 0;
  for (int i = 0; i < c->n; i++)
    if (c->is_val[i] == val) {
      memcpy(b + o, c->texts[i], c->lens[i]);
      o += c->lens[i];
      b[o++] = '\n';
      b[o++] = '\n';
    }
  b[o] = '\0';
  *text = b;
  *len = o;
  return ATTN_OK;
}
