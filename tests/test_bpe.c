/* Byte-level BPE: pre-tokenisation, known merges, tie-breaking, round trips,
 * determinism, save/load, truncation, errors. */
#include "harness.h"

#include "apps/text/bpe.h"
#include "apps/text/bpe_internal.h"

static attn_bpe *train(const char *const *texts, int n, int vocab, int min_count) {
  size_t lens[16];
  for (int i = 0; i < n; i++) lens[i] = strlen(texts[i]);
  attn_bpe_config cfg;
  attn_bpe_config_default(&cfg);
  cfg.vocab_size = vocab;
  cfg.min_count = min_count;
  attn_bpe *b = NULL;
  CHECK_OK(attn_bpe_train(texts, lens, n, &cfg, &b));
  return b;
}

static char *saved(const attn_bpe *b) {
  char *s = NULL;
  CHECK_OK(attn_bpe_save(b, &s));
  return s;
}

/* A few KB of English-like mail text with numbers, punctuation, UTF-8. */
static const char *corpus[] = {
    "Subject: Re: the meeting tomorrow\nFrom: Alice <alice@example.com>\n\nHi Bob, the meeting is "
    "at 10:30 tomorrow in room 4. Please bring the report and the numbers for 2002.\n",
    "Subject: FREE money!!! Click here now\nFrom: winner@spam.example\n\nYou have been selected "
    "to receive $1,000,000. Click here: http://spam.example/claim now! Limited offer!!!\n",
    "Subject: Caf\xc3\xa9 menu\n\nCr\xc3\xa8me br\xc3\xbbl\xc3\xa9" "e, caf\xc3\xa9 au lait, "
    "na\xc3\xafve r\xc3\xa9sum\xc3\xa9. \xe2\x82\xac" "5 each \xe2\x80\x94 thank you.\n",
    "The the the meeting meeting report report numbers numbers here here click click now now.\n",
};

static void test_pretokenizer_chunks(void) {
  const char *s = "Hello  world!!\n\n 123abc\xc3\xa9t\xc3\xa9 x";
  const char *want[] = {"Hello", " ", " world", "!!", "\n\n", " 123", "abc\xc3\xa9t\xc3\xa9", " x"};
  size_t n = strlen(s), i = 0;
  int k = 0;
  while (i < n && k < 8) {
    size_t e = attn_bpe_chunk_end((const unsigned char *)s, n, i, 64);
    if (e - i != strlen(want[k]) || memcmp(s + i, want[k], e - i)) {
      printf("  chunk %d: got '%.*s', want '%s'\n", k, (int)(e - i), s + i, want[k]);
      h_case_failed = 1;
    }
    i = e;
    k++;
  }
  CHECK(i == n && k == 8);
  /* long runs are cut at max_chunk */
  char run[100];
  memset(run, 'a', sizeof run);
  CHECK(attn_bpe_chunk_end((const unsigned char *)run, sizeof run, 0, 64) == 64);
  CHECK(attn_bpe_chunk_end((const unsigned char *)run, sizeof run, 64, 64) == 100);
}

static void test_known_tiny_corpus_merges(void) {
  const char *texts[] = {"ab ab ab abc"};
  /* chunks: "ab", " ab" x2, " abc"; (a,b) occurs 4 times, then (" ", ab) 3 times,
   * then (" ab", c) once. */
  attn_bpe *b = train(texts, 1, 1000, 1);
  if (!b) return;
  char *s = saved(b);
  CHECK(s && !strcmp(s, "attn-bpe 1\nmax_chunk 64\nmerges 3\n100 101\n35 259\n260 102\n"));
  size_t len;
  const char *t = attn_bpe_token(b, 261, &len);
  CHECK(t && len == 4 && !memcmp(t, " abc", 4));
  int32_t ids[16];
  size_t n;
  CHECK_OK(attn_bpe_encode(b, "ab abc ab", 9, ids, 16, &n));
  CHECK(n == 3 && ids[0] == 259 && ids[1] == 261 && ids[2] == 260);
  free(s);
  attn_bpe_free(b);
  /* min_count 2 (the default) stops before the single (" ab", c) */
  b = train(texts, 1, 1000, 2);
  CHECK(b && attn_bpe_n_merges(b) == 2);
  attn_bpe_free(b);
}

static void test_ties_break_lexicographically(void) {
  /* every pair occurs once: (" ", a) < (a, b) < (x, y) by bytes; then (" a", b) */
  const char *texts[] = {"xy ab"};
  attn_bpe *b = train(texts, 1, ATTN_BPE_MERGE0 + 2, 1);
  if (!b) return;
  char *s = saved(b);
  CHECK(s && !strcmp(s, "attn-bpe 1\nmax_chunk 64\nmerges 2\n35 100\n259 101\n"));
  free(s);
  attn_bpe_free(b);
  /* input order does not matter, only counts and bytes */
  const char *t2[] = {"ba", "ab", "ab", "ba"};
  const char *t3[] = {"ab", "ba", "ba", "ab"};
  attn_bpe *b2 = train(t2, 4, ATTN_BPE_MERGE0 + 1, 1), *b3 = train(t3, 4, ATTN_BPE_MERGE0 + 1, 1);
  char *s2 = b2 ? saved(b2) : NULL, *s3 = b3 ? saved(b3) : NULL;
  CHECK(s2 && s3 && !strcmp(s2, s3) && strstr(s2, "\n100 101\n")); /* "ab" < "ba" */
  free(s2);
  free(s3);
  attn_bpe_free(b2);
  attn_bpe_free(b3);
}

static int round_trips(const attn_bpe *b, const char *s, size_t n) {
  int32_t *ids = NULL;
  size_t m = 0, len = 0;
  char *back = NULL;
  int ok = attn_bpe_encode_alloc(b, s, n, &ids, &m) == ATTN_OK &&
           attn_bpe_decode(b, ids, m, &back, &len) == ATTN_OK && len == n && !memcmp(back, s, n);
  for (size_t i = 0; ok && i < m; i++) ok = ids[i] >= ATTN_BPE_BYTE0 && ids[i] < attn_bpe_vocab_size(b);
  free(ids);
  free(back);
  return ok;
}


/* Plain reference trainer: recounts every pair after every merge (slow, obviously right). */
typedef struct {
  int32_t sym[64];
  int len;
} ref_word;

static int ref_train(const char *const *texts, const size_t *lens, int n, int vocab, int min_count,
                     int32_t *merges) {
  static ref_word words[4096];
  static char tok[1024][64];
  static int tlen[1024];
  int nw = 0, nm = 0;
  for (int b = 0; b < 256; b++) {
    tok[ATTN_BPE_BYTE0 + b][0] = (char)b;
    tlen[ATTN_BPE_BYTE0 + b] = 1;
  }
  for (int i = 0; i < n; i++)
    for (size_t at = 0; at < lens[i];) {
      size_t e = attn_bpe_chunk_end((const unsigned char *)texts[i], lens[i], at, 64);
      words[nw].len = (int)(e - at);
      for (size_t k = at; k < e; k++) words[nw].sym[k - at] = ATTN_BPE_BYTE0 + (unsigned char)texts[i][k];
      nw++;
      at = e;
    }
  while (ATTN_BPE_MERGE0 + nm < vocab) {
    static int32_t pl[8192], pr[8192];
    static long pc[8192];
    int np = 0;
    for (int w = 0; w < nw; w++)
      for (int i = 0; i + 1 < words[w].len; i++) {
        int k = 0;
        while (k < np && !(pl[k] == words[w].sym[i] && pr[k] == words[w].sym[i + 1])) k++;
        if (k == np) pl[np] = words[w].sym[i], pr[np] = words[w].sym[i + 1], pc[np++] = 0;
        pc[k]++;
      }
    int best = -1;
    for (int k = 0; k < np; k++) {
      if (best < 0 || pc[k] > pc[best]) {
        best = k;
        continue;
      }
      if (pc[k] < pc[best]) continue;
      /* tie: smaller (left bytes, right bytes) */
      int a = pl[k], b = pl[best], c = memcmp(tok[a], tok[b], (size_t)(tlen[a] < tlen[b] ? tlen[a] : tlen[b]));
      if (!c) c = (tlen[a] > tlen[b]) - (tlen[a] < tlen[b]);
      if (!c) {
        a = pr[k], b = pr[best];
        c = memcmp(tok[a], tok[b], (size_t)(tlen[a] < tlen[b] ? tlen[a] : tlen[b]));
        if (!c) c = (tlen[a] > tlen[b]) - (tlen[a] < tlen[b]);
      }
      if (c < 0) best = k;
    }
    if (best < 0 || pc[best] < min_count) break;
    int32_t l = pl[best], r = pr[best], id = ATTN_BPE_MERGE0 + nm;
    memcpy(tok[id], tok[l], (size_t)tlen[l]);
    memcpy(tok[id] + tlen[l], tok[r], (size_t)tlen[r]);
    tlen[id] = tlen[l] + tlen[r];
    merges[2 * nm] = l;
    merges[2 * nm + 1] = r;
    nm++;
    for (int w = 0; w < nw; w++) {
      int o = 0;
      for (int i = 0; i < words[w].len; i++) {
        if (i + 1 < words[w].len && words[w].sym[i] == l && words[w].sym[i + 1] == r) {
          words[w].sym[o++] = id;
          i++;
        } else {
          words[w].sym[o++] = words[w].sym[i];
        }
      }
      words[w].len = o;
    }
  }
  return nm;
}

/* The incremental trainer (heap + pair index) learns exactly the reference's
 * merges on small random corpora full of ties and runs like "aaaa". */
static void test_trainer_matches_reference(void) {
  const char alphabet[] = "aab  c\nd.a";
  unsigned s = 2024;
  for (int trial = 0; trial < 30; trial++) {
    char buf[6][160];
    const char *texts[6];
    size_t lens[6];
    for (int i = 0; i < 6; i++) {
      s = s * 1664525u + 1013904223u;
      lens[i] = (s >> 8) % 150;
      for (size_t k = 0; k < lens[i]; k++) {
        s = s * 1664525u + 1013904223u;
        buf[i][k] = alphabet[(s >> 8) % (sizeof alphabet - 1)];
      }
      texts[i] = buf[i];
    }
    int vocab = ATTN_BPE_MERGE0 + 5 + trial * 3, min_count = 1 + trial % 3;
    int32_t want[2 * 200];
    int nm = ref_train(texts, lens, 6, vocab, min_count, want);
    attn_bpe_config cfg;
    attn_bpe_config_default(&cfg);
    cfg.vocab_size = vocab;
    cfg.min_count = min_count;
    attn_bpe *b = NULL;
    CHECK_OK(attn_bpe_train(texts, lens, 6, &cfg, &b));
    if (!b) return;
    int same = attn_bpe_n_merges(b) == nm && !memcmp(b->merges, want, (size_t)nm * 2 * sizeof *want);
    if (!same) printf("  trial %d: %d merges, reference %d\n", trial, attn_bpe_n_merges(b), nm);
    CHECK(same);
    attn_bpe_free(b);
  }
}

static void test_round_trip_random_bytes_and_utf8(void) {
  attn_bpe *b = train(corpus, 4, 600, 1);
  if (!b) return;
  CHECK(attn_bpe_n_merges(b) > 100);
  unsigned s = 7;
  char buf[3000];
  int bad = 0;
  for (int trial = 0; trial < 200; trial++) {
    size_t n = (size_t)(trial * 13 % 3000);
    for (size_t i = 0; i < n; i++) {
      s = s * 1664525u + 1013904223u;
      /* mix of arbitrary bytes and corpus-like text so merges apply */
      buf[i] = (trial & 1) ? (char)(s >> 24) : corpus[trial % 4][(s >> 8) % strlen(corpus[trial % 4])];
    }
    if (!round_trips(b, buf, n)) bad++;
  }
  CHECK(bad == 0);
  for (int i = 0; i < 4; i++) CHECK(round_trips(b, corpus[i], strlen(corpus[i])));
  const char nul[] = "a\0b\0\0\xff\xfe";
  CHECK(round_trips(b, nul, sizeof nul - 1));
  CHECK(round_trips(b, "", 0));
  /* the merges compress the text they were learned from */
  int32_t *ids;
  size_t m;
  CHECK_OK(attn_bpe_encode_alloc(b, corpus[0], strlen(corpus[0]), &ids, &m));
  CHECK(m * 2 < strlen(corpus[0]));
  free(ids);
  /* every token's bytes are its two parts' bytes */
  for (int k = 0; k < attn_bpe_n_merges(b); k++) {
    const attn_bpe *bb = b;
    size_t lt, ll, lr;
    const char *t = attn_bpe_token(bb, ATTN_BPE_MERGE0 + k, &lt);
    const char *l = attn_bpe_token(bb, bb->merges[2 * k], &ll);
    const char *r = attn_bpe_token(bb, bb->merges[2 * k + 1], &lr);
    if (lt != ll + lr || memcmp(t, l, ll) || memcmp(t + ll, r, lr)) bad++;
  }
  CHECK(bad == 0);
  attn_bpe_free(b);
}

static void test_deterministic_and_save_load_equal(void) {
  attn_bpe *a = train(corpus, 4, 500, 1), *b = train(corpus, 4, 500, 1);
  if (!a || !b) return;
  char *sa = saved(a), *sb = saved(b);
  CHECK(sa && sb && !strcmp(sa, sb));
  attn_bpe *c = NULL;
  CHECK_OK(attn_bpe_load(sa, &c));
  if (c) {
    char *sc = saved(c);
    CHECK(sc && !strcmp(sa, sc));
    free(sc);
    CHECK(attn_bpe_vocab_size(c) == attn_bpe_vocab_size(a));
    for (int i = 0; i < 4; i++) {
      int32_t x[4096], y[4096];
      size_t nx, ny;
      CHECK_OK(attn_bpe_encode(a, corpus[i], strlen(corpus[i]), x, 4096, &nx));
      CHECK_OK(attn_bpe_encode(c, corpus[i], strlen(corpus[i]), y, 4096, &ny));
      CHECK(nx == ny && !memcmp(x, y, nx * sizeof *x));
    }
  }
  free(sa);
  free(sb);
  attn_bpe_free(a);
  attn_bpe_free(b);
  attn_bpe_free(c);
}


static void test_encode_many_matches_encode_any_thread_count(void) {
  attn_bpe *b = train(corpus, 4, 500, 1);
  if (!b) return;
  const char *texts[5] = {corpus[0], corpus[1], "", corpus[2], corpus[3]};
  size_t lens[5];
  for (int i = 0; i < 5; i++) lens[i] = strlen(texts[i]);
  for (int threads = 1; threads <= 2; threads++) {
    attn_set_num_threads(threads);
    for (size_t max_tokens = 0; max_tokens <= 20; max_tokens += 20) {
      int32_t *ids[5];
      size_t n_ids[5];
      CHECK_OK(attn_bpe_encode_many(b, texts, lens, 5, max_tokens, ids, n_ids));
      for (int i = 0; i < 5; i++) {
        int32_t want[4096];
        size_t nw;
        CHECK_OK(attn_bpe_encode(b, texts[i], lens[i], want, max_tokens ? max_tokens : 4096, &nw));
        CHECK(n_ids[i] == nw && (nw == 0 || !memcmp(ids[i], want, nw * sizeof *want)));
        if (max_tokens) CHECK(n_ids[i] <= max_tokens);
        free(ids[i]);
      }
    }
  }
  attn_set_num_threads(0);
  int32_t *ids[1];
  size_t n_ids[1];
  const char *null_text[1] = {NULL};
  size_t one[1] = {1};
  CHECK_ERR(attn_bpe_encode_many(b, null_text, one, 1, 0, ids, n_ids), ATTN_EINVAL);
  attn_bpe_free(b);
}

static void test_truncation_and_specials(void) {
  attn_bpe *b = train(corpus, 4, 400, 1);
  if (!b) return;
  int32_t full[4096], part[10];
  size_t nf, np;
  CHECK_OK(attn_bpe_encode(b, corpus[1], strlen(corpus[1]), full, 4096, &nf));
  CHECK_OK(attn_bpe_encode(b, corpus[1], strlen(corpus[1]), part, 10, &np));
  CHECK(nf > 10 && np == 10 && !memcmp(full, part, sizeof part));
  int32_t with_specials[] = {ATTN_BPE_CLS, ATTN_BPE_BYTE0 + 'h', ATTN_BPE_BYTE0 + 'i', ATTN_BPE_PAD,
                             ATTN_BPE_SEP};
  char *out;
  size_t len;
  CHECK_OK(attn_bpe_decode(b, with_specials, 5, &out, &len));
  CHECK(len == 2 && !strcmp(out, "hi"));
  free(out);
  int32_t bad_id[] = {attn_bpe_vocab_size(b)};
  CHECK_ERR(attn_bpe_decode(b, bad_id, 1, &out, &len), ATTN_EINVAL);
  bad_id[0] = -1;
  CHECK_ERR(attn_bpe_decode(b, bad_id, 1, &out, &len), ATTN_EINVAL);
  attn_bpe_free(b);
}

static void test_errors(void) {
  attn_bpe *b = NULL;
  attn_bpe_config cfg;
  attn_bpe_config_default(&cfg);
  const char *t[] = {"x"};
  size_t l[] = {1};
  cfg.vocab_size = 100;
  CHECK_ERR(attn_bpe_train(t, l, 1, &cfg, &b), ATTN_EINVAL);
  cfg.vocab_size = 300;
  cfg.max_chunk = 1;
  CHECK_ERR(attn_bpe_train(t, l, 1, &cfg, &b), ATTN_EINVAL);
  CHECK_ERR(attn_bpe_train(NULL, l, 1, NULL, &b), ATTN_EINVAL);
  CHECK(b == NULL);
  CHECK_ERR(attn_bpe_load("attn-bpe 2\n", &b), ATTN_EFORMAT);
  CHECK_ERR(attn_bpe_load("attn-bpe 1\nmax_chunk 64\nmerges 1\n100 259\n", &b), ATTN_EFORMAT); /* 259 undefined */
  CHECK_ERR(attn_bpe_load("attn-bpe 1\nmax_chunk 64\nmerges 1\n100 101\nextra", &b), ATTN_EFORMAT);
  CHECK_ERR(attn_bpe_load("attn-bpe 1\nmax_chunk 64\nmerges 2\n100 101\n", &b), ATTN_EFORMAT);
  CHECK_ERR(attn_bpe_load("attn-bpe 1\nmax_chunk 64\nmerges 2\n100 101\n100 101\n", &b), ATTN_EFORMAT);
  CHECK_ERR(attn_bpe_load("attn-bpe 1\nmax_chunk 64\nmerges 1\n0 101\n", &b), ATTN_EFORMAT); /* special */
  CHECK(b == NULL);
  CHECK_OK(attn_bpe_load("attn-bpe 1\nmax_chunk 64\nmerges 0\n", &b));
  CHECK(b && attn_bpe_vocab_size(b) == ATTN_BPE_MERGE0);
  attn_bpe_free(b);
  /* no training text: bytes only */
  CHECK_OK(attn_bpe_train(NULL, NULL, 0, NULL, &b));
  CHECK(b && attn_bpe_n_merges(b) == 0 && round_trips(b, "abc", 3));
  attn_bpe_free(b);
}

int main(void) {
  RUN(test_pretokenizer_chunks);
  RUN(test_known_tiny_corpus_merges);
  RUN(test_ties_break_lexicographically);
  RUN(test_trainer_matches_reference);
  RUN(test_round_trip_random_bytes_and_utf8);
  RUN(test_deterministic_and_save_load_equal);
  RUN(test_encode_many_matches_encode_any_thread_count);
  RUN(test_truncation_and_specials);
  RUN(test_errors);
  HARNESS_END();
}
