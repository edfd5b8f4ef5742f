/* Text in the pictures: Chinese, Japanese, Arabic and emoji token labels
 * drawn as glyphs (Pango's unknown-glyph count, ink in each label's box) in
 * PNG, SVG and PDF; labels at least 10 px high; titles that say what is
 * drawn; rows scaled to their maximum; colour-bar ticks; token labels in
 * readable UTF-8. */
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "apps/viz/bench_sdpa_plot.h"
#include "apps/text/utf8_text.h"
#include "apps/viz/viz.h"
#include "apps/viz/viz_internal.h"
#include "harness.h"
#include "viz_png.h"

#ifdef ATTN_HAVE_FONTCONFIG
#include <fontconfig/fontconfig.h>
#endif

/* fontconfig (under Pango) keeps a few process-wide allocations; cairo 1.16
 * leaks 768 bytes per CID-keyed CFF font (Noto Sans CJK) that it subsets
 * into a PDF, inside cairo_surface_finish (cairo's bug; a PDF with only
 * DejaVu Sans leaks nothing, as test_viz shows). The frame is named only on
 * a full stack: slow unwinding for this program. */
__attribute__((used)) const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) {
  return "leak:libfontconfig.so\nleak:cairo_surface_finish\n";
}
__attribute__((used)) const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "fast_unwind_on_malloc=0"; }

static char OUT_DIR[64] = "/tmp/attn_test_viz_text.XXXXXX";

#ifdef ATTN_HAVE_CAIRO
static const char *out_path(const char *name) {
  static char buf[320];
  snprintf(buf, sizeof buf, "%s/%.200s", OUT_DIR, name);
  return buf;
}
#endif

static char *visible(const char *s, size_t n) {
  attn_textbuf b = {0};
  if (attn_utf8_visible(&b, s, n)) return NULL;
  return attn_textbuf_take(&b, NULL);
}

static void test_token_labels_are_utf8_with_visible_spaces(void) {
  struct {
    const char *in, *want;
  } cases[] = {
      {"\xe6\x88\x91", "\xe6\x88\x91"}, /* 我 as it is */
      {" the", "\xe2\x90\xa3the"},      /* ␣the */
      {"a\n\tb", "a\xe2\x86\xb5\xe2\x87\xa5"
                 "b"},              /* a↵⇥b */
      {"\xe6\x88", "\\xE6\\x88"},   /* half a character */
      {"x\x01\x7f", "x\\x01\\x7F"}, /* control bytes */
      {"caf\xc3\xa9 \xf0\x9f\x90\x8d", "caf\xc3\xa9\xe2\x90\xa3\xf0\x9f\x90\x8d"}, /* café␣🐍 */
      {"_x", "_x"}, /* an underscore stays one */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *got = visible(cases[i].in, strlen(cases[i].in));
    CHECK(got && !strcmp(got, cases[i].want));
    if (got && strcmp(got, cases[i].want)) printf("  '%s' -> '%s'\n", cases[i].in, got);
    free(got);
  }
}

static void test_colour_bar_ticks_are_round(void) {
  double t[8];
  int dec, n = viz_ticks(0, 0.019, t, 8, &dec); /* the demo's old colour bar */
  CHECK(n == 4 && dec == 3 && fabs(t[1] - 0.005) < 1e-12 && fabs(t[3] - 0.015) < 1e-12);
  char buf[32];
  viz_tick_label(buf, sizeof buf, t[2], dec);
  CHECK(!strcmp(buf, "0.010"));
  n = viz_ticks(0, 1, t, 8, &dec); /* rows scaled to their max */
  CHECK(n == 5 && dec == 2 && t[0] == 0 && t[4] == 1);
  n = viz_ticks(0.00113, 0.0048, t, 8, &dec); /* autoscaled, not from 0 */
  CHECK(n == 3 && dec == 3 && fabs(t[0] - 0.002) < 1e-12);
  n = viz_ticks(0.25, 0.25, t, 8, &dec); /* a constant picture */
  CHECK(n == 1 && t[0] == 0.25);
  n = viz_ticks(-3, 12, t, 8, &dec);
  CHECK(n >= 3 && n <= 6 && dec == 0 && t[0] >= -3 && t[n - 1] <= 12);
}

static void test_subtitle_says_what_is_drawn(void) {
  attn_viz_opts o;
  attn_viz_opts_default(&o);
  o.subtitle = "layer 1, mean of 8 heads";
  char buf[256];
  viz_subtitle(buf, sizeof buf, &o, 0, 40, 512, 0, 40, 512);
  CHECK(!strcmp(buf, "layer 1, mean of 8 heads, tokens 0-39 of 512"));
  o.row_norm = 1;
  viz_subtitle(buf, sizeof buf, &o, 0, 40, 512, 0, 40, 512);
  CHECK(!strcmp(buf, "layer 1, mean of 8 heads, tokens 0-39 of 512, each row scaled to its max"));
  attn_viz_opts_default(&o);
  viz_subtitle(buf, sizeof buf, &o, 0, 10, 10, 0, 10, 10);
  CHECK(!strcmp(buf, "10 tokens"));
  viz_subtitle(buf, sizeof buf, &o, 5, 10, 10, 0, 7, 7);
  CHECK(!strcmp(buf, "queries 5-9 of 10, 7 keys"));
  o.q_name = "output", o.k_name = "source";
  viz_subtitle(buf, sizeof buf, &o, 0, 3, 3, 2, 4, 6);
  CHECK(!strcmp(buf, "3 output, source 2-3 of 6"));
}

#ifdef ATTN_HAVE_CAIRO
/* The labels of the CJK test: the tutorials' sentence, Japanese, Arabic,
 * emoji (not in DejaVu Sans nor in the CJK font: only fontconfig's fallback
 * finds it). */
static const char *const WORLD[] = {
    "我", "爱", "自然", "语言", "处理", "こんにちは", "カタカナ", "مرحبا", "🐍", "ok",
};
enum { NW = sizeof WORLD / sizeof WORLD[0] };
#define UNASSIGNED "\xcd\xb8" /* U+0378: no character, so no font has it */

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

/* NULL when an installed font has a character of every label, else what is
 * missing (the test is then skipped, not passed). */
static const char *missing_fonts(void) {
#ifdef ATTN_HAVE_FONTCONFIG
  if (!installed_font_has(0x6211)) return "no CJK font installed (apt-get install fonts-noto-cjk)";
  if (!installed_font_has(0x3053)) return "no Japanese kana font installed (fonts-noto-cjk)";
  if (!installed_font_has(0x0645)) return "no Arabic font installed (fonts-dejavu-core)";
  if (!installed_font_has(0x1f40d)) return "no emoji font installed (fonts-noto-color-emoji)";
  return NULL;
#else
  return "built without fontconfig: cannot tell which fonts are installed";
#endif
}

/* Pixels in the note's box (clipped to the picture) that are not white. */
static long ink(const png_image *img, const viz_text_note *n) {
  long k = 0;
  for (int y = (int)fmax(0, floor(n->y0)); y < (int)fmin(img->h, ceil(n->y1)); y++)
    for (int x = (int)fmax(0, floor(n->x0)); x < (int)fmin(img->w, ceil(n->x1)); x++)
      if (px(img, x, y) != 0xffffffu) k++;
  return k;
}

static void diag_probs(float *p, int n) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      p[i * n + j] = i == j ? 0.6f : 0.4f / (float)(n - 1);
}

static void test_cjk_arabic_emoji_labels_are_glyphs_in_png(void) {
  const char *why = missing_fonts();
  if (why) {
    SKIP("%s", why);
    return;
  }
  const char *lab[NW + 1];
  for (int i = 0; i < NW; i++)
    lab[i] = WORLD[i];
  lab[NW] = UNASSIGNED;
  enum { N = NW + 1 };
  float p[N * N];
  diag_probs(p, N);
  static viz_text_note notes[256];
  viz_text_notes(notes, 256);
  CHECK_OK(attn_viz_heatmap_f32(out_path("world.png"), p, N, N, lab, lab, NULL));
  int nn = viz_text_notes_count();
  viz_text_notes(NULL, 0);
  png_image img;
  CHECK(png_load(out_path("world.png"), &img));
  if (!img.s) return;
  for (int i = 0; i < N; i++) {
    int seen = 0;
    for (int k = 0; k < nn; k++) {
      if (strcmp(notes[k].text, lab[i])) continue;
      seen++; /* once down, once across */
      long dots = ink(&img, &notes[k]);
      if (i < NW) {
        if (notes[k].unknown != 0 || dots < 12)
          printf("  label '%s': %d unknown glyphs, %ld ink pixels\n", lab[i], notes[k].unknown,
                 dots);
        CHECK(notes[k].unknown == 0);
        CHECK(dots >= 12);
      } else {
        CHECK(notes[k].unknown == 1); /* the check can fail: a missing glyph is counted */
      }
      CHECK(notes[k].height >= VIZ_LABEL_FONT_MIN);
    }
    CHECK(seen == 2);
  }
  cairo_surface_destroy(img.s);
}

static long file_size(const char *path) {
  struct stat st;
  return stat(path, &st) ? -1 : (long)st.st_size;
}

/* The file's bytes (NUL-terminated; *len without the NUL). */
static char *read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  long n = file_size(path);
  char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (s) s[ *len = fread(s, 1, (size_t)n, f)] = '\0';
  fclose(f);
  return s;
}

/* Occurrences of what in s[0..len) (binary: a PDF has NUL bytes). */
static int count(const char *s, size_t len, const char *what) {
  int n = 0;
  size_t w = strlen(what);
  for (const char *p = s; (p = memmem(p, len - (size_t)(p - s), what, w)); p++)
    n++;
  return n;
}

static void test_cjk_labels_in_svg_and_pdf(void) {
  const char *why = missing_fonts();
  if (why) {
    SKIP("%s", why);
    return;
  }
  float p[NW * NW];
  diag_probs(p, NW);
  attn_viz_opts o;
  attn_viz_opts_default(&o);
  o.title = "我爱自然语言处理";
  static viz_text_note notes[256];
  viz_text_notes(notes, 256);
  CHECK_OK(attn_viz_heatmap_f32(out_path("world.svg"), p, NW, NW, WORLD, WORLD, &o));
  CHECK_OK(attn_viz_heatmap_f32(out_path("world.pdf"), p, NW, NW, WORLD, WORLD, &o));
  int nn = viz_text_notes_count(), unknown = 0;
  viz_text_notes(NULL, 0);
  for (int k = 0; k < nn; k++)
    unknown += notes[k].unknown;
  CHECK(nn > 4 * NW && unknown == 0);
  size_t svg_n = 0, pdf_n = 0;
  char *svg = read_all(out_path("world.svg"), &svg_n),
       *pdf = read_all(out_path("world.pdf"), &pdf_n);
  CHECK(svg && pdf);
  if (svg) {
    /* glyphs are outlines (<symbol> paths) used once per character drawn;
     * the colour emoji is a bitmap */
    int symbols = count(svg, svg_n, "<symbol"), uses = count(svg, svg_n, "xlink:href=\"#glyph");
    printf("  svg: %ld bytes, %d glyph outlines, %d glyphs drawn\n",
           file_size(out_path("world.svg")), symbols, uses);
    CHECK(symbols >= 20 && uses >= 2 * 20);
    CHECK(strstr(svg, "<path") != NULL && strstr(svg, "<image") != NULL);
  }
  if (pdf) {
    /* the fonts are embedded: DejaVu Sans and the CJK font at least */
    int fonts = count(pdf, pdf_n, "/FontFile");
    printf("  pdf: %ld bytes, %d embedded fonts\n", file_size(out_path("world.pdf")), fonts);
    CHECK(file_size(out_path("world.pdf")) > 8000 && fonts >= 2);
  }
  free(svg), free(pdf);
}

/* The smallest logical height of the noted strings, in whole pixels. */
static int notes_min_height(viz_text_note *notes, int nn) {
  double h = 1e9;
  for (int k = 0; k < nn; k++)
    h = fmin(h, notes[k].height);
  return (int)floor(h);
}

static void test_labels_are_at_least_10px(void) {
  enum { L = 300, H = 8, K = 32 };
  float *p = malloc(sizeof(float) * H * L * L);
  char(*names)[16] = malloc(sizeof(*names) * L);
  const char **lab = malloc(sizeof(*lab) * L);
  if (!p || !names || !lab) {
    CHECK(0);
    goto done;
  }
  for (int h = 0; h < H; h++)
    diag_probs(p + (size_t)h * L * L, L);
  for (int i = 0; i < L; i++)
    snprintf(names[i], sizeof names[i], "tok%d", i), lab[i] = names[i];
  static viz_text_note notes[1024];
  viz_text_notes(notes, 1024);
  CHECK_OK(attn_viz_heatmap_f32(out_path("long.png"), p, L, L, lab, lab, NULL));
  int nn = viz_text_notes_count(), labels = 0;
  for (int k = 0; k < nn; k++)
    labels += !strncmp(notes[k].text, "tok", 3) || strstr(notes[k].text, " tok") != NULL;
  printf("  300 tokens: %d labels drawn, smallest text %d px\n", labels,
         notes_min_height(notes, nn));
  CHECK(labels >= 40 && labels < 2 * L); /* thinned, not dropped */
  CHECK(notes_min_height(notes, nn) >= 10);
  /* the demo's heads.png: 8 heads on their first 32 tokens */
  attn_viz_opts o;
  attn_viz_opts_default(&o);
  o.q1 = o.k1 = K;
  viz_text_notes(notes, 1024);
  CHECK_OK(attn_viz_heads_f32(out_path("heads.png"), p, H, L, L, lab, lab, &o));
  nn = viz_text_notes_count();
  viz_text_notes(NULL, 0);
  printf("  heads, 32 tokens: %d strings, smallest %d px\n", nn, notes_min_height(notes, nn));
  CHECK(nn > K && notes_min_height(notes, nn) >= 10);
done:
  viz_text_notes(NULL, 0);
  free(p), free(names), free(lab);
}

static const viz_text_note *find_note(const viz_text_note *notes, int nn, const char *text) {
  for (int k = 0; k < nn; k++)
    if (!strcmp(notes[k].text, text)) return &notes[k];
  return NULL;
}

static void test_title_and_colour_bar_say_what_is_drawn(void) {
  enum { L = 512, S = 40 };
  float *p = malloc(sizeof(float) * L * L);
  if (!p) {
    CHECK(0);
    return;
  }
  diag_probs(p, L);
  attn_viz_opts o;
  attn_viz_opts_default(&o);
  o.title = "spam/00001.eml: spam";
  o.subtitle = "layer 1, mean of 8 heads";
  o.q1 = o.k1 = S;
  static viz_text_note notes[512];
  viz_text_notes(notes, 512);
  CHECK_OK(attn_viz_heatmap_f32(out_path("title.png"), p, L, L, NULL, NULL, &o));
  int nn = viz_text_notes_count();
  viz_text_notes(NULL, 0);
  const viz_text_note *t = find_note(notes, nn, "spam/00001.eml: spam");
  const viz_text_note *s = find_note(notes, nn, "layer 1, mean of 8 heads, tokens 0-39 of 512");
  const viz_text_note *bar = find_note(notes, nn, "weight");
  CHECK(t && s && bar);
  png_image img;
  CHECK(png_load(out_path("title.png"), &img));
  if (img.s && t && s) {
    CHECK(ink(&img, t) > 100 && ink(&img, s) > 100);
    CHECK(s->y0 >= t->y1 - 1); /* the subtitle under the title */
  }
  if (img.s) cairo_surface_destroy(img.s);
  free(p);
}

/* Pixels of exactly colour c. */
static long colour_count(const png_image *img, uint32_t c) {
  long k = 0;
  for (int y = 0; y < img->h; y++)
    for (int x = 0; x < img->w; x++)
      k += px(img, x, y) == c;
  return k;
}

static void test_row_norm_scales_each_row_to_its_max(void) {
  enum { L = 4 };
  /* row i = 10^-i x (1, 0.5, 0.25, 0): one shared scale shows row 0 only */
  float p[L * L];
  for (int i = 0; i < L; i++)
    for (int j = 0; j < L; j++)
      p[i * L + j] = (float)(pow(10, -i) * (j < 3 ? 1.0 / (1 << j) : 0.0));
  attn_viz_opts o;
  attn_viz_opts_default(&o);
  o.cmap = ATTN_CMAP_VIRIDIS;
  static viz_text_note notes[256];
  CHECK_OK(attn_viz_heatmap_f32(out_path("shared.png"), p, L, L, NULL, NULL, &o));
  o.row_norm = 1;
  viz_text_notes(notes, 256);
  CHECK_OK(attn_viz_heatmap_f32(out_path("rownorm.png"), p, L, L, NULL, NULL, &o));
  int nn = viz_text_notes_count();
  viz_text_notes(NULL, 0);
  CHECK(find_note(notes, nn, "weight / row max") != NULL);
  CHECK(find_note(notes, nn, "1.00") != NULL && find_note(notes, nn, "0.50") != NULL);
  png_image a, b;
  CHECK(png_load(out_path("shared.png"), &a) && png_load(out_path("rownorm.png"), &b));
  if (a.s && b.s) {
    uint32_t top = viz_cmap_argb(ATTN_CMAP_VIRIDIS, 1.0) & 0xffffffu;
    uint32_t half = viz_cmap_argb(ATTN_CMAP_VIRIDIS, 0.5) & 0xffffffu;
    long cell = 30 * 30; /* 4 tokens: 30 px cells */
    long ta = colour_count(&a, top), tb = colour_count(&b, top);
    long ha = colour_count(&a, half), hb = colour_count(&b, half);
    printf("  max colour: %ld px shared, %ld px per row; half: %ld, %ld\n", ta, tb, ha, hb);
    CHECK(ta > 0.8 * cell && ta < 1.2 * cell + 60);         /* one cell (and the colour bar) */
    CHECK(tb > 0.8 * L * cell && tb < 1.2 * L * cell + 60); /* one per row */
    CHECK(ha < 1.2 * cell + 60 && hb > 0.8 * L * cell);
  }
  if (a.s) cairo_surface_destroy(a.s);
  if (b.s) cairo_surface_destroy(b.s);
}

/* `attn bench sdpa --plot`'s picture: its text through the same Pango path */
static void test_bench_plot_text(void) {
  const attn_sdpa_plot_point pts[3] = {
      {256, {0.5, 1.5}, {10, 20}}, {1024, {4, 30}, {12, 90}}, {4096, {60, 700}, {20, 1200}}};
  static viz_text_note notes[256];
  viz_text_notes(notes, 256);
  CHECK(attn_bench_sdpa_plot(out_path("bench.png"), "sdpa: f32, 8 heads", "flash", pts, 3) == 0);
  int nn = viz_text_notes_count();
  viz_text_notes(NULL, 0);
  CHECK(attn_bench_sdpa_plot(out_path("bench.svg"), "sdpa", "flash", pts, 3) == 0);
  const viz_text_note *x = find_note(notes, nn, "sequence length N");
  CHECK(x && x->unknown == 0 && find_note(notes, nn, "4096") && find_note(notes, nn, "flash"));
  png_image img;
  CHECK(png_load(out_path("bench.png"), &img));
  if (img.s) {
    CHECK(img.w == 1060 && img.h == 440);
    if (x) CHECK(ink(&img, x) > 50);
    cairo_surface_destroy(img.s);
  }
  CHECK(file_size(out_path("bench.svg")) > 2000);
}
#endif

int main(void) {
  if (!mkdtemp(OUT_DIR)) return 1;
  RUN(test_token_labels_are_utf8_with_visible_spaces);
  RUN(test_colour_bar_ticks_are_round);
  RUN(test_subtitle_says_what_is_drawn);
#ifdef ATTN_HAVE_CAIRO
  RUN(test_cjk_arabic_emoji_labels_are_glyphs_in_png);
  RUN(test_cjk_labels_in_svg_and_pdf);
  RUN(test_labels_are_at_least_10px);
  RUN(test_title_and_colour_bar_say_what_is_drawn);
  RUN(test_row_norm_scales_each_row_to_its_max);
  RUN(test_bench_plot_text);
#else
  RUN_SKIPPED(test_cjk_arabic_emoji_labels_are_glyphs_in_png, "built without cairo/pango");
  RUN_SKIPPED(test_cjk_labels_in_svg_and_pdf, "built without cairo/pango");
  RUN_SKIPPED(test_labels_are_at_least_10px, "built without cairo/pango");
  RUN_SKIPPED(test_title_and_colour_bar_say_what_is_drawn, "built without cairo/pango");
  RUN_SKIPPED(test_row_norm_scales_each_row_to_its_max, "built without cairo/pango");
  RUN_SKIPPED(test_bench_plot_text, "built without cairo/pango");
#endif
  if (!getenv("ATTN_KEEP_TEST_OUTPUT")) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", OUT_DIR);
    if (system(cmd) != 0) printf("  could not remove %s\n", OUT_DIR);
  }
  attn_viz_release_fonts(); /* font caches, so LeakSanitizer sees no leaks */
  HARNESS_END();
}
