#include "apps/classifier/dataset.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

const char *attn_split_name(int split) {
  static const char *const names[ATTN_SPLIT_COUNT] = {"train", "val", "test"};
  return split >= 0 && split < ATTN_SPLIT_COUNT ? names[split] : NULL;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **v, int n) {
  for (int i = 0; i < n; i++) free(v[i]);
  free(v);
}

static char *join(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  char *p = malloc(la + lb + 2);
  if (!p) return NULL;
  memcpy(p, a, la);
  p[la] = '/';
  memcpy(p + la + 1, b, lb + 1);
  return p;
}

/* Sorted names of the entries of dir that are directories (want_dir) or
 * regular files, skipping hidden ones and "cmds". */
static attn_status list_dir(const char *dir, int want_dir, char ***names, int *count) {
  *names = NULL;
  *count = 0;
  DIR *d = opendir(dir);
  if (!d) return attn_set_error(ATTN_EIO, "corpus: cannot read folder '%s': %s", dir, strerror(errno));
  char **v = NULL;
  int n = 0, cap = 0;
  struct dirent *e;
  attn_status st = ATTN_OK;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.' || (!want_dir && !strcmp(e->d_name, "cmds"))) continue;
    char *full = join(dir, e->d_name);
    struct stat sb;
    int ok = full && stat(full, &sb) == 0 && (want_dir ? S_ISDIR(sb.st_mode) : S_ISREG(sb.st_mode));
    free(full);
    if (!ok) continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 256;
      char **nv = realloc(v, (size_t)cap * sizeof *v);
      if (!nv) {
        st = attn_set_error(ATTN_ENOMEM, "corpus: out of memory listing '%s'", dir);
        break;
      }
      v = nv;
    }
    if (!(v[n] = strdup(e->d_name))) {
      st = attn_set_error(ATTN_ENOMEM, "corpus: out of memory listing '%s'", dir);
      break;
    }
    n++;
  }
  closedir(d);
  if (st) {
    free_names(v, n);
    return st;
  }
  if (n) qsort(v, (size_t)n, sizeof *v, cmp_str);
  *names = v;
  *count = n;
  return ATTN_OK;
}

void attn_corpus_free(attn_corpus *c) {
  if (!c) return;
  free(c->dir);
  free_names(c->paths, c->n);
  free(c->group);
  free(c->label);
  free(c->split);
  free_names(c->group_names, c->n_groups);
  free(c->group_label);
  if (c->text) free_names(c->text, c->n);
  free(c->text_len);
  free(c->info);
  free(c);
}

attn_status attn_corpus_scan(const char *dir, attn_corpus **out) {
  if (!dir || !out) return attn_set_error(ATTN_EINVAL, "corpus_scan: NULL dir or out");
  *out = NULL;
  attn_corpus *c = calloc(1, sizeof *c);
  if (!c || !(c->dir = strdup(dir))) {
    free(c);
    return attn_set_error(ATTN_ENOMEM, "corpus: out of memory");
  }
  attn_status st = list_dir(dir, 1, &c->group_names, &c->n_groups);
  if (!st && c->n_groups == 0)
    st = attn_set_error(ATTN_EFORMAT, "corpus: '%s' has no group folder (expected DIR/<group>/<message>)", dir);
  if (!st && !(c->group_label = calloc((size_t)c->n_groups, sizeof *c->group_label)))
    st = attn_set_error(ATTN_ENOMEM, "corpus: out of memory");
  int cap = 0;
  for (int g = 0; g < c->n_groups && !st; g++) {
    c->group_label[g] = strcasestr(c->group_names[g], "spam") != NULL;
    char *gdir = join(dir, c->group_names[g]);
    char **files = NULL;
    int nf = 0;
    st = gdir ? list_dir(gdir, 0, &files, &nf) : attn_set_error(ATTN_ENOMEM, "corpus: out of memory");
    free(gdir);
    if (!st && c->n + nf > cap) {
      while (cap < c->n + nf) cap = cap ? 2 * cap : 1024;
      char **p = realloc(c->paths, (size_t)cap * sizeof *p);
      if (p) c->paths = p;
      int *gr = realloc(c->group, (size_t)cap * sizeof *gr);
      if (gr) c->group = gr;
      int *lb = realloc(c->label, (size_t)cap * sizeof *lb);
      if (lb) c->label = lb;
      if (!p || !gr || !lb) st = attn_set_error(ATTN_ENOMEM, "corpus: out of memory");
    }
    for (int i = 0; i < nf && !st; i++) {
      char *rel = join(c->group_names[g], files[i]);
      if (!rel) {
        st = attn_set_error(ATTN_ENOMEM, "corpus: out of memory");
        break;
      }
      c->paths[c->n] = rel;
      c->group[c->n] = g;
      c->label[c->n] = c->group_label[g];
      c->n++;
    }
    free_names(files, nf);
  }
  if (!st && c->n == 0)
    st = attn_set_error(ATTN_EFORMAT, "corpus: the group folders of '%s' hold no message", dir);
  if (!st && !(c->split = malloc((size_t)c->n * sizeof *c->split)))
    st = attn_set_error(ATTN_ENOMEM, "corpus: out of memory");
  if (st) {
    attn_corpus_free(c);
    return st;
  }
  for (int i = 0; i < c->n; i++) c->split[i] = -1;
  *out = c;
  return ATTN_OK;
}

static uint64_t splitmix64(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

attn_status attn_corpus_split(attn_corpus *c, uint64_t seed, int train_pct, int val_pct) {
  if (!c) return attn_set_error(ATTN_EINVAL, "corpus_split: NULL corpus");
  if (train_pct < 0 || val_pct < 0 || train_pct + val_pct > 100)
    return attn_set_error(ATTN_EINVAL, "corpus_split: train %d%% + val %d%% must be within 0..100",
                          train_pct, val_pct);
  int *idx = malloc((size_t)c->n * sizeof *idx);
  if (!idx) return attn_set_error(ATTN_ENOMEM, "corpus_split: out of memory");
  uint64_t state = seed;
  for (int g = 0; g < c->n_groups; g++) {
    int m = 0;
    for (int i = 0; i < c->n; i++)
      if (c->group[i] == g) idx[m++] = i;
    for (int i = m - 1; i > 0; i--) { /* Fisher-Yates */
      int j = (int)(splitmix64(&state) % (uint64_t)(i + 1));
      int t = idx[i];
      idx[i] = idx[j];
      idx[j] = t;
    }
    int n_train = (int)(((long)m * train_pct + 50) / 100);
    int n_val = (int)(((long)m * val_pct + 50) / 100);
    if (n_train + n_val > m) n_val = m - n_train;
    for (int k = 0; k < m; k++)
      c->split[idx[k]] = k < n_train ? ATTN_SPLIT_TRAIN : k < n_train + n_val ? ATTN_SPLIT_VAL : ATTN_SPLIT_TEST;
  }
  free(idx);
  return ATTN_OK;
}

attn_status attn_corpus_save_split(const attn_corpus *c, const char *path, const char *note) {
  if (!c || !path) return attn_set_error(ATTN_EINVAL, "corpus_save_split: NULL argument");
  for (int i = 0; i < c->n; i++)
    if (!attn_split_name(c->split[i]))
      return attn_set_error(ATTN_EINVAL, "corpus_save_split: '%s' has no split", c->paths[i]);
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof tmp)
    return attn_set_error(ATTN_EINVAL, "corpus_save_split: path too long");
  FILE *f = fopen(tmp, "w");
  if (!f) return attn_set_error(ATTN_EIO, "corpus_save_split: cannot write '%s': %s", tmp, strerror(errno));
  if (note) fprintf(f, "# %s\n", note);
  for (int i = 0; i < c->n; i++) fprintf(f, "%s\t%s\n", attn_split_name(c->split[i]), c->paths[i]);
  int bad = ferror(f);
  bad |= fflush(f) != 0 || fsync(fileno(f)) != 0;
  bad |= fclose(f) != 0;
  if (bad || rename(tmp, path) != 0) {
    attn_status st = attn_set_error(ATTN_EIO, "corpus_save_split: writing '%s' failed: %s", path, strerror(errno));
    remove(tmp);
    return st;
  }
  return ATTN_OK;
}

static int cmp_path_idx(const void *a, const void *b, void *corpus) {
  const attn_corpus *c = corpus;
  return strcmp(c->paths[*(const int *)a], c->paths[*(const int *)b]);
}

attn_status attn_corpus_load_split(attn_corpus *c, const char *path) {
  if (!c || !path) return attn_set_error(ATTN_EINVAL, "corpus_load_split: NULL argument");
  FILE *f = fopen(path, "r");
  if (!f) return attn_set_error(ATTN_EIO, "split file '%s': %s", path, strerror(errno));
  int *order = malloc((size_t)c->n * sizeof *order);
  int *seen = calloc((size_t)c->n, sizeof *seen);
  int *split = malloc((size_t)c->n * sizeof *split);
  attn_status st = ATTN_OK;
  if (!order || !seen || !split) st = attn_set_error(ATTN_ENOMEM, "corpus_load_split: out of memory");
  if (!st) {
    for (int i = 0; i < c->n; i++) order[i] = i;
    qsort_r(order, (size_t)c->n, sizeof *order, cmp_path_idx, c);
  }
  char line[4096];
  long ln = 0;
  while (!st && fgets(line, sizeof line, f)) {
    ln++;
    size_t len = strlen(line);
    if (len && line[len - 1] == '\n') line[--len] = '\0';
    else if (!feof(f)) {
      st = attn_set_error(ATTN_EFORMAT, "split file '%s' line %ld: too long", path, ln);
      break;
    }
    if (line[0] == '#' || line[0] == '\0') continue;
    char *tab = strchr(line, '\t');
    int sp = -1;
    if (tab) {
      *tab = '\0';
      for (int k = 0; k < ATTN_SPLIT_COUNT; k++)
        if (!strcmp(line, attn_split_name(k))) sp = k;
    }
    if (sp < 0) {
      st = attn_set_error(ATTN_EFORMAT, "split file '%s' line %ld: expected 'train|val|test<TAB>path'", path, ln);
      break;
    }
    const char *rel = tab + 1;
    int lo = 0, hi = c->n - 1, found = -1;
    while (lo <= hi) {
      int mid = (lo + hi) / 2, cmp = strcmp(c->paths[order[mid]], rel);
      if (!cmp) {
        found = order[mid];
        break;
      }
      if (cmp < 0) lo = mid + 1;
      else hi = mid - 1;
    }
    if (found < 0) {
      st = attn_set_error(ATTN_EFORMAT, "split file '%s' line %ld: '%s' is not in corpus '%s'", path, ln, rel, c->dir);
    } else if (seen[found]++) {
      st = attn_set_error(ATTN_EFORMAT, "split file '%s' line %ld: '%s' is listed twice", path, ln, rel);
    } else {
      split[found] = sp;
    }
  }
  if (!st && ferror(f)) st = attn_set_error(ATTN_EIO, "split file '%s': read error", path);
  for (int i = 0; i < c->n && !st; i++)
    if (!seen[i])
      st = attn_set_error(ATTN_EFORMAT,
                          "split file '%s' does not list '%s' (the corpus changed? remove the file to make a new split)",
                          path, c->paths[i]);
  if (!st) memcpy(c->split, split, (size_t)c->n * sizeof *split);
  fclose(f);
  free(order);
  free(seen);
  free(split);
  return st;
}

attn_status attn_corpus_load_texts(attn_corpus *c) {
  if (!c) return attn_set_error(ATTN_EINVAL, "corpus_load_texts: NULL corpus");
  if (c->text) return ATTN_OK;
  c->text = calloc((size_t)c->n, sizeof *c->text);
  c->text_len = calloc((size_t)c->n, sizeof *c->text_len);
  c->info = calloc((size_t)c->n, sizeof *c->info);
  memset(&c->mail, 0, sizeof c->mail);
  attn_status st = ATTN_OK;
  if (!c->text || !c->text_len || !c->info) st = attn_set_error(ATTN_ENOMEM, "corpus: out of memory");
  for (int i = 0; i < c->n && !st; i++) {
    char *full = join(c->dir, c->paths[i]);
    if (!full) {
      st = attn_set_error(ATTN_ENOMEM, "corpus: out of memory");
      break;
    }
    st = attn_mail_file_to_text_flags(full, c->mail_flags, &c->text[i], &c->text_len[i], &c->info[i]);
    free(full);
    if (!st) attn_mail_stats_add(&c->mail, &c->info[i]);
  }
  if (st) {
    if (c->text) free_names(c->text, c->n);
    free(c->text_len);
    free(c->info);
    c->text = NULL;
    c->text_len = NULL;
    c->info = NULL;
  }
  return st;
}

int attn_corpus_count(const attn_corpus *c, int split, int label) {
  int n = 0;
  for (int i = 0; i < c->n; i++)
    n += (split < 0 || c->split[i] == split) && (label < 0 || c->label[i] == label);
  return n;
}
