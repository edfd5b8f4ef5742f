/* GPT-2's byte-level BPE (apps/text/gpt2_bpe.h) against the ids of the
 * reference encoder (tools/gpt2_bpe_ref.py, OpenAI's encoder.py algorithm)
 * on a small trained vocabulary in both file forms
 * (tests/golden/gpt2_tokenizer), and on the real GPT-2 vocabulary when
 * tools/fetch_gpt2_tokenizer.sh has fetched it; the heap merge order against
 * a plain min-rank loop on random text; exact round trips of any bytes; the
 * pre-tokenizer's chunks; clear errors for malformed files. */
#include <sys/stat.h>
#include <unistd.h>

#include "apps/text/gpt2_bpe.h"
#include "apps/text/gpt2_bpe_internal.h"
#include "harness.h"
#include "io/json.h"

#define DIR "tests/golden/gpt2_tokenizer"
#define REAL_DIR "data/gpt2-tokenizer"

static char tmpdir[64];

static attn_gpt2_bpe *load_vocab_merges(const char *dir) {
  char vp[512], mp[512];
  snprintf(vp, sizeof vp, "%s/vocab.json", dir);
  snprintf(mp, sizeof mp, "%s/merges.txt", dir);
  long vn = 0, mn = 0;
  char *v = read_whole_file(vp, &vn), *m = read_whole_file(mp, &mn);
  attn_gpt2_bpe *t = NULL;
  CHECK(v && m);
  if (v && m) CHECK_OK(attn_gpt2_bpe_from_vocab_merges(v, (size_t)vn, m, (size_t)mn, vp, mp, &t));
  free(v);
  free(m);
  return t;
}

/* every case of a cases.json: the ids, and decoding gives the text back */
static void check_cases(const attn_gpt2_bpe *t, const char *path) {
  long n = 0;
  char *text = read_whole_file(path, &n);
  json_value *cases = NULL;
  char err[128];
  CHECK(text && attn_json_parse(text, (size_t)n, &cases, err, sizeof err) == 0);
  int compared = 0;
  for (size_t c = 0; cases && t && c < cases->count; c++) {
    const json_value *s = attn_json_get(&cases->items[c], "text");
    const json_value *want = attn_json_get(&cases->items[c], "ids");
    int32_t *ids = NULL;
    size_t k = 0;
    CHECK_OK(attn_gpt2_bpe_encode(t, s->str, s->str_len, &ids, &k));
    int same = k == want->count;
    for (size_t i = 0; same && i < k; i++)
      same = ids[i] == (int32_t)want->items[i].uint;
    if (!same) printf("  case %zu ('%.40s'): %zu ids, expected %zu\n", c, s->str, k, want->count);
    CHECK(same);
    char *back = NULL;
    size_t bl = 0;
    CHECK_OK(attn_gpt2_bpe_decode(t, ids, k, &back, &bl));
    CHECK(back && bl == s->str_len && !memcmp(back, s->str, bl));
    free(back);
    free(ids);
    compared++;
  }
  CHECK(compared >= 28);
  attn_json_free(cases);
  free(text);
}

static void test_vocab_merges_match_reference(void) {
  attn_gpt2_bpe *t = load_vocab_merges(DIR);
  CHECK(t && attn_gpt2_bpe_vocab_size(t) == 457 && attn_gpt2_bpe_n_merges(t) == 200);
  CHECK(attn_gpt2_bpe_id(t, "<|endoftext|>") == 456);
  check_cases(t, DIR "/cases.json");
  attn_gpt2_bpe_free(t);
}

static void test_tokenizer_json_matches_reference(void) {
  attn_gpt2_bpe *t = NULL;
  CHECK_OK(attn_gpt2_bpe_load_dir(DIR, &t)); /* tokenizer.json, [left, right] merges */
  CHECK(t && attn_gpt2_bpe_vocab_size(t) == 457 && attn_gpt2_bpe_n_merges(t) == 200);
  size_t len = 0;
  const char *eos = attn_gpt2_bpe_token(t, 456, &len);
  CHECK(eos && len == 13 && !memcmp(eos, "<|endoftext|>", 13));
  check_cases(t, DIR "/cases.json");
  attn_gpt2_bpe_free(t);
}

/* the real GPT-2 vocabulary (50,257 tokens, 50,000 merges), when fetched */
static void test_real_gpt2_vocabulary(void) {
  struct stat sb;
  if (stat(REAL_DIR "/vocab.json", &sb)) {
    SKIP("no %s (sh tools/fetch_gpt2_tokenizer.sh fetches it)", REAL_DIR);
    return;
  }
  attn_gpt2_bpe *t = load_vocab_merges(REAL_DIR);
  CHECK(t && attn_gpt2_bpe_vocab_size(t) == 50257 && attn_gpt2_bpe_n_merges(t) == 50000);
  CHECK(attn_gpt2_bpe_id(t, "<|endoftext|>") == 50256 && attn_gpt2_bpe_id(t, "Ġthe") == 262);
  check_cases(t, DIR "/real_cases.json");
  attn_gpt2_bpe_free(t);
}

/* the chunks of s, '|'-joined */
static void chunks(const char *s, char *out, size_t cap) {
  size_t n = strlen(s), k = 0;
  for (size_t i = 0; i < n;) {
    size_t j = attn_gpt2_pretok_next(s, n, i);
    if (i && k + 1 < cap) out[k++] = '|';
    for (size_t c = i; c < j && k + 1 < cap; c++)
      out[k++] = s[c];
    i = j;
  }
  out[k] = 0;
}

static void test_pretokenizer_chunks(void) {
  static const char *const cases[][2] = {
      {"it's done", "it|'s| done"},
      {"they'll'LL", "they|'ll|'|LL"},
      {"a  b", "a| | b"},
      {"x   \n\ny", "x|   \n|\n|y"},
      {"end  ", "end|  "},
      {" 123abc!!", " 123|abc|!!"},
      {"\t x", "\t| x"},
      {"caf\xc3\xa9 na\xc3\xafve", "caf\xc3\xa9| na\xc3\xafve"},
      {"a\xffz", "a|\xff|z"},         /* an invalid byte: one "other" character */
      {"x\xc2\xa0y", "x|\xc2\xa0|y"}, /* NBSP is \s */
      {"\xe2\x85\xab"
       "7",
       "\xe2\x85\xab"
       "7"}, /* Ⅻ and 7 are both \p{N} */
      {"  ", "  "},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char got[128];
    chunks(cases[i][0], got, sizeof got);
    if (strcmp(got, cases[i][1]))
      printf("  '%s': '%s', expected '%s'\n", cases[i][0], got, cases[i][1]);
    CHECK(!strcmp(got, cases[i][1]));
  }
}

/* the plain algorithm: in each chunk, the lowest-rank adjacent pair, every
 * occurrence left to right, until none is a merge */
static size_t plain_encode(const attn_gpt2_bpe *t, const char *s, size_t n, int32_t *out) {
  size_t k = 0;
  int32_t *sym = malloc((n + 1) * sizeof *sym);
  for (size_t i = 0; i < n;) {
    size_t j = attn_gpt2_pretok_next(s, n, i), m = 0;
    for (size_t c = i; c < j; c++)
      sym[m++] = t->byte_id[(unsigned char)s[c]];
    for (;;) {
      int32_t best = -1;
      for (size_t p = 0; p + 1 < m; p++) {
        int32_t r =
            attn_u64map_get(&t->ranks, (uint64_t)(uint32_t)sym[p] << 32 | (uint32_t)sym[p + 1]);
        if (r >= 0 && (best < 0 || r < best)) best = r;
      }
      if (best < 0) break;
      size_t w = 0;
      for (size_t p = 0; p < m; p++) {
        int32_t r = p + 1 < m ? attn_u64map_get(&t->ranks, (uint64_t)(uint32_t)sym[p] << 32 |
                                                               (uint32_t)sym[p + 1])
                              : -1;
        if (r == best) {
          sym[w++] = t->merged[best];
          p++;
        } else {
          sym[w++] = sym[p];
        }
      }
      m = w;
    }
    for (size_t p = 0; p < m; p++)
      out[k++] = sym[p];
    i = j;
  }
  free(sym);
  return k;
}

static void test_heap_merges_equal_plain_loop(void) {
  attn_gpt2_bpe *t = load_vocab_merges(DIR);
  if (!t) return;
  /* pieces of the training text's words, spaces, digits, UTF-8 and bad bytes */
  static const char *const pieces[] = {
      "the", "e",  "th",       " ",        "  ",   "re", "at", "ion", "s",  "'s", "n't", "1",
      "99",  "\n", "\xc3\xa9", "\xce\xb5", "\xff", "aa", "a",  "ll",  "ee", "..", "!"};
  const size_t np = sizeof pieces / sizeof pieces[0];
  unsigned seed = 12345;
  int differ = 0;
  for (int trial = 0; trial < 2000; trial++) {
    char buf[256];
    size_t n = 0;
    int parts = 1 + trial % 40;
    for (int p = 0; p < parts; p++) {
      seed = seed * 1664525u + 1013904223u;
      const char *piece = pieces[(seed >> 16) % np];
      size_t l = strlen(piece);
      if (n + l >= sizeof buf) break;
      memcpy(buf + n, piece, l);
      n += l;
    }
    int32_t *ids = NULL, want[256];
    size_t k = 0;
    CHECK_OK(attn_gpt2_bpe_encode(t, buf, n, &ids, &k));
    size_t wk = plain_encode(t, buf, n, want);
    if (k != wk || (k && memcmp(ids, want, k * sizeof *ids))) differ++;
    char *back = NULL;
    size_t bl = 0;
    CHECK_OK(attn_gpt2_bpe_decode(t, ids, k, &back, &bl));
    CHECK(back && bl == n && !memcmp(back, buf, n));
    free(back);
    free(ids);
  }
  if (differ) printf("  %d of 2000 texts encoded unlike the plain loop\n", differ);
  CHECK(differ == 0);
  attn_gpt2_bpe_free(t);
}

static void test_any_bytes_round_trip(void) {
  attn_gpt2_bpe *t = load_vocab_merges(DIR);
  if (!t) return;
  unsigned seed = 7;
  for (int trial = 0; trial < 300; trial++) {
    unsigned char buf[300];
    size_t n = (size_t)trial % sizeof buf;
    for (size_t i = 0; i < n; i++) {
      seed = seed * 1664525u + 1013904223u;
      buf[i] = trial % 3 ? (unsigned char)(seed >> 24)
                         : (unsigned char)" ae\n'\xc3\xa9"[(seed >> 24) % 7];
    }
    int32_t *ids = NULL;
    size_t k = 0;
    CHECK_OK(attn_gpt2_bpe_encode(t, (const char *)buf, n, &ids, &k));
    char *back = NULL;
    size_t bl = 0;
    CHECK_OK(attn_gpt2_bpe_decode(t, ids, k, &back, &bl));
    CHECK(k <= n && back && bl == n && !memcmp(back, buf, n));
    free(back);
    free(ids);
  }
  attn_gpt2_bpe_free(t);
}

static void test_add_prefix_space(void) {
  long n = 0;
  char *text = read_whole_file(DIR "/tokenizer.json", &n);
  CHECK(text);
  if (!text) return;
  char *at = strstr(text, "\"add_prefix_space\": false");
  CHECK(at);
  attn_gpt2_bpe *plain = NULL, *prefixed = NULL;
  CHECK_OK(attn_gpt2_bpe_from_tokenizer_json(text, (size_t)n, NULL, &plain));
  if (at) memcpy(at + 20, "true ", 5); /* "false" -> "true " (JSON allows the space) */
  CHECK_OK(attn_gpt2_bpe_from_tokenizer_json(text, (size_t)n, NULL, &prefixed));
  int32_t *a = NULL, *b = NULL, *c = NULL;
  size_t na = 0, nb = 0, nc = 0;
  CHECK_OK(attn_gpt2_bpe_encode(prefixed, "Hello world", 11, &a, &na));
  CHECK_OK(attn_gpt2_bpe_encode(plain, " Hello world", 12, &b, &nb));
  CHECK_OK(attn_gpt2_bpe_encode(prefixed, " Hello world", 12, &c, &nc)); /* no second space */
  CHECK(na && na == nb && nb == nc && !memcmp(a, b, na * sizeof *a) &&
        !memcmp(b, c, nb * sizeof *b));
  free(a);
  free(b);
  free(c);
  attn_gpt2_bpe_free(plain);
  attn_gpt2_bpe_free(prefixed);
  free(text);
}

static attn_status from_strings(const char *vocab, const char *merges, attn_gpt2_bpe **t) {
  return attn_gpt2_bpe_from_vocab_merges(vocab, strlen(vocab), merges, strlen(merges), NULL, NULL,
                                         t);
}

static void check_message(const char *needle) {
  const char *m = attn_last_error();
  if (!strstr(m, needle)) printf("  message '%s' lacks '%s'\n", m, needle);
  CHECK(strstr(m, needle) != NULL);
}

static void test_errors(void) {
  attn_gpt2_bpe *t = NULL;
  CHECK_ERR(from_strings("{\"a\": 0, \"b\": 1, \"ab\": 2}", "a c\n", &t), ATTN_EFORMAT);
  check_message("merge 1 ('a c'): its right part is not in the vocabulary");
  CHECK_ERR(from_strings("{\"a\": 0, \"b\": 1}", "#version: 0.2\na b\n", &t), ATTN_EFORMAT);
  check_message("the merged token is not in the vocabulary");
  CHECK_ERR(from_strings("{\"a\": 0, \"b\": 0}", "", &t), ATTN_EFORMAT);
  check_message("id 0 is given to two tokens");
  CHECK_ERR(from_strings("{\"a\": -1}", "", &t), ATTN_EFORMAT);
  check_message("token 'a' has no id");
  CHECK_ERR(from_strings("{\"a\": 90000}", "", &t), ATTN_EFORMAT);
  CHECK_ERR(from_strings("[1, 2]", "", &t), ATTN_EFORMAT);
  CHECK_ERR(from_strings("{\"a\": 0", "", &t), ATTN_EFORMAT);
  CHECK_ERR(from_strings("{\"a\": 0, \"b\": 1, \"ab\": 2}", "a b c\n", &t), ATTN_EFORMAT);
  check_message("is not 'LEFT RIGHT'");
  CHECK(t == NULL);
  /* a byte without a token: encoding says which */
  CHECK_OK(from_strings("{\"a\": 0, \"b\": 1, \"ab\": 2}", "a b\n", &t));
  int32_t *ids = NULL;
  size_t k = 0;
  CHECK_OK(attn_gpt2_bpe_encode(t, "abab", 4, &ids, &k));
  CHECK(k == 2 && ids[0] == 2 && ids[1] == 2);
  free(ids);
  ids = NULL;
  CHECK_ERR(attn_gpt2_bpe_encode(t, "abc", 3, &ids, &k), ATTN_EINVAL);
  check_message("byte 0x63 has no token");
  CHECK(ids == NULL);
  char *out = NULL;
  int32_t bad[2] = {0, 3};
  CHECK_ERR(attn_gpt2_bpe_decode(t, bad, 2, &out, NULL), ATTN_EINVAL);
  check_message("id 3 at 1 is not in the vocabulary");
  CHECK(out == NULL);
  attn_gpt2_bpe_free(t);
  t = NULL;
  /* tokenizer.json that is not GPT-2's kind */
  static const char wp[] = "{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}}, "
                           "\"pre_tokenizer\": {\"type\": \"ByteLevel\"}}";
  CHECK_ERR(attn_gpt2_bpe_from_tokenizer_json(wp, strlen(wp), "t.json", &t), ATTN_EUNSUPPORTED);
  check_message("model type 'WordPiece' is not BPE");
  static const char ws[] =
      "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, "
      "\"pre_tokenizer\": {\"type\": \"Whitespace\"}}";
  CHECK_ERR(attn_gpt2_bpe_from_tokenizer_json(ws, strlen(ws), "t.json", &t), ATTN_EUNSUPPORTED);
  check_message("not ByteLevel");
  static const char seq[] =
      "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [7]}, "
      "\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": "
      "[{\"type\": \"ByteLevel\"}]}}";
  CHECK_ERR(attn_gpt2_bpe_from_tokenizer_json(seq, strlen(seq), "t.json", &t), ATTN_EFORMAT);
  check_message("merge 1 is neither");
  CHECK(t == NULL);
  CHECK_ERR(attn_gpt2_bpe_load_dir(tmpdir, &t), ATTN_EIO);
  check_message("neither tokenizer.json nor vocab.json + merges.txt");
}

/* without tokenizer.json the directory's vocab.json + merges.txt */
static void test_load_dir_fallback(void) {
  char cmd[512];
  snprintf(cmd, sizeof cmd, "cp " DIR "/vocab.json " DIR "/merges.txt '%s'/", tmpdir);
  CHECK(system(cmd) == 0);
  attn_gpt2_bpe *t = NULL;
  CHECK_OK(attn_gpt2_bpe_load_dir(tmpdir, &t));
  CHECK(t && attn_gpt2_bpe_n_merges(t) == 200);
  if (t) check_cases(t, DIR "/cases.json");
  attn_gpt2_bpe_free(t);
}

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/attn_gpt2tok_XXXXXX");
  if (!mkdtemp(tmpdir)) {
    printf("mkdtemp failed\n");
    return 1;
  }
  RUN(test_vocab_merges_match_reference);
  RUN(test_tokenizer_json_matches_reference);
  RUN(test_real_gpt2_vocabulary);
  RUN(test_pretokenizer_chunks);
  RUN(test_heap_merges_equal_plain_loop);
  RUN(test_any_bytes_round_trip);
  RUN(test_add_prefix_space);
  RUN(test_errors);
  RUN(test_load_dir_fallback);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  if (system(cmd) != 0) printf("  could not remove %s\n", tmpdir);
  HARNESS_END();
}
