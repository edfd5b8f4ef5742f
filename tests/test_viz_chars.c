/* Tokens read as text in attention pictures (apps/text/token_chars.h,
 * attn_viz_merge_f32): the labels of tokens that cut a UTF-8 character
 * (most Chinese characters and every emoji under a byte-level BPE) show the
 * character, '·' where it is cut; stray bytes stay \xNN; the units of the
 * chars and words views; the merged matrix against a hand-computed one and
 * its rows summing to 1; the token bytes' metadata form; and, drawn, a
 * split character's label region in a PNG equal to a rendering of the
 * character itself, its glyph outline in an SVG, its text in the HTML page
 * in headless Chromium. */
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apps/classifier/classifier.h"
#include "apps/classifier/classifier_viz.h"
#include "apps/classifier/classifier_viz_message.h"
#include "apps/text/bpe.h"
#include "apps/text/token_chars.h"
#include "apps/viz/viz.h"
#include "apps/viz/viz_internal.h"
#include "chromium.h"
#include "harness.h"
#include "viz_png.h"

#ifdef ATTN_HAVE_CAIRO
#include <cairo-svg.h>
#include <pango/pangocairo.h>
#endif
#ifdef ATTN_HAVE_FONTCONFIG
#include <fontconfig/fontconfig.h>
#endif

/* fontconfig keeps a few process-wide allocations; cairo 1.16 leaks per
 * CID-keyed CFF font (Noto Sans CJK) subset into a PDF (as in test_viz_text) */
__attribute__((used)) const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) {
  return "leak:libfontconfig.so\nleak:cairo_surface_finish\n";
}
__attribute__((used)) const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "fast_unwind_on_malloc=0"; }

static char OUT_DIR[64] = "/tmp/attn_test_viz_chars.XXXXXX";

static const char *out_path(const char *name) {
  static char buf[320];
  snprintf(buf, sizeof buf, "%s/%.200s", OUT_DIR, name);
  return buf;
}

#define DOT "\xC2\xB7"           /* U+00B7, where a token cuts a character */
#define HUI "\xE4\xBC\x9A"       /* 会 */
#define YI "\xE8\xAE\xAE"        /* 议 */
#define PARTY "\xF0\x9F\x8E\x89" /* 🎉 */

/* Token bytes from NUL-terminated strings (an empty string: a token of no
 * bytes); brk may be NULL. */
static void make_tokens(attn_tok_bytes *t, const char *const *tok, int n,
                        const unsigned char *brk) {
  size_t len[64];
  for (int i = 0; i < n; i++)
    len[i] = strlen(tok[i]);
  CHECK_OK(attn_tok_bytes_make(t, tok, len, n, brk));
}

static void free_labels(char **lab, int64_t n) {
  if (!lab) return;
  for (int64_t i = 0; i < n; i++)
    free(lab[i]);
  free(lab);
}

/* labels of tok [n] (with breaks brk) equal want [n] */
static void check_labels(const char *const *tok, int n, const unsigned char *brk, int max_chars,
                         const char *const *want) {
  attn_tok_bytes t;
  make_tokens(&t, tok, n, brk);
  char **lab = NULL;
  CHECK_OK(attn_tok_char_labels(&t, max_chars, &lab));
  for (int i = 0; lab && i < n; i++)
    if (strcmp(lab[i], want[i])) {
      printf("  token %d: label '%s', want '%s'\n", i, lab[i], want[i]);
      h_case_failed = 1;
    }
  free_labels(lab, n);
  attn_tok_bytes_free(&t);
}

static void test_labels_by_character(void) {
  /* 会 E4 BC 9A, 议 E8 AE AE, 🎉 F0 9F 8E 89 cut over tokens as a byte-level
   * BPE cuts them; a token may end one character and start the next */
  const char *tok[] = {"Hi",
                       " \xE4\xBC",
                       "\x9A\xE8\xAE",
                       "\xAE",
                       "!",
                       "\xF0",
                       "\x9F\x8E",
                       "\x89",
                       "\xE4\xBC",
                       "A",
                       "\x9A",
                       "",
                       "\xE4",
                       "\xBC\x9A"
                       "\xE8\xAE\xAE"};
  const char *want[] = {"Hi",
                        "\xE2\x90\xA3" HUI DOT,
                        DOT HUI YI DOT,
                        DOT YI,
                        "!",
                        PARTY DOT,
                        DOT PARTY DOT,
                        DOT PARTY,
                        "\\xE4\\xBC",
                        "A",
                        "\\x9A", /* not UTF-8 where they are: escaped */
                        "[pad]",
                        HUI DOT,
                        DOT HUI YI};
  check_labels(tok, 14, NULL, 0, want);
  /* a break (a long message's cut): nothing is read across it */
  const char *cut[] = {"a", "\xE8\xAE", "\xAE", "b"};
  const unsigned char brk[] = {0, 0, 1, 0};
  const char *want_cut[] = {"a", "\\xE8\\xAE", "\\xAE", "b"};
  const char *want_whole[] = {"a", YI DOT, DOT YI, "b"};
  check_labels(cut, 4, brk, 0, want_cut);
  check_labels(cut, 4, NULL, 0, want_whole);
  /* long labels: max_chars - 1 characters and an ellipsis; controls escaped */
  const char *lng[] = {"abcdefghijklmnopqrstuvwxyz", "\t\n\x01"};
  const char *want_lng[] = {"abcdefghijklmno\xE2\x80\xA6", "\xE2\x87\xA5\xE2\x86\xB5\\x01"};
  check_labels(lng, 2, NULL, 16, want_lng);
}

/* the units of tok [n] of kind: labels want [nu] */
static void check_units(const char *const *tok, int n, attn_unit_kind kind, const char *const *want,
                        int nu, attn_tok_units *keep) {
  attn_tok_bytes t;
  make_tokens(&t, tok, n, NULL);
  attn_tok_units u;
  CHECK_OK(attn_tok_units_make(&t, kind, 0, &u));
  if (u.n_units != nu) {
    printf("  %d units, want %d:", (int)u.n_units, nu);
    for (int64_t i = 0; i < u.n_units; i++)
      printf(" '%s'", u.labels[i]);
    printf("\n");
    h_case_failed = 1;
  }
  for (int i = 0; i < nu && i < u.n_units; i++)
    if (strcmp(u.labels[i], want[i])) {
      printf("  unit %d: '%s', want '%s'\n", i, u.labels[i], want[i]);
      h_case_failed = 1;
    }
  for (int64_t i = 0; i < u.n_tokens; i++) { /* each token's shares add up to 1 */
    double s = 0;
    for (int64_t p = u.off[i]; p < u.off[i + 1]; p++)
      s += u.share[p];
    CHECK(fabs(s - 1) < 1e-6);
  }
  if (keep)
    *keep = u;
  else
    attn_tok_units_free(&u);
  attn_tok_bytes_free(&t);
}

/* Token piece p of u is (unit, share). */
static int piece_is(const attn_tok_units *u, int64_t p, int64_t unit, double share) {
  return u->unit[p] == unit && fabs(u->share[p] - share) < 1e-7;
}

/* The small case of the merge test: Hi ␣会 议 ! in five tokens. */
static const char *const HAND[] = {"Hi", " \xE4\xBC", "\x9A\xE8\xAE", "\xAE", "!"};

static void test_units_of_a_small_case(void) {
  attn_tok_units u;
  const char *words[] = {"Hi", HUI, YI, "!"};
  check_units(HAND, 5, ATTN_UNITS_WORDS, words, 4, &u);
  if (u.n_units == 4) { /* token 2 holds 1 byte of 会 and 2 of 议 */
    CHECK(u.off[5] == 6 && piece_is(&u, 0, 0, 1) && piece_is(&u, 1, 1, 1));
    CHECK(piece_is(&u, 2, 1, 1.0 / 3) && piece_is(&u, 3, 2, 2.0 / 3));
    CHECK(piece_is(&u, 4, 2, 1) && piece_is(&u, 5, 3, 1));
  }
  attn_tok_units_free(&u);
  const char *chars[] = {"H", "i", "\xE2\x90\xA3", HUI, YI, "!"};
  check_units(HAND, 5, ATTN_UNITS_CHARS, chars, 6, &u);
  if (u.n_units == 6) /* token 1: the space (1 of 3 bytes) and 会 (2 of 3) */
    CHECK(u.off[2] == 4 && piece_is(&u, 2, 2, 1.0 / 3) && piece_is(&u, 3, 3, 2.0 / 3));
  attn_tok_units_free(&u);
}

/* The words of a text cut into one token per byte (the units do not depend
 * on where the tokens are cut, only on the text). */
static void check_words(const char *text, const char *const *want, int nu) {
  const char *tok[64];
  char bytes[64][2];
  int n = (int)strlen(text);
  for (int i = 0; i < n && i < 64; i++)
    bytes[i][0] = text[i], bytes[i][1] = 0, tok[i] = bytes[i];
  CHECK(n <= 64);
  check_units(tok, n < 64 ? n : 64, ATTN_UNITS_WORDS, want, nu, NULL);
}

static void test_word_rules(void) {
  /* whitespace between words; punctuation its own unit, a run of one mark one */
  const char *a[] = {"Hi", "team", ",", "don", "'", "t", "...", "!", "?"};
  check_words("Hi team, don't...!?", a, 9);
  /* each CJK character a word; emoji its own unit, a ZWJ sequence one */
  const char *b[] = {"Meeting",
                     "会",
                     "议",
                     "记",
                     "录",
                     PARTY PARTY,
                     "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9",
                     "\xE3\x80\x82"};
  check_words("Meeting \xE4\xBC\x9A\xE8\xAE\xAE\xE8\xAE\xB0\xE5\xBD\x95 " PARTY PARTY
              " \xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE3\x80\x82",
              b, 8);
  /* a combining mark stays in its word; Hangul words are space-separated;
   * whitespace joins the next unit (trailing: the last); a stray byte is a
   * word's */
  const char *c[] = {
      "e\xCC\x81t\xC3\xA9", "\xEC\x95\x88\xEB\x85\x95", "----", "end", "\\xFF", "ok"};
  check_words("e\xCC\x81t\xC3\xA9 \xEC\x95\x88\xEB\x85\x95 ----\n\n end \xFF ok  ", c, 6);
  const char *d[] = {"\xE2\x90\xA3\xE2\x90\xA3\xE2\x86\xB5"}; /* whitespace alone: one unit */
  check_words("  \n", d, 1);
}

/* 5 tokens (HAND) x 5: each row sums to 1 */
static const float A5[25] = {0.5f, 0.2f, 0.1f,  0.1f,  0.1f, 0.1f, 0.4f, 0.3f, 0.1f,
                             0.1f, 0.2f, 0.2f,  0.2f,  0.2f, 0.2f, 0.0f, 0.0f, 0.3f,
                             0.6f, 0.1f, 0.25f, 0.25f, 0.0f, 0.0f, 0.5f};

static void test_merge_against_a_hand_computed_case(void) {
  /* units Hi, 会, 议, !; token 2 is 1/3 会 and 2/3 议.
   * keys: K[i] = (a0, a1 + a2/3, 2 a2/3 + a3, a4)
   *   K0 = (1/2, 7/30, 1/6, 1/10)   K1 = (1/10, 1/2, 3/10, 1/10)
   *   K2 = (1/5, 4/15, 1/3, 1/5)    K3 = (0, 1/10, 4/5, 1/10)   K4 = (1/4, 1/4, 0, 1/2)
   * queries: Hi = K0; 会 = (1 K1 + 1/3 K2) / (4/3) = 3/4 K1 + 1/4 K2;
   *   议 = (2/3 K2 + 1 K3) / (5/3) = 2/5 K2 + 3/5 K3; ! = K4 */
  const double want[16] = {1.0 / 2,    7.0 / 30, 1.0 / 6,  1.0 / 10, 1.0 / 8,   53.0 / 120,
                           37.0 / 120, 1.0 / 8,  2.0 / 25, 1.0 / 6,  46.0 / 75, 7.0 / 50,
                           1.0 / 4,    1.0 / 4,  0,        1.0 / 2};
  attn_tok_bytes t;
  make_tokens(&t, HAND, 5, NULL);
  attn_tok_units u;
  CHECK_OK(attn_tok_units_make(&t, ATTN_UNITS_WORDS, 0, &u));
  float *m = NULL, two[50];
  memcpy(two, A5, sizeof A5), memcpy(two + 25, A5, sizeof A5); /* two matrices, same answer */
  CHECK_OK(attn_viz_merge_f32(two, 2, 5, 5, &u, &u, &m));
  if (m) {
    float w[32];
    for (int i = 0; i < 32; i++)
      w[i] = (float)want[i % 16];
    CHECK_CLOSE("merged", m, w, 32, 1e-6, 1e-6);
  }
  free(m);
  /* one axis merged, the other left as tokens */
  CHECK_OK(attn_viz_merge_f32(A5, 1, 5, 5, NULL, &u, &m));
  if (m) CHECK(fabs(m[1 * 4 + 1] - 0.5) < 1e-6 && fabs(m[2 * 4 + 2] - 1.0 / 3) < 1e-6);
  free(m);
  /* wrong sizes, a NaN: refused */
  CHECK_ERR(attn_viz_merge_f32(A5, 1, 4, 4, &u, &u, &m), ATTN_EINVAL);
  float bad[25];
  memcpy(bad, A5, sizeof bad);
  bad[7] = NAN;
  CHECK_ERR(attn_viz_merge_f32(bad, 1, 5, 5, &u, &u, &m), ATTN_ENUMERIC);
  CHECK(m == NULL);
  attn_tok_units_free(&u);
  attn_tok_bytes_free(&t);
}

/* The bilingual note cut into byte-level tokens of 1-4 bytes at places a
 * fixed LCG picks (cutting characters anywhere), an empty token and a break
 * among them. */
static const char NOTE[] = "Meeting notes \xE4\xBC\x9A\xE8\xAE\xAE\xE8\xAE\xB0\xE5\xBD\x95 " PARTY
                           "\nHi team, \xE6\x88\x91\xE4\xBB\xAC\xE5\x9C\xA8\xE4\xBC\x9A\xE8\xAE"
                           "\xAE\xE4\xB8\x8A\xE3\x80\x82 See you " PARTY PARTY "!\n";

static int cut_note(const char **tok, size_t *len, unsigned char *brk, int cap) {
  size_t n = sizeof NOTE - 1, at = 0;
  unsigned s = 12345;
  int k = 0;
  while (at < n && k < cap - 1) {
    s = s * 1103515245u + 12345u;
    size_t l = 1 + (s >> 16) % 4;
    if (l > n - at) l = n - at;
    tok[k] = NOTE + at, len[k] = l, brk[k] = 0, k++;
    at += l;
    if (k == 7) tok[k] = NULL, len[k] = 0, brk[k] = 0, k++; /* a token of no bytes */
  }
  brk[k / 2] = 1;
  return k;
}

static void test_merged_rows_sum_to_one(void) {
  const char *tok[256];
  size_t len[256];
  unsigned char brk[256];
  int n = cut_note(tok, len, brk, 256);
  attn_tok_bytes t;
  CHECK_OK(attn_tok_bytes_make(&t, tok, len, n, brk));
  enum { M = 3 };
  float *p = malloc(sizeof(float) * M * (size_t)(n * n));
  if (!p) return;
  fill_uniform(p, M * n * n, 7, 0.0f, 1.0f);
  for (int r = 0; r < M * n; r++) { /* softmax-like rows: positive, summing to 1 */
    double s = 0;
    for (int j = 0; j < n; j++)
      s += p[r * n + j] = p[r * n + j] * p[r * n + j];
    for (int j = 0; j < n; j++)
      p[r * n + j] = (float)(p[r * n + j] / s);
  }
  for (int kind = ATTN_UNITS_CHARS; kind <= ATTN_UNITS_WORDS; kind++) {
    attn_tok_units u;
    float *m = NULL;
    CHECK_OK(attn_tok_units_make(&t, (attn_unit_kind)kind, 0, &u));
    CHECK_OK(attn_viz_merge_f32(p, M, n, n, &u, &u, &m));
    double worst = 0;
    int64_t U = u.n_units, neg = 0;
    for (int64_t r = 0; m && r < M * U; r++) {
      double s = 0;
      for (int64_t v = 0; v < U; v++)
        s += m[r * U + v], neg += m[r * U + v] < 0;
      worst = fmax(worst, fabs(s - 1));
    }
    printf("  %s: %d tokens -> %lld units, largest |row sum - 1| %.2g\n",
           attn_unit_kind_noun((attn_unit_kind)kind), n, (long long)U, worst);
    CHECK(m && worst < 1e-5 && neg == 0 && U > 10 && (kind == ATTN_UNITS_CHARS || U < n));
    free(m);
    attn_tok_units_free(&u);
  }
  free(p);
  attn_tok_bytes_free(&t);
  /* tokens that are each one character: merging into characters changes nothing */
  const char *whole[] = {"a", HUI, " ", PARTY};
  attn_tok_bytes w;
  make_tokens(&w, whole, 4, NULL);
  attn_tok_units u;
  float q[16], *m = NULL;
  fill_uniform(q, 16, 3, 0.0f, 0.5f);
  CHECK_OK(attn_tok_units_make(&w, ATTN_UNITS_CHARS, 0, &u));
  CHECK_OK(attn_viz_merge_f32(q, 1, 4, 4, &u, &u, &m));
  if (m) CHECK(!memcmp(m, q, sizeof q));
  free(m);
  attn_tok_units_free(&u);
  attn_tok_bytes_free(&w);
}

static void test_token_bytes_metadata(void) {
  const char *tok[] = {"Hi", "\xE4\xBC", "", "\x9A"};
  const unsigned char brk[] = {0, 0, 0, 1};
  attn_tok_bytes t, back;
  make_tokens(&t, tok, 4, brk);
  char *json = NULL, *breaks = NULL;
  CHECK_OK(attn_tok_bytes_to_json(&t, &json, &breaks));
  CHECK(json && !strcmp(json, "[\"4869\",\"e4bc\",\"\",\"9a\"]") && breaks && !strcmp(breaks, "3"));
  CHECK_OK(attn_tok_bytes_from_json(json, breaks, NULL, &back));
  CHECK(back.n == 4 && back.off[4] == 5 && !memcmp(back.data, t.data, 5) && back.brk &&
        back.brk[3] && !back.brk[1]);
  attn_tok_bytes_free(&back);
  const char *bad[] = {"", "[\"4\"]", "[\"zz\"]", "[1]", "[\"41\",]", "[\"41\"] x"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CHECK_ERR(attn_tok_bytes_from_json(bad[i], NULL, "metadata 'token_bytes'", &back),
              ATTN_EFORMAT);
    CHECK(strstr(attn_last_error(), "metadata 'token_bytes'") != NULL);
  }
  const char *bad_breaks[] = {"x", "4", "1,", "-1"};
  for (size_t i = 0; i < sizeof bad_breaks / sizeof bad_breaks[0]; i++)
    CHECK_ERR(attn_tok_bytes_from_json(json, bad_breaks[i], NULL, &back), ATTN_EFORMAT);
  attn_unit_kind k;
  CHECK_ERR(attn_unit_kind_from_name("sentences", &k), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "'sentences' is not chars or words") != NULL);
  free(json), free(breaks);
  attn_tok_bytes_free(&t);
}

/* ------------------------------------------------------------------------ */
/* Drawn: a byte-level classifier's own message. */

/* The note's attention under a tiny classifier whose tokenizer learned only
 * ASCII, so that every byte of 会议记录 and 🎉 is a token of its own. */
static int note_attention(attn_clf_msg_attn *a) {
  static const char ascii[] = "Meeting notes for the team, see you at the meeting\n";
  const char *texts[1] = {ascii};
  size_t lens[1] = {sizeof ascii - 1};
  attn_bpe *bpe = NULL;
  attn_clf m;
  memset(&m, 0, sizeof m);
  memset(a, 0, sizeof *a);
  CHECK_OK(attn_bpe_train(texts, lens, 1, NULL, &bpe));
  if (!bpe) return 0;
  attn_clf_config c;
  attn_clf_config_default(&c);
  c.vocab = attn_bpe_vocab_size(bpe);
  c.d_model = 8, c.heads = 2, c.ff = 16, c.layers = 1, c.max_len = 64;
  int32_t ids[64];
  size_t n = 0;
  CHECK_OK(attn_clf_create(&m, &c));
  CHECK_OK(attn_clf_init(&m, 5));
  CHECK_OK(attn_bpe_encode(bpe, NOTE, 40, ids, 64, &n)); /* "Meeting notes 会议记录 🎉\nHi" */
  if (!h_case_failed) CHECK_OK(attn_clf_msg_attention(&m, bpe, ids, (int64_t)n, 0, a));
  attn_clf_free(&m);
  attn_bpe_free(bpe);
  return !h_case_failed;
}

/* Index of the label s in a's tokens, or -1. */
static int64_t label_index(char *const *lab, int64_t n, const char *s) {
  for (int64_t i = 0; i < n; i++)
    if (!strcmp(lab[i], s)) return i;
  return -1;
}

static void test_message_labels_show_the_characters(void) {
  attn_clf_msg_attn a;
  if (!note_attention(&a)) return;
  /* 会 E4 BC 9A over three tokens; 🎉 over four */
  int64_t h = label_index(a.tokens, a.n, HUI DOT);
  CHECK(h > 0 && h + 2 < a.n);
  if (h > 0 && h + 2 < a.n)
    CHECK(!strcmp(a.tokens[h + 1], DOT HUI DOT) && !strcmp(a.tokens[h + 2], DOT HUI));
  int64_t e = label_index(a.tokens, a.n, PARTY DOT);
  CHECK(e > 0 && e + 3 < a.n && !strcmp(a.tokens[e + 3], DOT PARTY));
  for (int64_t i = 0; i < a.n; i++)
    CHECK(!strstr(a.tokens[i], "\\x"));
  attn_clf_msg_attn_free(&a);
}

#ifdef ATTN_HAVE_CAIRO
#ifdef ATTN_HAVE_FONTCONFIG
static int installed_font_has(uint32_t cp) {
  FcPattern *p = FcPatternCreate();
  FcCharSet *cs = FcCharSetCreate();
  FcObjectSet *os = FcObjectSetBuild(FC_FAMILY, (char *)0);
  FcCharSetAddChar(cs, cp);
  FcPatternAddCharSet(p, FC_CHARSET, cs);
  FcFontSet *fs = FcFontList(NULL, p, os);
  int n = fs ? fs->nfont : 0;
  if (fs) FcFontSetDestroy(fs);
  FcObjectSetDestroy(os);
  FcCharSetDestroy(cs);
  FcPatternDestroy(p);
  return n > 0;
}
#endif

/* NULL when fonts for 会 and 🎉 are installed, else what to install. */
static const char *missing_fonts(void) {
#ifdef ATTN_HAVE_FONTCONFIG
  if (!installed_font_has(0x4F1A))
    return "no CJK font installed (tools/deps.sh: fonts-noto-cjk, or fonts-wqy-microhei)";
  if (!installed_font_has(0x1F389))
    return "no emoji font installed (tools/deps.sh: fonts-noto-color-emoji)";
  return NULL;
#else
  return "built without fontconfig: cannot tell which fonts are installed";
#endif
}

/* s laid out in the pictures' fonts at size px (viz_text.c's families). */
static PangoLayout *layout(cairo_t *cr, const char *s, double px) {
  PangoLayout *l = pango_cairo_create_layout(cr);
  PangoFontDescription *d = pango_font_description_new();
  pango_font_description_set_family(d, VIZ_FONT_FAMILIES);
  pango_font_description_set_absolute_size(d, px * PANGO_SCALE);
  pango_layout_set_font_description(l, d);
  pango_font_description_free(d);
  pango_layout_set_text(l, s, -1);
  return l;
}

/* The note of a label drawn down the left (not rotated: as wide as its text). */
static const viz_text_note *down_note(const viz_text_note *notes, int nn, const char *text) {
  for (int k = 0; k < nn; k++)
    if (!strcmp(notes[k].text, text) && fabs((notes[k].y1 - notes[k].y0) - notes[k].height) < 0.5)
      return &notes[k];
  return NULL;
}

/* Share of the pixels of box [x0, x1) x [y0, y1) that differ (a channel by
 * more than 40) between img and ref; *ink: those of img that are not white. */
static double differ(const png_image *img, cairo_surface_t *ref, double x0, double y0, double x1,
                     double y1, long *ink) {
  const unsigned char *d = cairo_image_surface_get_data(ref);
  int stride = cairo_image_surface_get_stride(ref);
  long n = 0, bad = 0;
  *ink = 0;
  for (int y = (int)floor(y0); y < (int)ceil(y1) && y < img->h; y++)
    for (int x = (int)floor(x0); x < (int)ceil(x1) && x < img->w; x++) {
      uint32_t a = px(img, x, y), b = *(const uint32_t *)(d + y * stride + x * 4) & 0xffffffu;
      int diff = 0;
      for (int s = 0; s < 24; s += 8)
        diff |= abs((int)((a >> s) & 255) - (int)((b >> s) & 255)) > 40;
      n++, bad += diff, *ink += a != 0xffffffu;
    }
  return n ? (double)bad / (double)n : 1.0;
}

/* The region of the label "C·" (the first token of a cut character C) in
 * the PNG against C drawn alone at the same place and size, and against
 * C's bytes as escapes (what the labels were): a match with the first, not
 * the second. */
static void check_region(const png_image *img, const viz_text_note *nt, const char *ch,
                         const char *escaped) {
  cairo_surface_t *ref = cairo_image_surface_create(CAIRO_FORMAT_RGB24, img->w, img->h);
  cairo_t *cr = cairo_create(ref);
  double px_size = nt->size; /* the label's font size */
  PangoRectangle lg, lg_label;
  CHECK(px_size >= VIZ_LABEL_FONT_MIN);
  double sim[2] = {1, 1};
  long ink[2] = {0, 0};
  const char *what[2] = {ch, escaped};
  for (int k = 0; k < 2 && px_size > 0; k++) {
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    PangoLayout *full = layout(cr, nt->text, px_size), *l = layout(cr, what[k], px_size);
    PangoLayout *alone = layout(cr, ch, px_size);
    pango_layout_get_pixel_extents(full, NULL, &lg_label);
    pango_layout_get_pixel_extents(alone, NULL, &lg);
    /* the label's layout had its logical box's corner at the note's */
    cairo_move_to(cr, nt->x0 - lg_label.x, nt->y0 - lg_label.y);
    pango_cairo_show_layout(cr, l);
    cairo_surface_flush(ref);
    /* compared where the character is: the label's start, its width */
    sim[k] = differ(img, ref, nt->x0, nt->y0, nt->x0 + lg.width, nt->y1, &ink[k]);
    g_object_unref(full);
    g_object_unref(l);
    g_object_unref(alone);
  }
  printf("  label '%s' (%.4g px): %.1f %% of its glyph's pixels differ from '%s' drawn alone, "
         "%.1f %% from '%s'; %ld ink pixels\n",
         nt->text, px_size, 100 * sim[0], ch, 100 * sim[1], escaped, ink[0]);
  CHECK(nt->unknown == 0 && ink[0] >= 20);
  CHECK(sim[0] <= 0.02 && sim[1] >= 0.10);
  cairo_destroy(cr);
  cairo_surface_destroy(ref);
}

static void test_split_characters_drawn_as_glyphs_in_png(void) {
  const char *why = missing_fonts();
  if (why) {
    SKIP("%s", why);
    return;
  }
  attn_clf_msg_attn a;
  if (!note_attention(&a)) return;
  static viz_text_note notes[512];
  viz_text_notes(notes, 512);
  const char *const *lab = (const char *const *)a.tokens;
  CHECK_OK(attn_viz_heatmap_f32(out_path("note.png"), a.probs, a.n, a.n, lab, lab, NULL));
  int nn = viz_text_notes_count(), unknown = 0;
  viz_text_notes(NULL, 0);
  for (int k = 0; k < nn; k++)
    unknown += notes[k].unknown;
  CHECK(unknown == 0);
  png_image img;
  CHECK(png_load(out_path("note.png"), &img));
  const viz_text_note *hui = down_note(notes, nn, HUI DOT),
                      *party = down_note(notes, nn, PARTY DOT);
  CHECK(hui && party);
  if (img.s && hui) check_region(&img, hui, HUI, "\\xE4\\xBC\\x9A");
  if (img.s && party) check_region(&img, party, PARTY, "\\xF0\\x9F\\x8E\\x89");
  if (img.s) cairo_surface_destroy(img.s);
  attn_clf_msg_attn_free(&a);
}

/* The <path d="..."> outlines of the glyphs an SVG defines, one string. */
static char *glyph_outlines(const char *svg) {
  size_t cap = strlen(svg) + 1, n = 0;
  char *out = malloc(cap);
  if (!out) return NULL;
  out[0] = 0;
  for (const char *p = svg; (p = strstr(p, "<symbol")); p++) {
    const char *end = strstr(p, "</symbol>"), *d = strstr(p, " d=\"");
    if (!end || !d || d > end) continue;
    const char *q = strchr(d + 4, '"');
    if (!q || q - d - 4 < 8) continue; /* an empty glyph (a space) */
    n += (size_t)snprintf(out + n, cap - n, "%.*s\n", (int)(q - d - 4), d + 4);
  }
  return out;
}

/* ch drawn alone at px into an SVG: its glyph outlines (or, a colour emoji,
 * its bitmap's data) */
static char *reference_svg(const char *ch, double px, const char *name) {
  cairo_surface_t *s = cairo_svg_surface_create(out_path(name), 100, 100);
  cairo_t *cr = cairo_create(s);
  PangoLayout *l = layout(cr, ch, px);
  cairo_move_to(cr, 10, 10);
  pango_cairo_show_layout(cr, l);
  g_object_unref(l);
  cairo_destroy(cr);
  cairo_surface_destroy(s);
  return read_whole_file(out_path(name), NULL);
}

/* The base64 data of the first <image> of an SVG (malloc'd) or NULL. */
static char *image_data(const char *svg) {
  const char *p = svg ? strstr(svg, "base64,") : NULL, *q = p ? strchr(p, '"') : NULL;
  if (!q) return NULL;
  char *out = malloc((size_t)(q - p) + 1);
  if (out) memcpy(out, p, (size_t)(q - p)), out[q - p] = 0;
  return out;
}

static void test_split_characters_drawn_as_glyphs_in_svg_and_pdf(void) {
  const char *why = missing_fonts();
  if (why) {
    SKIP("%s", why);
    return;
  }
  attn_clf_msg_attn a;
  if (!note_attention(&a)) return;
  const char *const *lab = (const char *const *)a.tokens;
  attn_viz_opts o;
  attn_viz_opts_default(&o);
  o.max_labels = 200; /* every label drawn */
  static viz_text_note notes[512];
  viz_text_notes(notes, 512);
  CHECK_OK(attn_viz_heatmap_f32(out_path("note.svg"), a.probs, a.n, a.n, lab, lab, &o));
  int nn = viz_text_notes_count();
  viz_text_notes(NULL, 0);
  const viz_text_note *hui = down_note(notes, nn, HUI DOT);
  double px_size = hui ? hui->size : 0; /* the labels' font size */
  CHECK(hui && px_size >= VIZ_LABEL_FONT_MIN);
  char *svg = read_whole_file(out_path("note.svg"), NULL);
  char *ref = px_size > 0 ? reference_svg(HUI, px_size, "hui.svg") : NULL;
  char *esc = px_size > 0 ? reference_svg("\\xE4", px_size, "esc.svg") : NULL;
  char *ref_outline = ref ? glyph_outlines(ref) : NULL;
  char *esc_outline = esc ? glyph_outlines(esc) : NULL;
  CHECK(svg && ref_outline && ref_outline[0] && esc_outline);
  if (svg && ref_outline && ref_outline[0]) {
    /* 会's outline (its one path) is among the picture's glyphs */
    char *nl = strchr(ref_outline, '\n');
    if (nl) *nl = 0;
    CHECK(strstr(svg, ref_outline) != NULL);
    if (!strstr(svg, ref_outline)) printf("  the outline of 会 is not in note.svg\n");
  }
  if (svg && esc_outline) { /* an escape's glyphs ('x', 'E') would be: the test tells them apart */
    char *nl = strchr(esc_outline, '\n');
    if (nl) *nl = 0;
    CHECK(esc_outline[0] && strcmp(esc_outline, ref_outline ? ref_outline : "") != 0);
  }
  char *party = px_size > 0 ? reference_svg(PARTY, px_size, "party.svg") : NULL;
  char *bitmap = image_data(party);
  CHECK(bitmap && svg && strstr(svg, bitmap) != NULL); /* the emoji's own bitmap */
  free(svg), free(ref), free(esc), free(ref_outline), free(esc_outline), free(party), free(bitmap);
  /* PDF: every label laid out with its glyphs, the fonts embedded */
  viz_text_notes(notes, 512);
  CHECK_OK(attn_viz_heatmap_f32(out_path("note.pdf"), a.probs, a.n, a.n, lab, lab, &o));
  nn = viz_text_notes_count();
  viz_text_notes(NULL, 0);
  int unknown = 0;
  for (int k = 0; k < nn; k++)
    unknown += notes[k].unknown;
  long pdf_n = 0;
  char *pdf = read_whole_file(out_path("note.pdf"), &pdf_n);
  int fonts = 0;
  for (long i = 0; pdf && i + 9 < pdf_n; i++)
    fonts += !memcmp(pdf + i, "/FontFile", 9);
  CHECK(down_note(notes, nn, HUI DOT) && down_note(notes, nn, DOT PARTY) && unknown == 0 &&
        fonts >= 2);
  free(pdf);
  attn_clf_msg_attn_free(&a);
}
#endif

static char *key_attr(const char *dom, int j, const char *attr, char *buf, size_t n) {
  char pat[64];
  snprintf(pat, sizeof pat, "id=\"k%d\" %s=\"", j, attr);
  const char *p = strstr(dom, pat), *e = p ? strchr(p + strlen(pat), '"') : NULL;
  snprintf(buf, n, "%.*s", e ? (int)(e - p - strlen(pat)) : 0, e ? p + strlen(pat) : "");
  return buf;
}

/* The page of the note's attention in headless Chromium: the labels of the
 * cut characters as text; the words page hovered at 会: its row of keys sums
 * to 1 (the page's weights are stored to 1/510 of the row's largest). */
static void test_html_labels_and_words_in_chromium(void) {
  const char *bin = chromium_find();
  if (!bin) {
    SKIP(CHROMIUM_MISSING);
    return;
  }
  attn_clf_msg_attn a;
  if (!note_attention(&a)) return;
  const char *const *lab = (const char *const *)a.tokens;
  char page[320], url[512], want[64], buf[64];
  snprintf(page, sizeof page, "%s", out_path("note.html"));
  CHECK_OK(attn_viz_html_f32(page, a.probs, a.layers, a.heads, a.n, a.n, lab, lab, "note"));
  snprintf(url, sizeof url, "file://%s", page);
  char *dom = chromium_dump(bin, OUT_DIR, "--dump-dom", url);
  CHECK(dom != NULL);
  const char *cut[] = {HUI DOT, DOT HUI DOT, DOT HUI, PARTY DOT, DOT PARTY};
  for (size_t i = 0; dom && i < sizeof cut / sizeof cut[0]; i++) {
    snprintf(want, sizeof want, "\">%s</div>", cut[i]);
    CHECK(strstr(dom, want) != NULL);
    if (!strstr(dom, want)) printf("  no token '%s' on the page\n", cut[i]);
  }
  CHECK(dom && !strstr(dom, "\\xE4"));
  free(dom);
  /* merged into words */
  attn_tok_units u;
  float *m = NULL;
  CHECK_OK(attn_tok_units_make(&a.bytes, ATTN_UNITS_WORDS, 0, &u));
  CHECK_OK(attn_viz_merge_f32(a.probs, a.layers * a.heads, a.n, a.n, &u, &u, &m));
  int64_t hui = label_index(u.labels, u.n_units, HUI);
  CHECK(m && hui > 0 && label_index(u.labels, u.n_units, PARTY) > hui &&
        label_index(u.labels, u.n_units, "Meeting") == 0);
  if (m && hui > 0) {
    const char *const *wl = (const char *const *)u.labels;
    snprintf(page, sizeof page, "%s", out_path("words.html"));
    CHECK_OK(attn_viz_html_f32(page, m, a.layers, a.heads, u.n_units, u.n_units, wl, wl, "words"));
    snprintf(url, sizeof url, "file://%s#hover=%lld", page, (long long)hui);
    dom = chromium_dump(bin, OUT_DIR, "--dump-dom", url);
    CHECK(dom != NULL);
    double sum = 0;
    for (int64_t j = 0; dom && j < u.n_units; j++)
      sum += atof(key_attr(dom, (int)j, "data-w", buf, sizeof buf));
    snprintf(want, sizeof want, "id=\"q%lld\">%s</div>", (long long)hui, HUI);
    CHECK(dom && strstr(dom, want) && fabs(sum - 1) < 0.03);
    printf("  words page: %lld units, the row of '%s' sums to %.4f in the browser\n",
           (long long)u.n_units, HUI, sum);
    free(dom);
  }
  free(m);
  attn_tok_units_free(&u);
  attn_clf_msg_attn_free(&a);
}

int main(void) {
  if (!mkdtemp(OUT_DIR)) return 1;
  RUN(test_labels_by_character);
  RUN(test_units_of_a_small_case);
  RUN(test_word_rules);
  RUN(test_merge_against_a_hand_computed_case);
  RUN(test_merged_rows_sum_to_one);
  RUN(test_token_bytes_metadata);
  RUN(test_message_labels_show_the_characters);
  RUN(test_html_labels_and_words_in_chromium);
#ifdef ATTN_HAVE_CAIRO
  RUN(test_split_characters_drawn_as_glyphs_in_png);
  RUN(test_split_characters_drawn_as_glyphs_in_svg_and_pdf);
#else
  RUN_SKIPPED(test_split_characters_drawn_as_glyphs_in_png, "built without cairo");
  RUN_SKIPPED(test_split_characters_drawn_as_glyphs_in_svg_and_pdf, "built without cairo");
#endif
  if (!getenv("ATTN_KEEP_TEST_OUTPUT")) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", OUT_DIR);
    if (system(cmd) != 0) printf("  could not remove %s\n", OUT_DIR);
  }
#ifdef ATTN_HAVE_CAIRO
  attn_viz_release_fonts();
#endif
  HARNESS_END();
}
