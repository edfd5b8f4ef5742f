/* safetensors: round trips of every dtype, a file written from torch
 * (tools/golden_safetensors.py), malformed inputs, atomic saves, fuzzing. */
#include <dirent.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "io/json.h"

static char tmpdir[64];

static void make_tmpdir(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/attn_st_XXXXXX");
  if (!mkdtemp(tmpdir)) {
    printf("mkdtemp failed\n");
    exit(1);
  }
}

/* number of entries in tmpdir (besides . and ..) */
static int dir_entries(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  if (!d) return -1;
  for (struct dirent *e; (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  closedir(d);
  return n;
}

static unsigned char *read_file(const char *path, size_t *len) {
  long n = 0;
  unsigned char *b = (unsigned char *)read_whole_file(path, &n);
  *len = (size_t)n;
  return b;
}

static void write_file(const char *path, const void *b, size_t n) {
  FILE *f = fopen(path, "wb");
  fwrite(b, 1, n, f);
  fclose(f);
}

/* Bytes of a file: u64 length of `json`, json, then `data`. */
static unsigned char *make_bytes(const char *json, const void *data, size_t dlen, size_t *len) {
  size_t h = strlen(json);
  unsigned char *b = malloc(8 + h + dlen + 1);
  for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)h >> (8 * i));
  memcpy(b + 8, json, h);
  if (dlen) memcpy(b + 8 + h, data, dlen);
  *len = 8 + h + dlen;
  return b;
}

static attn_status parse_json(const char *json, size_t dlen) {
  static const unsigned char zeros[64];
  size_t len;
  unsigned char *b = make_bytes(json, zeros, dlen, &len);
  attn_st *st = NULL;
  attn_status s = attn_st_parse(b, len, &st);
  attn_st_free(st);
  free(b);
  return s;
}

static void test_round_trip_every_dtype(void) {
  attn_st *st;
  CHECK_OK(attn_st_new(&st));
  int64_t sh[2] = {2, 3};
  float f32[6] = {1, -2, 3.5f, 1e-30f, -0.0f, 65504};
  uint16_t f16[6] = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x8000, 0x7c00};
  uint16_t bf16[6] = {0x3f80, 0xc040, 0x7f80, 0x0001, 0x8000, 0x4049};
  int64_t i64[6] = {INT64_MIN, -1, 0, 1, INT64_MAX, 1234567890123LL};
  int32_t i32[6] = {INT32_MIN, -1, 0, 1, INT32_MAX, 77};
  int8_t i8[6] = {-128, -1, 0, 1, 127, 5};
  uint8_t u8[6] = {0, 1, 2, 128, 255, 9};
  uint8_t b8[6] = {1, 0, 1, 1, 0, 0};
  const void *data[ATTN_DTYPE_COUNT] = {f32, f16, bf16, i64, i32, i8, u8, b8};
  char name[32];
  for (int d = 0; d < ATTN_DTYPE_COUNT; d++) {
    snprintf(name, sizeof name, "t.%s", attn_dtype_name((attn_dtype)d));
    CHECK_OK(attn_st_add(st, name, (attn_dtype)d, 2, sh, data[d]));
  }
  float scalar = 2.5f;
  int64_t esh[3] = {3, 0, 2};
  CHECK_OK(attn_st_add_f32(st, "scalar", 0, NULL, &scalar));
  CHECK_OK(attn_st_add_f32(st, "empty", 3, esh, NULL));
  CHECK_OK(attn_st_add_f32(st, "we\"ird\\name\n\x01 caf\xc3\xa9", 0, NULL, &scalar));
  CHECK_OK(attn_st_set_meta(st, "config", "{\"d\": 64, \"s\": \"a\\\"b\"}"));
  CHECK_OK(attn_st_set_meta(st, "empty", ""));
  CHECK_OK(attn_st_set_meta(st, "config", "{\"d\": 32}")); /* replaces */
  char path[128];
  snprintf(path, sizeof path, "%s/rt.safetensors", tmpdir);
  CHECK_OK(attn_st_save(st, path));

  attn_st *ld = NULL;
  CHECK_OK(attn_st_load(path, &ld));
  if (!ld) {
    attn_st_free(st);
    return;
  }
  CHECK(attn_st_count(ld) == attn_st_count(st) && attn_st_count(ld) == ATTN_DTYPE_COUNT + 3);
  for (int i = 0; i < attn_st_count(st); i++) {
    CHECK(strcmp(attn_st_name(ld, i), attn_st_name(st, i)) == 0); /* insertion order kept */
    const attn_tensor *a = attn_st_get(st, attn_st_name(st, i));
    const attn_tensor *b = attn_st_get(ld, attn_st_name(st, i));
    CHECK(a && b && a->dtype == b->dtype && a->ndim == b->ndim);
    if (!a || !b) continue;
    CHECK(memcmp(a->shape, b->shape, sizeof a->shape) == 0);
    CHECK(attn_tensor_nbytes(a) == attn_tensor_nbytes(b));
    CHECK(memcmp(a->data, b->data, attn_tensor_nbytes(a)) == 0);
    CHECK(((uintptr_t)b->data & 63) == 0);
  }
  CHECK(attn_st_meta_count(ld) == 2);
  CHECK(attn_st_meta(ld, "config") && strcmp(attn_st_meta(ld, "config"), "{\"d\": 32}") == 0);
  CHECK(attn_st_meta(ld, "empty") && attn_st_meta(ld, "empty")[0] == '\0');
  CHECK(attn_st_meta(ld, "nope") == NULL);
  CHECK(attn_st_get(ld, "scalar")->ndim == 0 && *(float *)attn_st_get(ld, "scalar")->data == 2.5f);
  CHECK(attn_tensor_numel(attn_st_get(ld, "empty")) == 0);

  /* file layout: header length a multiple of 8, data right after */
  size_t len;
  unsigned char *b = read_file(path, &len);
  uint64_t h = 0;
  for (int i = 7; i >= 0; i--) h = (h << 8) | b[i];
  CHECK(h % 8 == 0 && 8 + h <= len);
  CHECK(b[8] == '{');
  /* parsing from memory gives the same */
  attn_st *mem = NULL;
  CHECK_OK(attn_st_parse(b, len, &mem));
  CHECK(attn_st_count(mem) == attn_st_count(st));
  free(b);
  attn_st_free(mem);
  attn_st_free(ld);
  attn_st_free(st);
  unlink(path);
}

static void test_add_replaces_and_validates(void) {
  attn_st *st;
  CHECK_OK(attn_st_new(&st));
  float x[4] = {1, 2, 3, 4};
  int64_t s2[1] = {2}, s4[1] = {4}, neg[1] = {-1};
  CHECK_OK(attn_st_add_f32(st, "a", 1, s2, x));
  CHECK_OK(attn_st_add_f32(st, "b", 1, s2, x));
  CHECK_OK(attn_st_add_f32(st, "a", 1, s4, x)); /* same name: replaced in place */
  CHECK(attn_st_count(st) == 2 && strcmp(attn_st_name(st, 0), "a") == 0);
  CHECK(attn_st_get(st, "a")->shape[0] == 4 && ((float *)attn_st_get(st, "a")->data)[3] == 4);
  CHECK_ERR(attn_st_add_f32(st, "c", 1, neg, x), ATTN_EINVAL);
  CHECK_ERR(attn_st_add_f32(st, "c", 1, s2, NULL), ATTN_EINVAL);
  CHECK_ERR(attn_st_add_f32(st, "__metadata__", 1, s2, x), ATTN_EINVAL);
  CHECK_ERR(attn_st_add_f32(st, "bad\xff", 1, s2, x), ATTN_EINVAL);
  CHECK_ERR(attn_st_add(st, "c", ATTN_DTYPE_COUNT, 1, s2, x), ATTN_EINVAL);
  CHECK_ERR(attn_st_add_f32(st, "c", 9, s2, x), ATTN_EINVAL);

  const attn_tensor *t;
  int64_t want[1] = {4}, any[1] = {-1}, wrong[1] = {3};
  CHECK_OK(attn_st_expect(st, "a", ATTN_F32, 1, want, 1, &t));
  CHECK(t == attn_st_get(st, "a"));
  CHECK_OK(attn_st_expect(st, "a", ATTN_F32, 1, any, 1, &t));
  CHECK_OK(attn_st_expect(st, "a", ATTN_F32, -1, NULL, 1, &t));
  CHECK_OK(attn_st_expect(st, "zz", ATTN_F32, 1, want, 0, &t));
  CHECK(t == NULL);
  CHECK_ERR(attn_st_expect(st, "zz", ATTN_F32, 1, want, 1, &t), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "zz") != NULL);
  CHECK_ERR(attn_st_expect(st, "a", ATTN_F32, 1, wrong, 1, &t), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "'a'") != NULL);
  CHECK_ERR(attn_st_expect(st, "a", ATTN_BF16, 1, want, 1, &t), ATTN_EINVAL);
  CHECK_ERR(attn_st_expect(st, "a", ATTN_F32, 2, NULL, 1, &t), ATTN_EINVAL);
  attn_st_free(st);
}

static void test_reads_file_written_by_torch(void) {
  attn_st *st = NULL;
  CHECK_OK(attn_st_load("tests/golden/st_torch.safetensors", &st));
  if (!st) return;
  CHECK(attn_st_count(st) == 11);
  CHECK(strcmp(attn_st_name(st, 0), "layer.weight") == 0);
  const attn_tensor *t;
  int64_t s23[2] = {2, 3};
  CHECK_OK(attn_st_expect(st, "layer.weight", ATTN_F32, 2, s23, 1, &t));
  for (int i = 0; t && i < 6; i++) CHECK(((float *)t->data)[i] == i * 0.5f - 1);
  CHECK_OK(attn_st_expect(st, "emb.bf16", ATTN_BF16, 1, NULL, 1, &t));
  const float bf[4] = {1.5f, -2.25f, 0.0078125f, -65536.0f};
  for (int i = 0; t && i < 4; i++) CHECK(attn_bf16_to_f32(((uint16_t *)t->data)[i]) == bf[i]);
  CHECK_OK(attn_st_expect(st, "half", ATTN_F16, 2, NULL, 1, &t));
  const float hf[4] = {0.5f, -1.0f, 65504.0f, 0.000061035156f};
  for (int i = 0; t && i < 4; i++) CHECK(attn_f16_to_f32(((uint16_t *)t->data)[i]) == hf[i]);
  CHECK_OK(attn_st_expect(st, "mask", ATTN_BOOL, 1, NULL, 1, &t));
  CHECK(t && memcmp(t->data, "\1\0\1", 3) == 0);
  CHECK_OK(attn_st_expect(st, "ids", ATTN_I64, 1, NULL, 1, &t));
  CHECK(t && ((int64_t *)t->data)[0] == -(1LL << 40) && ((int64_t *)t->data)[1] == 7);
  CHECK(t && ((uintptr_t)t->data & 63) == 0); /* file offset 43, copy aligned */
  CHECK_OK(attn_st_expect(st, "i32", ATTN_I32, 2, NULL, 1, &t));
  CHECK(t && ((int32_t *)t->data)[0] == -5 && ((int32_t *)t->data)[1] == 6);
  CHECK_OK(attn_st_expect(st, "i8", ATTN_I8, 1, NULL, 1, &t));
  CHECK(t && ((int8_t *)t->data)[0] == -128 && ((int8_t *)t->data)[1] == 127);
  CHECK_OK(attn_st_expect(st, "u8", ATTN_U8, 1, NULL, 1, &t));
  CHECK(t && ((uint8_t *)t->data)[1] == 255);
  CHECK_OK(attn_st_expect(st, "scalar", ATTN_F32, 0, NULL, 1, &t));
  CHECK(t && *(float *)t->data == 3.25f);
  int64_t e04[2] = {0, 4};
  CHECK_OK(attn_st_expect(st, "empty", ATTN_F32, 2, e04, 1, &t));
  /* "café 😀 \"q\"" arrives as \u00e9, a surrogate pair and \" escapes */
  CHECK_OK(attn_st_expect(st, "caf\xc3\xa9 \xf0\x9f\x98\x80 \"q\"", ATTN_F32, 1, NULL, 1, &t));
  CHECK(t && *(float *)t->data == 42.0f);
  CHECK(attn_st_meta(st, "format") && strcmp(attn_st_meta(st, "format"), "pt") == 0);
  CHECK(attn_st_meta(st, "note") && strcmp(attn_st_meta(st, "note"), "line\nbreak \xc3\xa9") == 0);
  attn_st_free(st);
}

static void test_rejects_malformed_files(void) {
  /* each must fail with ATTN_EFORMAT and a message */
  const char *ok = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
  CHECK_OK(parse_json(ok, 8));
  CHECK_ERR(parse_json(ok, 4), ATTN_EFORMAT); /* data truncated: offsets out of range */
  CHECK_ERR(parse_json("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", 8),
            ATTN_EFORMAT);
  CHECK(strstr(attn_last_error(), "<memory>") != NULL);
  CHECK_ERR(parse_json("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],}}", 8),
            ATTN_EFORMAT); /* trailing comma */
  CHECK_ERR(parse_json("{\"a\" {}}", 0), ATTN_EFORMAT);
  CHECK_ERR(parse_json("[1,2]", 0), ATTN_EFORMAT);         /* not an object */
  CHECK_ERR(parse_json("{} x", 0), ATTN_EFORMAT);          /* trailing garbage */
  CHECK_ERR(parse_json("{\"a\":01}", 0), ATTN_EFORMAT);    /* leading zero */
  CHECK_ERR(parse_json("{\"a\":\"\\x\"}", 0), ATTN_EFORMAT); /* bad escape */
  CHECK_ERR(parse_json("{\"a\":\"\\ud800\"}", 0), ATTN_EFORMAT); /* lone surrogate */
  CHECK_ERR(parse_json("{\"\xc3\x28\":1}", 0), ATTN_EFORMAT);     /* bad UTF-8 */
  CHECK_ERR(parse_json("{\"a\":\"tab\there\"}", 0), ATTN_EFORMAT); /* raw control char */
  CHECK_ERR(parse_json("{\"a\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8),
            ATTN_EFORMAT);
  CHECK(strstr(attn_last_error(), "'a'") && strstr(attn_last_error(), "F64"));
  CHECK_ERR(parse_json("{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 16),
            ATTN_EFORMAT); /* size mismatch */
  CHECK(strstr(attn_last_error(), "'a'") != NULL);
  CHECK_ERR(parse_json("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 8),
            ATTN_EFORMAT); /* out of range */
  CHECK_ERR(parse_json("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8),
            ATTN_EFORMAT); /* begin > end */
  CHECK_ERR(parse_json("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                       "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                       16),
            ATTN_EFORMAT); /* overlap */
  CHECK(strstr(attn_last_error(), "overlap") != NULL);
  CHECK_ERR(parse_json("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                       "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
                       16),
            ATTN_EFORMAT); /* duplicate name */
  CHECK_ERR(parse_json("{\"__metadata__\":{\"k\":1}}", 0), ATTN_EFORMAT);
  CHECK_ERR(parse_json("{\"__metadata__\":[\"k\"]}", 0), ATTN_EFORMAT);
  CHECK_ERR(parse_json("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,0]}}", 0),
            ATTN_EFORMAT);
  CHECK_ERR(parse_json("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,0]}}", 0),
            ATTN_EFORMAT);
  CHECK_ERR(parse_json("{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8), ATTN_EFORMAT);
  CHECK_ERR(parse_json("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],"
                       "\"data_offsets\":[0,4]}}",
                       4),
            ATTN_EFORMAT); /* rank 9 */
  /* shape product overflows 64 bits */
  CHECK_ERR(parse_json("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],"
                       "\"data_offsets\":[0,0]}}",
                       0),
            ATTN_EFORMAT);
  CHECK_ERR(parse_json("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],"
                       "\"data_offsets\":[0,99999999999999999999999]}}",
                       4),
            ATTN_EFORMAT);
  CHECK_ERR(parse_json("{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                       4),
            ATTN_EFORMAT);
  /* nesting bomb: rejected by the depth limit, no stack overflow */
  char deep[4100];
  strcpy(deep, "{\"a\":");
  for (int i = 0; i < 2000; i++) strcat(deep, "[");
  CHECK_ERR(parse_json(deep, 0), ATTN_EFORMAT);
  CHECK(strstr(attn_last_error(), "nesting") != NULL);

  /* header length: too big for the file, too big absolutely, file shorter than 8 */
  size_t len;
  unsigned char *b = make_bytes(ok, "01234567", 8, &len);
  attn_st *st = NULL;
  b[0] = (unsigned char)(len - 8 + 1);
  CHECK_ERR(attn_st_parse(b, len, &st), ATTN_EFORMAT);
  b[0] = 0;
  b[4] = 1; /* 2^32 */
  CHECK_ERR(attn_st_parse(b, len, &st), ATTN_EFORMAT);
  CHECK_ERR(attn_st_parse(b, 5, &st), ATTN_EFORMAT);
  CHECK_ERR(attn_st_parse(b, 0, &st), ATTN_EFORMAT);
  CHECK(st == NULL);
  free(b);
}

static void test_rejects_truncated_files_on_disk(void) {
  size_t len;
  unsigned char *b = read_file("tests/golden/st_torch.safetensors", &len);
  CHECK(b != NULL);
  if (!b) return;
  char path[128];
  snprintf(path, sizeof path, "%s/trunc.safetensors", tmpdir);
  size_t cuts[] = {0, 3, 8, 9, 100, len - 10, len - 1};
  for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
    write_file(path, b, cuts[i]);
    attn_st *st = NULL;
    CHECK_ERR(attn_st_load(path, &st), ATTN_EFORMAT);
    CHECK(strstr(attn_last_error(), path) != NULL);
    CHECK(st == NULL);
  }
  unlink(path);
  attn_st *st = NULL;
  CHECK_ERR(attn_st_load("tests/golden/does-not-exist.safetensors", &st), ATTN_EIO);
  CHECK_ERR(attn_st_load(tmpdir, &st), ATTN_EIO); /* a directory */
  free(b);
}

static void test_save_is_atomic(void) {
  attn_st *st;
  CHECK_OK(attn_st_new(&st));
  float x[3] = {1, 2, 3};
  int64_t s3[1] = {3};
  CHECK_OK(attn_st_add_f32(st, "x", 1, s3, x));
  char sub[128], path[160];
  snprintf(sub, sizeof sub, "%s/atomic", tmpdir);
  mkdir(sub, 0700);
  snprintf(path, sizeof path, "%s/m.safetensors", sub);
  CHECK_OK(attn_st_save(st, path));
  CHECK_OK(attn_st_save(st, path)); /* overwrite */
  CHECK(dir_entries(sub) == 1);     /* no tmp file left behind */

  char bad[200];
  snprintf(bad, sizeof bad, "%s/no/such/dir/m.safetensors", tmpdir);
  CHECK_ERR(attn_st_save(st, bad), ATTN_EIO);
  CHECK(strstr(attn_last_error(), "no/such/dir") != NULL);

  /* rename onto a directory fails: tmp removed, the directory untouched */
  char dpath[200];
  snprintf(dpath, sizeof dpath, "%s/isdir", sub);
  mkdir(dpath, 0700);
  CHECK_ERR(attn_st_save(st, dpath), ATTN_EIO);
  struct stat sb;
  CHECK(stat(dpath, &sb) == 0 && S_ISDIR(sb.st_mode));
  CHECK(dir_entries(sub) == 2);
  rmdir(dpath);
  unlink(path);
  rmdir(sub);
  attn_st_free(st);
}

/* Flips and truncates bytes of valid files many times: any status is fine as
 * long as it is OK or EFORMAT, nothing crashes and (under ASan) nothing leaks. */
static void test_fuzz_flips_and_truncations(void) {
  size_t len;
  unsigned char *orig = read_file("tests/golden/st_torch.safetensors", &len);
  CHECK(orig != NULL);
  if (!orig) return;
  unsigned char *b = malloc(len);
  unsigned s = 12345;
  int n_ok = 0, n_bad = 0, n_other = 0;
  for (int it = 0; it < 4000; it++) {
    memcpy(b, orig, len);
    size_t n = len;
    s = s * 1664525u + 1013904223u;
    int flips = 1 + (int)((s >> 24) % 4);
    for (int k = 0; k < flips; k++) {
      s = s * 1664525u + 1013904223u;
      size_t at = (s >> 8) % len;
      s = s * 1664525u + 1013904223u;
      /* mostly inside the header where the parser works, sometimes the length */
      if (it % 3 == 0) at = (s >> 8) % 16;
      b[at] = (it % 2) ? (unsigned char)(s >> 16) : (unsigned char)(b[at] ^ (1u << ((s >> 4) & 7)));
    }
    if (it % 5 == 0) {
      s = s * 1664525u + 1013904223u;
      n = (s >> 8) % (len + 1);
    }
    attn_st *st = NULL;
    attn_status r = attn_st_parse(b, n, &st);
    if (r == ATTN_OK) {
      n_ok++;
      for (int i = 0; i < attn_st_count(st); i++) {
        const attn_tensor *t = attn_st_get(st, attn_st_name(st, i));
        if (!t || attn_tensor_nbytes(t) > len) n_other++;
      }
    } else if (r == ATTN_EFORMAT && attn_last_error()[0]) {
      n_bad++;
    } else {
      n_other++;
    }
    attn_st_free(st);
  }
  printf("  fuzz: %d accepted, %d rejected\n", n_ok, n_bad);
  CHECK(n_other == 0);
  CHECK(n_bad > 1000 && n_ok > 10); /* both paths exercised */
  free(b);
  free(orig);
}

/* A write killed half-way leaves PATH.tmp.<pid>; the next save to PATH
 * removes those of processes that no longer run, and only those (a live
 * writer's, another file's, a name that is not <pid> stay). */
static void test_save_removes_stale_temp_files(void) {
  pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, NULL, 0); /* child's pid: no longer running */
  char path[128], dead[160], live[160], other[160], odd[160];
  snprintf(path, sizeof path, "%s/ckpt.safetensors", tmpdir);
  snprintf(dead, sizeof dead, "%s.tmp.%ld", path, (long)child);
  snprintf(live, sizeof live, "%s.tmp.%ld", path, (long)getppid());
  snprintf(other, sizeof other, "%s/other.safetensors.tmp.%ld", tmpdir, (long)child);
  snprintf(odd, sizeof odd, "%s.tmp.%ldx", path, (long)child);
  const char *made[4] = {dead, live, other, odd};
  for (int i = 0; i < 4; i++) write_file(made[i], "partial", 7);
  attn_st *st;
  CHECK_OK(attn_st_new(&st));
  float x = 1;
  int64_t one = 1;
  CHECK_OK(attn_st_add_f32(st, "x", 1, &one, &x));
  CHECK_OK(attn_st_save(st, path));
  attn_st_free(st);
  CHECK(access(dead, F_OK) != 0);
  CHECK(access(live, F_OK) == 0 && access(other, F_OK) == 0 && access(odd, F_OK) == 0);
  for (int i = 0; i < 4; i++) unlink(made[i]);
  unlink(path);
}

/* {"k0":"v","k1":"v",...} with n keys, then `extra` (e.g. a repeated key) */
static char *many_keys(size_t n, const char *extra, size_t *len) {
  size_t cap = n * 20 + 64 + strlen(extra), k = 0;
  char *j = malloc(cap);
  j[k++] = '{';
  for (size_t i = 0; i < n; i++) k += (size_t)snprintf(j + k, cap - k, "%s\"k%zu\":\"v\"", i ? "," : "", i);
  k += (size_t)snprintf(j + k, cap - k, "%s}", extra);
  *len = k;
  return j;
}

/* A header of a million keys is read in near-linear work: the duplicate-key
 * check sorts (it compared each key with all earlier ones: n^2/2, 20k keys
 * took 8.7 s, a million hours) and the reader appends metadata without a
 * lookup per key. The work is counted in key comparisons, not timed. */
static void test_million_keys_near_linear(void) {
  const size_t n = 1000000;
  size_t len;
  char *j = many_keys(n, "", &len);
  json_value *v = NULL;
  char err[200];
  uint64_t c0 = attn_json_key_compares();
  CHECK(attn_json_parse(j, len, &v, err, sizeof err) == 0);
  uint64_t work = attn_json_key_compares() - c0;
  CHECK(v && v->count == n);
  CHECK(work <= 2 * (uint64_t)n * 20); /* ~ n log2 n = 20n; n^2/2 = 500000n before */
  printf("  %zu keys: %llu key comparisons (%.1f per key)\n", n, (unsigned long long)work,
         (double)work / (double)n);
  attn_json_free(v);
  free(j);
  /* as the metadata of a safetensors file: 131072 keys (the reader's limit)
   * are read, a million refused at the limit */
  const size_t counts[2] = {131072, n};
  for (int c = 0; c < 2; c++) {
    j = many_keys(counts[c], "", &len);
    size_t flen;
    char *h = malloc(len + 32), key[32];
    sprintf(h, "{\"__metadata__\":%s}", j);
    unsigned char *b = make_bytes(h, NULL, 0, &flen);
    attn_st *st = NULL;
    if (c == 0) {
      CHECK_OK(attn_st_parse(b, flen, &st));
      CHECK(attn_st_meta_count(st) == (int)counts[c]);
      snprintf(key, sizeof key, "k%zu", counts[c] - 1);
      CHECK(attn_st_meta(st, key) && strcmp(attn_st_meta(st, key), "v") == 0);
      CHECK(attn_st_meta_key(st, 12345) && strcmp(attn_st_meta_key(st, 12345), "k12345") == 0);
    } else {
      CHECK_ERR(attn_st_parse(b, flen, &st), ATTN_EFORMAT);
      CHECK(strstr(attn_last_error(), "more than 131072 items") != NULL);
    }
    attn_st_free(st);
    free(b);
    free(h);
    free(j);
  }
  /* a million tensors: refused at the limit, before a million allocations */
  size_t cap = n * 64, k = 0, flen;
  char *t = malloc(cap);
  t[k++] = '{';
  for (size_t i = 0; i < n; i++)
    k += (size_t)snprintf(t + k, cap - k, "%s\"t%zu\":{\"dtype\":\"F32\",\"shape\":[0],"
                          "\"data_offsets\":[0,0]}", i ? "," : "", i);
  t[k++] = '}', t[k] = '\0';
  unsigned char *b = make_bytes(t, NULL, 0, &flen);
  attn_st *st = NULL;
  CHECK_ERR(attn_st_parse(b, flen, &st), ATTN_EFORMAT);
  CHECK(strstr(attn_last_error(), "more than 131072 items in one object") != NULL);
  free(b);
  free(t);
}

/* The sorted check still finds every duplicate, and reports the first
 * repeated key in text order at its byte offset, in small and large objects. */
static void test_duplicate_keys_are_found(void) {
  json_value *v = NULL;
  char err[200];
  const char *small = "{\"a\":1,\"b\":2,\"a\":3}";
  CHECK(attn_json_parse(small, strlen(small), &v, err, sizeof err) == -1 && !v);
  CHECK(strcmp(err, "duplicate key \"a\" at byte 13") == 0);
  const char *later = "{\"x\":{},\"y\":{\"p\":1,\"p\":2}}";
  CHECK(attn_json_parse(later, strlen(later), &v, err, sizeof err) == -1);
  CHECK(strstr(err, "duplicate key \"p\"") != NULL);
  size_t len;
  for (size_t n = 9; n <= 100000; n *= 10) { /* sorted path; last key repeats the middle one */
    char extra[64], want[96];
    snprintf(extra, sizeof extra, ",\"k%zu\":\"w\"", n / 2);
    char *j = many_keys(n, extra, &len);
    size_t at = len - strlen(extra); /* its quote, after the comma, before the final brace */
    CHECK(attn_json_parse(j, len, &v, err, sizeof err) == -1 && !v);
    snprintf(want, sizeof want, "duplicate key \"k%zu\" at byte %zu", n / 2, at);
    if (strcmp(err, want) != 0) printf("  n = %zu: got '%s', want '%s'\n", n, err, want);
    CHECK(strcmp(err, want) == 0);
    free(j);
    j = many_keys(n, ",\"k3\":0,\"k1\":0", &len); /* two repeats: the first in the text */
    CHECK(attn_json_parse(j, len, &v, err, sizeof err) == -1 && strstr(err, "\"k3\"") != NULL);
    free(j);
    j = many_keys(n, ",\"k\":0,\"K1\":0,\"k10\":0", &len); /* near misses and one repeat */
    int rc = attn_json_parse(j, len, &v, err, sizeof err);
    CHECK(n > 10 ? rc == -1 && strstr(err, "\"k10\"") : rc == 0);
    attn_json_free(v);
    v = NULL;
    free(j);
  }
  CHECK(parse_json("{\"__metadata__\":{\"a\":\"1\",\"a\":\"2\"}}", 0) == ATTN_EFORMAT);
}

/* attn_st_widen: F16 / BF16 become F32 with the same values, kept names
 * and other dtypes are copied as they are, metadata follows. */
static void test_widen_f16_bf16(void) {
  attn_st *a = NULL, *w = NULL;
  CHECK_OK(attn_st_new(&a));
  const float vals[4] = {1.5f, -0.0078125f, 65504.0f, -3.0f}; 
  uint16_t h[4], b[4];
  for (int i = 0; i < 4; i++) h[i] = attn_f32_to_f16(vals[i]), b[i] = attn_f32_to_bf16(vals[i]);
  int64_t four = 4;
  int32_t ints[4] = {1, 2, 3, 4};
  CHECK_OK(attn_st_add(a, "h", ATTN_F16, 1, &four, h));
  CHECK_OK(attn_st_add(a, "b", ATTN_BF16, 1, &four, b));
  CHECK_OK(attn_st_add(a, "kept", ATTN_BF16, 1, &four, b));
  CHECK_OK(attn_st_add(a, "i", ATTN_I32, 1, &four, ints));
  CHECK_OK(attn_st_set_meta(a, "k", "v"));
  CHECK_OK(attn_st_widen(a, (const char *const[]){"kept", NULL}, &w));
  const attn_tensor *th = w ? attn_st_get(w, "h") : NULL, *tb = w ? attn_st_get(w, "b") : NULL;
  CHECK(th && th->dtype == ATTN_F32 && tb && tb->dtype == ATTN_F32);
  for (int i = 0; th && tb && i < 4; i++) {
    CHECK(((float *)th->data)[i] == attn_f16_to_f32(h[i]));
    CHECK(((float *)tb->data)[i] == attn_bf16_to_f32(b[i]));
  }
  CHECK(w && attn_st_get(w, "kept")->dtype == ATTN_BF16 && attn_st_get(w, "i")->dtype == ATTN_I32);
  CHECK(w && !strcmp(attn_st_meta(w, "k"), "v") && attn_st_count(w) == 4);
  CHECK_ERR(attn_st_widen(NULL, NULL, &w), ATTN_EINVAL);
  attn_st_free(a);
  attn_st_free(w);
}

int main(void) {
  make_tmpdir();
  RUN(test_round_trip_every_dtype);
  RUN(test_add_replaces_and_validates);
  RUN(test_reads_file_written_by_torch);
  RUN(test_rejects_malformed_files);
  RUN(test_widen_f16_bf16);
  RUN(test_rejects_truncated_files_on_disk);
  RUN(test_save_is_atomic);
  RUN(test_fuzz_flips_and_truncations);
  RUN(test_save_removes_stale_temp_files);
  RUN(test_million_keys_near_linear);
  RUN(test_duplicate_keys_are_found);
  rmdir(tmpdir);
  HARNESS_END();
}
