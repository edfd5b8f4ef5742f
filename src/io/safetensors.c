/* safetensors read/validate/write. Each tensor's data lives in its own
 * 64-byte aligned allocation (so f32/i64 data is aligned whatever the file
 * offsets are). The host is assumed little-endian, like the format. */
#include "attn/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/json.h"
#include "io/tmpname.h"

#define ST_MAX_HEADER ((uint64_t)100 * 1000 * 1000) /* 100 MB, as the reference implementation */
#define ST_ALIGN 64
/* Entries (tensors + 1) and metadata keys of one header: real checkpoints
 * hold a few thousand tensors per file; a million tiny entries (60 MB of
 * header) would take seconds and gigabytes to build before any check. */
#define ST_MAX_ENTRIES ((size_t)1 << 17)

typedef struct {
  char *name;
  attn_tensor t;
  size_t nbytes;
} st_entry;

struct attn_st {
  st_entry *ent;
  int n, cap;
  char **mkey, **mval;
  int mn, mcap;
};

/* ---- small helpers ---------------------------------------------------------- */

static void *alloc_aligned(size_t n) {
  if (n > SIZE_MAX - ST_ALIGN) return NULL;
  size_t r = n ? (n + ST_ALIGN - 1) / ST_ALIGN * ST_ALIGN : ST_ALIGN;
  return aligned_alloc(ST_ALIGN, r);
}

static char *dup_str(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

/* "[2, 3]" into buf */
static const char *shape_str(char *buf, size_t n, int ndim, const int64_t *shape) {
  size_t k = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < ndim && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)shape[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
  return buf;
}

/* numel*size of a shape in bytes; -1 on negative dims or overflow. */
static int shape_nbytes(attn_dtype dtype, int ndim, const int64_t *shape, size_t *out) {
  uint64_t n = attn_dtype_size(dtype);
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0) return -1;
    if (__builtin_mul_overflow(n, (uint64_t)shape[i], &n)) return -1;
  }
  if (n > (uint64_t)SIZE_MAX / 2) return -1;
  *out = (size_t)n;
  return 0;
}

static int find(const attn_st *st, const char *name) {
  for (int i = 0; i < st->n; i++)
    if (strcmp(st->ent[i].name, name) == 0) return i;
  return -1;
}

static int find_meta(const attn_st *st, const char *key) {
  for (int i = 0; i < st->mn; i++)
    if (strcmp(st->mkey[i], key) == 0) return i;
  return -1;
}

/* ---- construction / access ---------------------------------------------- */

attn_status attn_st_new(attn_st **out) {
  if (!out) return attn_set_error(ATTN_EINVAL, "attn_st_new: out is NULL");
  *out = calloc(1, sizeof **out);
  if (!*out) return attn_set_error(ATTN_ENOMEM, "attn_st_new: out of memory");
  return ATTN_OK;
}

void attn_st_free(attn_st *st) {
  if (!st) return;
  for (int i = 0; i < st->n; i++) {
    free(st->ent[i].name);
    free(st->ent[i].t.data);
  }
  for (int i = 0; i < st->mn; i++) {
    free(st->mkey[i]);
    free(st->mval[i]);
  }
  free(st->ent);
  free(st->mkey);
  free(st->mval);
  free(st);
}

int attn_st_count(const attn_st *st) { return st ? st->n : 0; }

const char *attn_st_name(const attn_st *st, int i) {
  return st && i >= 0 && i < st->n ? st->ent[i].name : NULL;
}

const attn_tensor *attn_st_get(const attn_st *st, const char *name) {
  if (!st || !name) return NULL;
  int i = find(st, name);
  return i < 0 ? NULL : &st->ent[i].t;
}

attn_status attn_st_expect(const attn_st *st, const char *name, attn_dtype dtype, int ndim,
                           const int64_t *shape, int required, const attn_tensor **out) {
  if (!out) return attn_set_error(ATTN_EINVAL, "attn_st_expect: out is NULL");
  *out = NULL;
  if (!st || !name) return attn_set_error(ATTN_EINVAL, "attn_st_expect: st or name is NULL");
  const attn_tensor *t = attn_st_get(st, name);
  if (!t) {
    if (!required) return ATTN_OK;
    return attn_set_error(ATTN_EINVAL, "tensor '%.200s' is missing", name);
  }
  if (t->dtype != dtype)
    return attn_set_error(ATTN_EINVAL, "tensor '%.200s' has dtype %s, expected %s", name,
                          attn_dtype_name(t->dtype),
                          attn_dtype_name(dtype) ? attn_dtype_name(dtype) : "?");
  if (ndim >= 0) {
    char a[128], b[128];
    int bad = t->ndim != ndim;
    for (int i = 0; !bad && shape && i < ndim; i++)
      if (shape[i] >= 0 && shape[i] != t->shape[i]) bad = 1;
    if (bad) {
      int64_t want[ATTN_MAX_DIMS];
      for (int i = 0; i < ndim && i < ATTN_MAX_DIMS; i++) want[i] = shape ? shape[i] : -1;
      return attn_set_error(ATTN_EINVAL, "tensor '%.200s' has shape %s, expected %s (-1: any)",
                            name, shape_str(a, sizeof a, t->ndim, t->shape),
                            shape_str(b, sizeof b, ndim < ATTN_MAX_DIMS ? ndim : ATTN_MAX_DIMS,
                                      want));
    }
  }
  *out = t;
  return ATTN_OK;
}

const char *attn_st_meta(const attn_st *st, const char *key) {
  if (!st || !key) return NULL;
  int i = find_meta(st, key);
  return i < 0 ? NULL : st->mval[i];
}

int attn_st_meta_count(const attn_st *st) { return st ? st->mn : 0; }

const char *attn_st_meta_key(const attn_st *st, int i) {
  return st && i >= 0 && i < st->mn ? st->mkey[i] : NULL;
}

static attn_status append_meta(attn_st *st, const char *key, const char *value);

attn_status attn_st_set_meta(attn_st *st, const char *key, const char *value) {
  if (!st || !key || !value)
    return attn_set_error(ATTN_EINVAL, "attn_st_set_meta: st, key or value is NULL");
  if (!attn_json_utf8_valid(key, strlen(key)) || !attn_json_utf8_valid(value, strlen(value)))
    return attn_set_error(ATTN_EINVAL, "metadata '%.200s': key or value is not valid UTF-8", key);
  int i = find_meta(st, key);
  if (i >= 0) {
    char *v = dup_str(value);
    if (!v) return attn_set_error(ATTN_ENOMEM, "metadata '%.200s': out of memory", key);
    free(st->mval[i]);
    st->mval[i] = v;
    return ATTN_OK;
  }
  return append_meta(st, key, value);
}

/* Adds a key known to be new (no lookup: a file's metadata keys are unique,
 * and a lookup per key would make reading n keys cost n^2). */
static attn_status append_meta(attn_st *st, const char *key, const char *value) {
  char *v = dup_str(value);
  if (!v) return attn_set_error(ATTN_ENOMEM, "metadata '%.200s': out of memory", key);
  if (st->mn == st->mcap) {
    int nc = st->mcap ? st->mcap * 2 : 8;
    char **k2 = realloc(st->mkey, (size_t)nc * sizeof *k2);
    if (k2) st->mkey = k2;
    char **v2 = k2 ? realloc(st->mval, (size_t)nc * sizeof *v2) : NULL;
    if (v2) st->mval = v2;
    if (!k2 || !v2) {
      free(v);
      return attn_set_error(ATTN_ENOMEM, "metadata '%.200s': out of memory", key);
    }
    st->mcap = nc;
  }
  char *k = dup_str(key);
  if (!k) {
    free(v);
    return attn_set_error(ATTN_ENOMEM, "metadata '%.200s': out of memory", key);
  }
  st->mkey[st->mn] = k;
  st->mval[st->mn] = v;
  st->mn++;
  return ATTN_OK;
}

/* Appends an entry taking ownership of name and data (freed on failure). */
static attn_status push_entry(attn_st *st, char *name, attn_dtype dtype, int ndim,
                              const int64_t *shape, void *data, size_t nbytes) {
  if (st->n == st->cap) {
    int nc = st->cap ? st->cap * 2 : 16;
    st_entry *e = realloc(st->ent, (size_t)nc * sizeof *e);
    if (!e) {
      free(name);
      free(data);
      return attn_set_error(ATTN_ENOMEM, "safetensors: out of memory");
    }
    st->ent = e;
    st->cap = nc;
  }
  st_entry *e = &st->ent[st->n++];
  memset(e, 0, sizeof *e);
  e->name = name;
  e->t.dtype = dtype;
  e->t.ndim = ndim;
  for (int i = 0; i < ndim; i++) e->t.shape[i] = shape[i];
  e->t.data = data;
  e->nbytes = nbytes;
  return ATTN_OK;
}

attn_status attn_st_add(attn_st *st, const char *name, attn_dtype dtype, int ndim,
                        const int64_t *shape, const void *data) {
  if (!st || !name) return attn_set_error(ATTN_EINVAL, "attn_st_add: st or name is NULL");
  if (strcmp(name, "__metadata__") == 0 || !attn_json_utf8_valid(name, strlen(name)))
    return attn_set_error(ATTN_EINVAL, "tensor name '%.200s' is reserved or not valid UTF-8",
                          name);
  if ((unsigned)dtype >= ATTN_DTYPE_COUNT)
    return attn_set_error(ATTN_EINVAL, "tensor '%.200s': bad dtype %d", name, (int)dtype);
  if (ndim < 0 || ndim > ATTN_MAX_DIMS || (ndim > 0 && !shape))
    return attn_set_error(ATTN_EINVAL, "tensor '%.200s': rank %d (0..%d, shape required)", name,
                          ndim, ATTN_MAX_DIMS);
  size_t nbytes;
  if (shape_nbytes(dtype, ndim, shape, &nbytes))
    return attn_set_error(ATTN_EINVAL, "tensor '%.200s': negative or too large shape", name);
  if (nbytes && !data) return attn_set_error(ATTN_EINVAL, "tensor '%.200s': data is NULL", name);
  void *copy = alloc_aligned(nbytes);
  if (!copy) return attn_set_error(ATTN_ENOMEM, "tensor '%.200s': out of memory", name);
  if (nbytes) memcpy(copy, data, nbytes);
  int i = find(st, name);
  if (i >= 0) { /* replace in place, keeping the position */
    st_entry *e = &st->ent[i];
    free(e->t.data);
    e->t.data = copy;
    e->t.dtype = dtype;
    e->t.ndim = ndim;
    memset(e->t.shape, 0, sizeof e->t.shape);
    for (int d = 0; d < ndim; d++) e->t.shape[d] = shape[d];
    e->nbytes = nbytes;
    return ATTN_OK;
  }
  char *nm = dup_str(name);
  if (!nm) {
    free(copy);
    return attn_set_error(ATTN_ENOMEM, "tensor '%.200s': out of memory", name);
  }
  return push_entry(st, nm, dtype, ndim, shape, copy, nbytes);
}

attn_status attn_st_add_f32(attn_st *st, const char *name, int ndim, const int64_t *shape,
                            const float *data) {
  return attn_st_add(st, name, ATTN_F32, ndim, shape, data);
}

/* ---- reading ---------------------------------------------------------------- */

/* Where tensor bytes come from: memory (mem != NULL) or a file descriptor. */
typedef struct {
  const char *label; /* file name for messages */
  const unsigned char *mem;
  int fd;
  uint64_t data_start; /* offset of the data buffer in mem/file */
} st_source;

static attn_status read_bytes(const st_source *src, void *dst, size_t n, uint64_t off,
                              const char *what) {
  if (src->mem) {
    memcpy(dst, src->mem + off, n);
    return ATTN_OK;
  }
  size_t done = 0;
  while (done < n) {
    ssize_t r = pread(src->fd, (char *)dst + done, n - done, (off_t)(off + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0)
      return attn_set_error(ATTN_EIO, "%s: reading %s: %s", src->label, what, strerror(errno));
    if (r == 0) return attn_set_error(ATTN_EFORMAT, "%s: %s is truncated", src->label, what);
    done += (size_t)r;
  }
  return ATTN_OK;
}

typedef struct {
  uint64_t begin, end;
  int idx;
} st_span;

static int span_cmp(const void *a, const void *b) {
  const st_span *x = a, *y = b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  return 0;
}

static attn_status parse_metadata(const st_source *src, const json_value *m, attn_st *st) {
  if (m->type != JSON_OBJECT)
    return attn_set_error(ATTN_EFORMAT, "%s: __metadata__ is not an object", src->label);
  for (size_t i = 0; i < m->count; i++) {
    const json_value *v = &m->items[i];
    if (m->key_lens[i] != strlen(m->keys[i]))
      return attn_set_error(ATTN_EFORMAT, "%s: metadata key holds a NUL character", src->label);
    if (v->type != JSON_STRING || v->str_len != strlen(v->str))
      return attn_set_error(ATTN_EFORMAT, "%s: metadata '%.200s' is not a string (or holds NUL)",
                            src->label, m->keys[i]);
    /* the parser checked UTF-8 and refused duplicate keys */
    attn_status s = append_meta(st, m->keys[i], v->str);
    if (s) return s;
  }
  return ATTN_OK;
}

/* Validates one header entry and appends it (data allocated, not yet read). */
static attn_status parse_entry(const st_source *src, const char *name, const json_value *v,
                               uint64_t data_len, attn_st *st, st_span *span) {
  const char *L = src->label;
  if (v->type != JSON_OBJECT)
    return attn_set_error(ATTN_EFORMAT, "%s: tensor '%.200s': entry is not an object", L, name);
  const json_value *jd = attn_json_get(v, "dtype"), *js = attn_json_get(v, "shape"),
                   *jo = attn_json_get(v, "data_offsets");
  if (!jd || !js || !jo)
    return attn_set_error(ATTN_EFORMAT, "%s: tensor '%.200s': needs dtype, shape and data_offsets",
                          L, name);
  int dt = -1;
  for (int d = 0; jd->type == JSON_STRING && d < ATTN_DTYPE_COUNT; d++)
    if (strcmp(jd->str, attn_dtype_name((attn_dtype)d)) == 0) dt = d;
  if (dt < 0)
    return attn_set_error(ATTN_EFORMAT, "%s: tensor '%.200s': unknown dtype %.40s", L, name,
                          jd->type == JSON_STRING ? jd->str : "(not a string)");
  if (js->type != JSON_ARRAY || js->count > ATTN_MAX_DIMS)
    return attn_set_error(ATTN_EFORMAT, "%s: tensor '%.200s': shape is not an array of <= %d dims",
                          L, name, ATTN_MAX_DIMS);
  int64_t shape[ATTN_MAX_DIMS] = {0};
  for (size_t i = 0; i < js->count; i++) {
    const json_value *x = &js->items[i];
    if (x->type != JSON_NUMBER || !x->is_uint || x->uint > (uint64_t)INT64_MAX)
      return attn_set_error(ATTN_EFORMAT, "%s: tensor '%.200s': shape[%zu] is not an integer >= 0",
                            L, name, i);
    shape[i] = (int64_t)x->uint;
  }
  if (jo->type != JSON_ARRAY || jo->count != 2 || jo->items[0].type != JSON_NUMBER ||
      jo->items[1].type != JSON_NUMBER || !jo->items[0].is_uint || !jo->items[1].is_uint)
    return attn_set_error(ATTN_EFORMAT, "%s: tensor '%.200s': data_offsets is not [begin, end]", L,
                          name);
  uint64_t b = jo->items[0].uint, e = jo->items[1].uint;
  if (b > e || e > data_len)
    return attn_set_error(ATTN_EFORMAT,
                          "%s: tensor '%.200s': data_offsets [%llu, %llu] outside the data "
                          "buffer of %llu bytes",
                          L, name, (unsigned long long)b, (unsigned long long)e,
                          (unsigned long long)data_len);
  size_t nbytes;
  if (shape_nbytes((attn_dtype)dt, (int)js->count, shape, &nbytes) || nbytes != e - b) {
    char sb[128];
    return attn_set_error(ATTN_EFORMAT,
                          "%s: tensor '%.200s': shape %s of %s does not match %llu data bytes", L,
                          name, shape_str(sb, sizeof sb, (int)js->count, shape),
                          attn_dtype_name((attn_dtype)dt), (unsigned long long)(e - b));
  }
  void *data = alloc_aligned(nbytes);
  char *nm = dup_str(name);
  if (!data || !nm) {
    free(data);
    free(nm);
    return attn_set_error(ATTN_ENOMEM, "%s: tensor '%.200s': out of memory (%zu bytes)", L, name,
                          nbytes);
  }
  span->begin = b;
  span->end = e;
  span->idx = st->n;
  return push_entry(st, nm, (attn_dtype)dt, (int)js->count, shape, data, nbytes);
}

/* Parses and validates the header, then reads every tensor's bytes. */
static attn_status parse_all(const st_source *src, const char *hdr, size_t hlen,
                             uint64_t data_len, attn_st **out) {
  char err[200];
  json_value *root = NULL;
  const int jr = attn_json_parse_limited(hdr, hlen, ST_MAX_ENTRIES, &root, err, sizeof err);
  if (jr == JSON_ENOMEM)
    return attn_set_error(ATTN_ENOMEM, "%s: out of memory reading the header", src->label);
  if (jr)
    return attn_set_error(ATTN_EFORMAT, "%s: header is not valid JSON or too large: %s",
                          src->label, err);
  attn_st *st = NULL;
  st_span *spans = NULL;
  attn_status s = ATTN_OK;
  if (root->type != JSON_OBJECT) {
    s = attn_set_error(ATTN_EFORMAT, "%s: header is not a JSON object", src->label);
    goto done;
  }
  if ((s = attn_st_new(&st))) goto done;
  spans = calloc(root->count ? root->count : 1, sizeof *spans);
  if (!spans) {
    s = attn_set_error(ATTN_ENOMEM, "%s: out of memory", src->label);
    goto done;
  }
  size_t ns = 0;
  for (size_t i = 0; i < root->count; i++) {
    const char *key = root->keys[i];
    if (root->key_lens[i] != strlen(key)) {
      s = attn_set_error(ATTN_EFORMAT, "%s: tensor name holds a NUL character", src->label);
      goto done;
    }
    if (strcmp(key, "__metadata__") == 0) s = parse_metadata(src, &root->items[i], st);
    else s = parse_entry(src, key, &root->items[i], data_len, st, &spans[ns++]);
    if (s) goto done;
  }
  /* no two non-empty tensors may share bytes */
  qsort(spans, ns, sizeof *spans, span_cmp);
  uint64_t reach = 0;
  int reach_idx = -1;
  for (size_t i = 0; i < ns; i++) {
    if (spans[i].begin == spans[i].end) continue;
    if (reach_idx >= 0 && spans[i].begin < reach) {
      s = attn_set_error(ATTN_EFORMAT, "%s: tensors '%.150s' and '%.150s' overlap", src->label,
                         st->ent[reach_idx].name, st->ent[spans[i].idx].name);
      goto done;
    }
    reach = spans[i].end;
    reach_idx = spans[i].idx;
  }
  for (size_t i = 0; i < ns; i++) {
    st_entry *e = &st->ent[spans[i].idx];
    char what[240];
    snprintf(what, sizeof what, "tensor '%.200s'", e->name);
    if ((s = read_bytes(src, e->t.data, e->nbytes, src->data_start + spans[i].begin, what)))
      goto done;
  }
done:
  attn_json_free(root);
  free(spans);
  if (s) {
    attn_st_free(st);
    return s;
  }
  *out = st;
  return ATTN_OK;
}

static uint64_t le64(const unsigned char *b) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | b[i];
  return v;
}

/* Checks the header length against the file size; returns it in *hlen. */
static attn_status check_header_len(const char *label, const unsigned char *first8,
                                    uint64_t total, uint64_t *hlen) {
  if (total < 8)
    return attn_set_error(ATTN_EFORMAT, "%s: not a safetensors file (%llu bytes, too short)",
                          label, (unsigned long long)total);
  uint64_t n = le64(first8);
  if (n > ST_MAX_HEADER || n > total - 8)
    return attn_set_error(ATTN_EFORMAT,
                          "%s: not a safetensors file (its first 8 bytes give a header length of "
                          "%llu, more than its %llu bytes or 100 MB)",
                          label, (unsigned long long)n, (unsigned long long)total);
  *hlen = n;
  return ATTN_OK;
}

attn_status attn_st_parse(const void *bytes, size_t len, attn_st **out) {
  if (!out) return attn_set_error(ATTN_EINVAL, "attn_st_parse: out is NULL");
  *out = NULL;
  if (!bytes && len) return attn_set_error(ATTN_EINVAL, "attn_st_parse: bytes is NULL");
  const unsigned char *b = bytes;
  uint64_t hlen;
  attn_status s = check_header_len("<memory>", b, len, &hlen);
  if (s) return s;
  st_source src = {"<memory>", b, -1, 8 + hlen};
  return parse_all(&src, (const char *)b + 8, (size_t)hlen, len - 8 - hlen, out);
}

attn_status attn_st_load(const char *path, attn_st **out) {
  if (!out || !path) return attn_set_error(ATTN_EINVAL, "attn_st_load: path or out is NULL");
  *out = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return attn_set_error(ATTN_EIO, "cannot open '%s': %s", path, strerror(errno));
  struct stat sb;
  attn_status s;
  char *hdr = NULL;
  if (fstat(fd, &sb) != 0) {
    s = attn_set_error(ATTN_EIO, "cannot stat '%s': %s", path, strerror(errno));
    goto done;
  }
  if (!S_ISREG(sb.st_mode)) {
    s = attn_set_error(ATTN_EIO, "'%s' is not a regular file", path);
    goto done;
  }
  uint64_t total = (uint64_t)sb.st_size, hlen = 0;
  unsigned char first8[8] = {0};
  st_source src = {path, NULL, fd, 0};
  if (total >= 8 && (s = read_bytes(&src, first8, 8, 0, "header length"))) goto done;
  if ((s = check_header_len(path, first8, total, &hlen))) goto done;
  hdr = malloc(hlen ? hlen : 1);
  if (!hdr) {
    s = attn_set_error(ATTN_ENOMEM, "%s: out of memory for the header", path);
    goto done;
  }
  if ((s = read_bytes(&src, hdr, (size_t)hlen, 8, "header"))) goto done;
  src.data_start = 8 + hlen;
  s = parse_all(&src, hdr, (size_t)hlen, total - 8 - hlen, out);
done:
  free(hdr);
  close(fd);
  return s;
}

/* ---- writing ---------------------------------------------------------------- */

static int build_header(const attn_st *st, json_buf *b) {
  int first = 1;
  if (attn_json_buf_puts(b, "{")) return -1;
  if (st->mn) {
    if (attn_json_buf_puts(b, "\"__metadata__\":{")) return -1;
    for (int i = 0; i < st->mn; i++) {
      if ((i && attn_json_buf_puts(b, ",")) || attn_json_buf_put_string(b, st->mkey[i]) ||
          attn_json_buf_puts(b, ":") || attn_json_buf_put_string(b, st->mval[i]))
        return -1;
    }
    if (attn_json_buf_puts(b, "}")) return -1;
    first = 0;
  }
  uint64_t off = 0;
  for (int i = 0; i < st->n; i++) {
    const st_entry *e = &st->ent[i];
    if ((!first && attn_json_buf_puts(b, ",")) || attn_json_buf_put_string(b, e->name) ||
        attn_json_buf_puts(b, ":{\"dtype\":\"") || attn_json_buf_puts(b, attn_dtype_name(e->t.dtype)) ||
        attn_json_buf_puts(b, "\",\"shape\":["))
      return -1;
    for (int d = 0; d < e->t.ndim; d++)
      if ((d && attn_json_buf_puts(b, ",")) || attn_json_buf_put_u64(b, (uint64_t)e->t.shape[d])) return -1;
    if (attn_json_buf_puts(b, "],\"data_offsets\":[") || attn_json_buf_put_u64(b, off) ||
        attn_json_buf_puts(b, ",") || attn_json_buf_put_u64(b, off + e->nbytes) || attn_json_buf_puts(b, "]}"))
      return -1;
    off += e->nbytes;
    first = 0;
  }
  if (attn_json_buf_puts(b, "}")) return -1;
  while (b->len % 8)
    if (attn_json_buf_puts(b, " ")) return -1;
  return 0;
}

attn_status attn_st_save(const attn_st *st, const char *path) {
  if (!st || !path) return attn_set_error(ATTN_EINVAL, "attn_st_save: st or path is NULL");
  json_buf hb = {0};
  if (build_header(st, &hb)) {
    attn_json_buf_free(&hb);
    return attn_set_error(ATTN_ENOMEM, "%s: out of memory for the header", path);
  }
  char *tmp = attn_tmp_name(path); /* also removes those of killed writers */
  if (!tmp) {
    attn_json_buf_free(&hb);
    return attn_set_error(ATTN_ENOMEM, "%s: out of memory", path);
  }
  attn_status s = ATTN_OK;
  FILE *f = fopen(tmp, "wb");
  if (!f) {
    s = attn_set_error(ATTN_EIO, "cannot create '%s': %s", tmp, strerror(errno));
    goto done;
  }
  unsigned char len8[8];
  for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hb.len >> (8 * i));
  int ok = fwrite(len8, 1, 8, f) == 8 && fwrite(hb.data, 1, hb.len, f) == hb.len;
  for (int i = 0; ok && i < st->n; i++)
    ok = fwrite(st->ent[i].t.data, 1, st->ent[i].nbytes, f) == st->ent[i].nbytes;
  ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
  int err = errno;
  if (fclose(f) != 0 && ok) {
    ok = 0;
    err = errno;
  }
  if (!ok) {
    s = attn_set_error(ATTN_EIO, "writing '%s': %s", tmp, strerror(err));
    unlink(tmp);
    goto done;
  }
  if (rename(tmp, path) != 0) {
    s = attn_set_error(ATTN_EIO, "renaming '%s' to '%s': %s", tmp, path, strerror(errno));
    unlink(tmp);
  }
done:
  free(tmp);
  attn_json_buf_free(&hb);
  return s;
}
