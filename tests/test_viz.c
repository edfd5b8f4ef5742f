/* Pictures of attention: colormaps, label thinning, heatmap/grid/model files
 * in PNG (decoded and checked pixel by pixel), SVG and PDF, atomic writes,
 * token-label JSON, and clean errors on bad input. */
#include <dirent.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "apps/viz/viz.h"
#include "chromium.h"
#include "harness.h"

#include "viz_png.h"

/* fontconfig (under cairo's text) keeps a few process-wide allocations */
__attribute__((used)) const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libfontconfig.so\n"; }

/* a fresh folder under /tmp per run, removed at the end */
static char OUT_DIR[64] = "/tmp/attn_test_viz.XXXXXX";

static const char *out_path(const char *name) {
  static char buf[320];
  snprintf(buf, sizeof buf, "%s/%.200s", OUT_DIR, name);
  return buf;
}

static void remove_out_dir(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", OUT_DIR); /* mkdtemp's name: no quotes in it */
  if (system(cmd) != 0) printf("  could not remove %s\n", OUT_DIR);
}


/* No PATH.tmp.* files left in the output folder. */
static int no_tmp_files(void) {
  DIR *d = opendir(OUT_DIR);
  if (!d) return 0;
  int ok = 1;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strstr(e->d_name, ".tmp.")) ok = 0;
  closedir(d);
  return ok;
}

/* previous-token pattern: row i puts everything on key i-1 (row 0 on key 0) */
__attribute__((unused)) static void prev_token(float *p, int L) {
  memset(p, 0, sizeof(float) * L * L);
  for (int i = 0; i < L; i++)
    p[i * L + (i ? i - 1 : 0)] = 1;
}

/* graded softmax-like rows */
static void graded(float *p, int L, int seed) {
  fill_uniform(p, (long)L * L, (unsigned)seed, 0.0f, 1.0f);
  for (int i = 0; i < L; i++) {
    double s = 0;
    for (int j = 0; j < L; j++)
      s += p[i * L + j] = expf(4 * p[i * L + j]);
    for (int j = 0; j < L; j++)
      p[i * L + j] /= (float)s;
  }
}

static void test_colormaps_match_matplotlib(void) {
  double c[3];
  attn_viz_cmap_rgb(ATTN_CMAP_BONE, 0.0, c);
  CHECK(c[0] == 0 && c[1] == 0 && c[2] == 0);
  attn_viz_cmap_rgb(ATTN_CMAP_BONE, 1.0, c);
  CHECK(c[0] == 1 && c[1] == 1 && c[2] == 1);
  /* entry 128 of matplotlib's 256-entry bone table (x = 128/255) */
  attn_viz_cmap_rgb(ATTN_CMAP_BONE, 0.5, c);
  CHECK(fabs(c[0] - 0.4392157) < 1e-6 && fabs(c[1] - 0.4841299) < 1e-6 &&
        fabs(c[2] - 0.5642156) < 1e-6);
  attn_viz_cmap_rgb(ATTN_CMAP_BONE, 200.5 / 256, c);
  CHECK(fabs(c[0] - 0.7051163) < 1e-6 && fabs(c[1] - 0.8112745) < 1e-6 &&
        fabs(c[2] - 0.8112745) < 1e-6);
  attn_viz_cmap_rgb(ATTN_CMAP_VIRIDIS, 0.0, c);
  CHECK(c[0] == 0.267004 && c[1] == 0.004874 && c[2] == 0.329415);
  attn_viz_cmap_rgb(ATTN_CMAP_VIRIDIS, 0.5, c);
  CHECK(c[0] == 0.127568 && c[1] == 0.566949 && c[2] == 0.550556);
  attn_viz_cmap_rgb(ATTN_CMAP_VIRIDIS, 7.0, c); /* clamped */
  CHECK(c[0] == 0.993248 && c[1] == 0.906157 && c[2] == 0.143936);
  /* both maps get brighter monotonically (luminance) */
  for (int m = 0; m < 2; m++) {
    double prev = -1;
    int mono = 1;
    for (int i = 0; i < 256; i++) {
      attn_viz_cmap_rgb((attn_viz_cmap)m, (i + 0.5) / 256, c);
      double lum = 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
      if (lum < prev) mono = 0;
      prev = lum;
    }
    CHECK(mono);
  }
  attn_viz_cmap cm;
  CHECK_OK(attn_viz_cmap_from_name("viridis", &cm));
  CHECK(cm == ATTN_CMAP_VIRIDIS);
  CHECK_ERR(attn_viz_cmap_from_name("jet", &cm), ATTN_EINVAL);
}

static void test_label_stride_thins_long_axes(void) {
  CHECK(attn_viz_label_stride(10, 60) == 1);
  CHECK(attn_viz_label_stride(60, 60) == 1);
  CHECK(attn_viz_label_stride(61, 60) == 2);
  int64_t s = attn_viz_label_stride(500, 60);
  CHECK(s == 9 && (500 + s - 1) / s <= 60);
  CHECK(attn_viz_label_stride(500, 0) == 9); /* 0: default 60 */
}

static void test_labels_json(void) {
  char **v;
  int64_t n;
  CHECK_OK(attn_viz_labels_parse(" [\"The\", \"ca\\\"t\", \"\\u00e9t\\u00e9\", \"\\ud83d\\ude00\", "
                                 "\"a\\nb\"] ",
                                 &v, &n));
  CHECK(n == 5);
  if (n == 5) {
    CHECK(!strcmp(v[0], "The") && !strcmp(v[1], "ca\"t"));
    CHECK(!strcmp(v[2], "\xc3\xa9t\xc3\xa9"));
    CHECK(!strcmp(v[3], "\xf0\x9f\x98\x80"));
    CHECK(!strcmp(v[4], "a\nb"));
  }
  attn_viz_labels_free(v, n);
  CHECK_OK(attn_viz_labels_parse("[]", &v, &n));
  CHECK(n == 0);
  attn_viz_labels_free(v, n);
  CHECK_ERR(attn_viz_labels_parse("[\"a\",]", &v, &n), ATTN_EFORMAT);
  CHECK_ERR(attn_viz_labels_parse("[\"a\" \"b\"]", &v, &n), ATTN_EFORMAT);
  CHECK_ERR(attn_viz_labels_parse("{\"a\": 1}", &v, &n), ATTN_EFORMAT);
  CHECK_ERR(attn_viz_labels_parse("[\"\\ud83d\"]", &v, &n), ATTN_EFORMAT);
  CHECK_ERR(attn_viz_labels_parse("[1]", &v, &n), ATTN_EFORMAT);
  CHECK_ERR(attn_viz_labels_parse("[\"a\"] x", &v, &n), ATTN_EFORMAT);
}

static void test_bad_inputs_fail_cleanly(void) {
  float p[16];
  graded(p, 4, 1);
  char ok[320];
  snprintf(ok, sizeof ok, "%s", out_path("bad.png"));
  CHECK_ERR(attn_viz_heatmap_f32(out_path("x.jpg"), p, 4, 4, NULL, NULL, NULL), ATTN_EINVAL);
  CHECK_ERR(attn_viz_heatmap_f32(out_path("noext"), p, 4, 4, NULL, NULL, NULL), ATTN_EINVAL);
  CHECK_ERR(attn_viz_heatmap_f32(ok, p, 0, 4, NULL, NULL, NULL), ATTN_EINVAL);
  CHECK_ERR(attn_viz_heatmap_f32(ok, NULL, 4, 4, NULL, NULL, NULL), ATTN_EINVAL);
  CHECK_ERR(attn_viz_heads_f32(ok, p, 1, 4, -4, NULL, NULL, NULL), ATTN_EINVAL);
  p[5] = NAN;
  CHECK_ERR(attn_viz_heatmap_f32(ok, p, 4, 4, NULL, NULL, NULL), ATTN_ENUMERIC);
  CHECK(strstr(attn_last_error(), "index 5") != NULL);
  CHECK_ERR(attn_viz_model_f32(ok, p, 1, 1, 4, 4, NULL), ATTN_ENUMERIC);
  p[5] = INFINITY;
  CHECK_ERR(attn_viz_heads_f32(ok, p, 1, 4, 4, NULL, NULL, NULL), ATTN_ENUMERIC);
  graded(p, 4, 1);
  attn_viz_opts o;
  attn_viz_opts_default(&o);
  o.q0 = 2, o.q1 = 6; /* past the end */
  CHECK_ERR(attn_viz_heatmap_f32(ok, p, 4, 4, NULL, NULL, &o), ATTN_EINVAL);
  o.q0 = 3, o.q1 = 3; /* empty */
  CHECK_ERR(attn_viz_heatmap_f32(ok, p, 4, 4, NULL, NULL, &o), ATTN_EINVAL);
  attn_viz_opts_default(&o);
  o.cmap = (attn_viz_cmap)7;
  CHECK_ERR(attn_viz_heatmap_f32(ok, p, 4, 4, NULL, NULL, &o), ATTN_EINVAL);
#ifdef ATTN_HAVE_CAIRO
  CHECK_ERR(attn_viz_heatmap_f32("no-such-dir/x.png", p, 4, 4, NULL, NULL, NULL), ATTN_EIO);
#else
  CHECK_ERR(attn_viz_heatmap_f32(ok, p, 4, 4, NULL, NULL, NULL), ATTN_EUNSUPPORTED);
  CHECK(strstr(attn_last_error(), "libcairo2-dev") != NULL);
#endif
  CHECK(access(ok, F_OK) != 0); /* nothing written */
  CHECK(no_tmp_files());
}

#ifdef ATTN_HAVE_CAIRO
static int distinct_colours(const png_image *img, int cap) {
  uint32_t seen[256];
  int n = 0;
  for (int y = 0; y < img->h && n < cap; y++)
    for (int x = 0; x < img->w && n < cap; x++) {
      uint32_t c = px(img, x, y);
      int found = 0;
      for (int k = 0; k < n && !found; k++)
        found = seen[k] == c;
      if (!found) seen[n++] = c;
    }
  return n;
}

static void test_png_heatmap_is_oriented_and_coloured(void) {
  enum { L = 10 };
  float p[L * L];
  prev_token(p, L);
  const char *lab[L] = {"The", "cat", "sat", "on", "the", "mat", ",", "and", "purred", "."};
  attn_viz_opts o;
  attn_viz_opts_default(&o);
  o.cmap = ATTN_CMAP_VIRIDIS;
  o.title = "previous token";
  const char *path = out_path("prev.png");
  CHECK_OK(attn_viz_heatmap_f32(path, p, L, L, lab, lab, &o));
  png_image img;
  CHECK(png_load(path, &img));
  if (!img.s) return;
  CHECK(img.w > 280 && img.w < 800 && img.h > 280 && img.h < 800);
  /* the 1.0 cells are viridis' last entry, 8-bit as matplotlib rounds it */
  const uint32_t hot = 253u << 16 | 231u << 8 | 36u, cold = 68u << 16 | 1u << 8 | 84u;
  int minx = img.w, miny = img.h, maxx = -1, maxy = -1;
  long nhot = 0, ncold = 0;
  for (int y = 0; y < img.h; y++)
    for (int x = 0; x < img.w; x++) {
      uint32_t c = px(&img, x, y);
      if (c == cold) ncold++;
      if (c != hot) continue;
      nhot++;
      if (x < minx) minx = x;
      if (y < miny) miny = y;
      if (x > maxx) maxx = x;
      if (y > maxy) maxy = y;
    }
  /* hot cells: (row 0, col 0) and (row i, col i-1): a 9 x 10 cells box */
  double cw = (maxx - minx + 1) / 9.0, ch = (maxy - miny + 1) / 10.0;
  CHECK(fabs(cw - ch) < 1.5 && cw > 10);
  for (int i = 0; i < L; i++) { /* centre of each hot cell is hot */
    int j = i ? i - 1 : 0;
    CHECK(px(&img, minx + (int)((j + 0.5) * cw), miny + (int)((i + 0.5) * ch)) == hot);
    if (i > 0 && i + 1 < L) /* and the cell to its right (the diagonal) is cold */
      CHECK(px(&img, minx + (int)((i + 0.5) * cw), miny + (int)((i + 0.5) * ch)) == cold);
  }
  CHECK(nhot > 0.8 * L * cw * ch && nhot < 1.1 * L * cw * ch + 200 /* colour bar */);
  CHECK(ncold > 0.8 * (L * L - L) * cw * ch);
  CHECK(distinct_colours(&img, 64) >= 16); /* text anti-aliasing, map, colour bar */
  cairo_surface_destroy(img.s);
  CHECK(no_tmp_files());
}

static void test_png_bone_graded_and_thinned_500(void) {
  enum { L = 500 };
  float *p = malloc(sizeof(float) * L * L);
  char(*names)[16] = malloc(L * sizeof *names);
  const char **lab = malloc(L * sizeof *lab);
  graded(p, L, 3);
  for (int i = 0; i < L; i++)
    snprintf(names[i], 16, "tok%d", i), lab[i] = names[i];
  const char *path = out_path("long.png");
  CHECK_OK(attn_viz_heatmap_f32(path, p, L, L, lab, lab, NULL));
  png_image img;
  CHECK(png_load(path, &img));
  if (img.s) {
    CHECK(img.w >= 640 && img.h >= 640 && img.w < 1200 && img.h < 1200);
    CHECK(distinct_colours(&img, 200) >= 100);
    cairo_surface_destroy(img.s);
  }
  /* a cropped region gets big cells again */
  attn_viz_opts o;
  attn_viz_opts_default(&o);
  o.q0 = 100, o.q1 = 120, o.k0 = 90, o.k1 = 130;
  CHECK_OK(attn_viz_heatmap_f32(out_path("region.png"), p, L, L, lab, lab, &o));
  CHECK(png_load(out_path("region.png"), &img));
  if (img.s) {
    CHECK(img.w > 640 && img.h > 16 * 20); /* 40 keys of 16 px, 20 queries */
    cairo_surface_destroy(img.s);
  }
  free(p), free(names), free(lab);
}

static void test_svg_and_pdf_are_well_formed(void) {
  enum { L = 12 };
  float p[L * L];
  graded(p, L, 5);
  const char *lab[L] = {"<a>",      "&b",      "\"c\"", "d",
                        "\xc3\xa9", "bad\xff", "g",     "h",
                        "i",        "j",       "k",     "a-very-long-token-name-that-goes-on"};
  CHECK_OK(attn_viz_heatmap_f32(out_path("h.svg"), p, L, L, lab, lab, NULL));
  long n;
  char *s = read_whole_file(out_path("h.svg"), &n);
  CHECK(s != NULL);
  if (s) {
    CHECK(!strncmp(s, "<?xml", 5));
    CHECK(strstr(s, "<svg") != NULL);
    const char *end = s + n;
    while (end > s && (end[-1] == '\n' || end[-1] == ' '))
      end--;
    CHECK(end - s > 6 && !strncmp(end - 6, "</svg>", 6));
    free(s);
  }
  CHECK_OK(attn_viz_alignment_f32(out_path("a.pdf"), p, L, L, lab, lab, NULL));
  s = read_whole_file(out_path("a.pdf"), &n);
  CHECK(s != NULL);
  if (s) {
    CHECK(!strncmp(s, "%PDF-", 5));
    CHECK(n > 1000 && strstr(s + n - 32, "%%EOF") != NULL);
    free(s);
  }
  CHECK_OK(attn_viz_heads_f32(out_path("g.svg"), p, 1, L, L, lab, lab, NULL));
  CHECK(no_tmp_files());
}

static void test_grid_and_model_views(void) {
  enum { NL = 2, H = 6, L = 9 };
  float *p = malloc(sizeof(float) * NL * H * L * L);
  for (int t = 0; t < NL * H; t++)
    graded(p + t * L * L, L, 10 + t);
  CHECK_OK(attn_viz_heads_f32(out_path("heads.png"), p, H, L, L, NULL, NULL, NULL));
  png_image img;
  CHECK(png_load(out_path("heads.png"), &img));
  if (img.s) {
    CHECK(img.w > 4 * 9 * 12 && img.h > 2 * 9 * 12); /* 4 x 2 tiles of 9 cells of 12 px */
    CHECK(distinct_colours(&img, 200) >= 50);
    cairo_surface_destroy(img.s);
  }
  attn_viz_opts o;
  attn_viz_opts_default(&o);
  o.title = "model";
  o.cmap = ATTN_CMAP_VIRIDIS;
  CHECK_OK(attn_viz_model_f32(out_path("model.png"), p, NL, H, L, L, &o));
  CHECK(png_load(out_path("model.png"), &img));
  if (img.s) {
    CHECK(img.w > H * 54 && img.h > NL * 54);
    cairo_surface_destroy(img.s);
  }
  CHECK_OK(attn_viz_model_f32(out_path("model.pdf"), p, NL, H, L, L, &o));
  free(p);
}

/* pixels of exactly the colour t of the bone map */
static long count_colour(const png_image *img, double t) {
  double rgb[3];
  attn_viz_cmap_rgb(ATTN_CMAP_BONE, t, rgb);
  uint32_t want = (uint32_t)lround(rgb[0] * 255) << 16 | (uint32_t)lround(rgb[1] * 255) << 8 |
                  (uint32_t)lround(rgb[2] * 255);
  long n = 0;
  for (int y = 0; y < img->h; y++)
    for (int x = 0; x < img->w; x++) n += px(img, x, y) == want;
  return n;
}

/* cross attention: layers x (heads + mean) tiles; three one-hot heads on
 * different source positions make a mean of 1/3 on three cells per row */
static void test_cross_grid_has_the_mean_column(void) {
  enum { NL = 2, H = 3, LO = 5, LS = 6 };
  float p[NL * H * LO * LS] = {0};
  for (int t = 0; t < NL * H; t++)
    for (int i = 0; i < LO; i++) p[(t * LO + i) * LS + (i + t % H) % LS] = 1;
  const char *out[LO] = {"K", "AE1", "T", "S", "IH0"}, *src[LS] = {"c", "a", "t", "s", "'", "."};
  attn_viz_opts o;
  attn_viz_opts_default(&o);
  o.title = "cats.";
  CHECK_OK(attn_viz_cross_f32(out_path("cross.png"), p, NL, H, LO, LS, out, src, &o));
  CHECK_OK(attn_viz_cross_f32(out_path("cross1.png"), p, NL, 1, LO, LS, out, src, &o));
  png_image img, one;
  CHECK(png_load(out_path("cross.png"), &img) && png_load(out_path("cross1.png"), &one));
  if (img.s && one.s) {
    CHECK(img.w > 4 * LS * 16 && img.h > NL * LO * 16); /* 4 columns of 16 px cells */
    CHECK(img.w > one.w + 3 * LS * 16 - 40);
    /* the mean tiles: 2 layers x 5 rows x 3 cells of 16 x 16 px at 1/3 */
    CHECK(count_colour(&img, 1.0 / 3) >= NL * LO * 3 * 200);
    CHECK(count_colour(&one, 1.0 / 3) < 50);
  }
  if (img.s) cairo_surface_destroy(img.s);
  if (one.s) cairo_surface_destroy(one.s);
  CHECK_OK(attn_viz_cross_f32(out_path("cross.svg"), p, NL, H, LO, LS, out, src, NULL));
  p[7] = NAN;
  CHECK_ERR(attn_viz_cross_f32(out_path("bad.png"), p, NL, H, LO, LS, NULL, NULL, NULL),
            ATTN_ENUMERIC);
  CHECK_ERR(attn_viz_cross_f32(out_path("bad.png"), p, 0, H, LO, LS, NULL, NULL, NULL),
            ATTN_EINVAL);
  CHECK(no_tmp_files());
}

static void test_constant_matrix_and_missing_labels(void) {
  float p[16];
  for (int i = 0; i < 16; i++)
    p[i] = 0.25f; /* vmin == vmax: every cell the lowest colour */
  const char *lab[4] = {"a", NULL, "", "d"};
  CHECK_OK(attn_viz_heatmap_f32(out_path("flat.png"), p, 4, 4, lab, lab, NULL));
  png_image img;
  CHECK(png_load(out_path("flat.png"), &img));
  if (img.s) {
    long black = 0;
    for (int y = 0; y < img.h; y++)
      for (int x = 0; x < img.w; x++)
        black += px(&img, x, y) == 0;
    CHECK(black > 0.9 * 16 * 28 * 28); /* bone(0) is black; cells are 28 px */
    cairo_surface_destroy(img.s);
  }
}

static void test_write_is_atomic(void) {
  enum { L = 6 };
  float p[L * L];
  graded(p, L, 9);
  const char *path = out_path("atomic.png");
  CHECK_OK(attn_viz_heatmap_f32(path, p, L, L, NULL, NULL, NULL));
  long n0, n1;
  char *before = read_whole_file(path, &n0);
  p[7] = NAN; /* a failing call leaves the old picture alone */
  CHECK_ERR(attn_viz_heatmap_f32(path, p, L, L, NULL, NULL, NULL), ATTN_ENUMERIC);
  char *after = read_whole_file(path, &n1);
  CHECK(before && after && n0 == n1 && !memcmp(before, after, (size_t)n0));
  free(before), free(after);
  CHECK(no_tmp_files());
}
#endif

/* a file as PyTorch users write it: attn [2, 3, 5, 5] and the tokens */
static const char *const file_tokens[5] = {"[CLS]", "caf\xc3\xa9", "</script><b>", "\"q\"", "."};

static void write_attn_file(const char *path, float *p) {
  enum { NL = 2, H = 3, N = 5 };
  for (int t = 0; t < NL * H; t++) {
    memset(p + t * N * N, 0, sizeof(float) * N * N);
    for (int i = 0; i < N; i++)
      p[t * N * N + i * N + (t == 1 ? (i ? i - 1 : 0) : i)] = 1;
  }
  attn_st *st;
  CHECK_OK(attn_st_new(&st));
  int64_t shape[4] = {NL, H, N, N};
  CHECK_OK(attn_st_add_f32(st, "attn", 4, shape, p));
  CHECK_OK(attn_st_set_meta(st, "tokens",
                            "[\"[CLS]\", \"caf\\u00e9\", \"</script><b>\", \"\\\"q\\\"\", \".\"]"));
  CHECK_OK(attn_st_save(st, path));
  attn_st_free(st);
}

static void test_input_from_safetensors(void) {
  float p[2 * 3 * 25];
  char path[320];
  snprintf(path, sizeof path, "%s", out_path("in.safetensors"));
  write_attn_file(path, p);
  attn_viz_input in;
  CHECK_OK(attn_viz_input_load(path, NULL, &in));
  CHECK(in.rank == 4 && in.layers == 2 && in.heads == 3 && in.lq == 5 && in.lk == 5);
  CHECK(in.probs && !memcmp(in.probs, p, sizeof p));
  CHECK(in.q_labels && in.k_labels && in.freq == NULL);
  if (in.q_labels && in.k_labels)
    for (int i = 0; i < 5; i++)
      CHECK(!strcmp(in.q_labels[i], file_tokens[i]) && !strcmp(in.k_labels[i], file_tokens[i]));
  attn_viz_input_free(&in);
  /* F16 weights [Lq, Lk], separate query/key tokens, a bad token count */
  attn_st *st;
  CHECK_OK(attn_st_new(&st));
  uint16_t h[6];
  for (int i = 0; i < 6; i++)
    h[i] = attn_f32_to_f16(i < 3 ? 0.25f : 0.5f);
  int64_t shape[2] = {2, 3};
  CHECK_OK(attn_st_add(st, "attn", ATTN_F16, 2, shape, h));
  CHECK_OK(attn_st_set_meta(st, "query_tokens", "[\"a\", \"b\"]"));
  CHECK_OK(attn_st_set_meta(st, "key_tokens", "[\"x\", \"y\", \"z\"]"));
  CHECK_OK(attn_st_save(st, path));
  CHECK_OK(attn_viz_input_load(path, NULL, &in));
  CHECK(in.rank == 2 && in.heads == 1 && in.lq == 2 && in.lk == 3);
  CHECK(in.probs && in.probs[0] == 0.25f && in.probs[5] == 0.5f);
  CHECK(in.q_labels && !strcmp(in.q_labels[1], "b") && in.k_labels && !strcmp(in.k_labels[2], "z"));
  attn_viz_input_free(&in);
  CHECK_OK(attn_st_set_meta(st, "key_tokens", "[\"x\", \"y\"]"));
  CHECK_OK(attn_st_save(st, path));
  CHECK_ERR(attn_viz_input_load(path, NULL, &in), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "key_tokens") != NULL);
  CHECK_ERR(attn_viz_input_load(path, "weights", &in), ATTN_EINVAL);
  int64_t one[1] = {3};
  CHECK_OK(attn_st_add_f32(st, "attn", 1, one, (const float[]){1, 2, 3}));
  CHECK_OK(attn_st_save(st, path));
  CHECK_ERR(attn_viz_input_load(path, NULL, &in), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "rank 1") != NULL);
  attn_st_free(st);
}

static void test_html_page_is_self_contained(void) {
  float p[2 * 3 * 25];
  char in_path[320];
  snprintf(in_path, sizeof in_path, "%s", out_path("in.safetensors"));
  write_attn_file(in_path, p);
  char path[320];
  snprintf(path, sizeof path, "%s", out_path("page.html"));
  CHECK_OK(attn_viz_html_f32(path, p, 2, 3, 5, 5, file_tokens, file_tokens, "<b>heads</b> & co"));
  long n;
  char *s = read_whole_file(path, &n);
  CHECK(s != NULL);
  if (!s) return;
  CHECK(!strncmp(s, "<!DOCTYPE html>", 15));
  CHECK(strstr(s, "</html>") != NULL);
  /* one inline script, nothing fetched from anywhere */
  const char *a = strstr(s, "<script>"), *b = strstr(s, "</script>");
  CHECK(a && b && b > a && !strstr(a + 1, "<script") && !strstr(b + 1, "</script>"));
  CHECK(!strstr(s, "http:") && !strstr(s, "https:") && !strstr(s, "<link") && !strstr(s, "src="));
  CHECK(strstr(s, "<title>&lt;b&gt;heads&lt;/b&gt; &amp; co</title>") != NULL);
  CHECK(strstr(s, "\\u003c/script\\u003e\\u003cb\\u003e") != NULL); /* the token, escaped */
  CHECK(strstr(s, "\"caf\xc3\xa9\"") && strstr(s, "\"\\\"q\\\"\""));
  CHECK(strstr(s, "\"layers\":2,\"heads\":3,\"lq\":5,\"lk\":5") != NULL);
  free(s);
  CHECK_ERR(attn_viz_html_f32(out_path("page.htm"), p, 2, 3, 5, 5, NULL, NULL, NULL), ATTN_EINVAL);
  p[3] = NAN;
  CHECK_ERR(attn_viz_html_f32(path, p, 2, 3, 5, 5, NULL, NULL, NULL), ATTN_ENUMERIC);
  CHECK(no_tmp_files());
}

/* Decodes the page's "rm" and "a" (base64 bytes, row-scaled) back to
 * weights; returns how many (or -1). */
static long page_weights(const char *page, float *out, long cap, long lk) {
  const char *r = strstr(page, "\"rm\":["), *a = strstr(page, "\"a\":\"");
  if (!r || !a) return -1;
  float rm[64];
  int nr = 0;
  for (const char *c = r + 6; *c != ']' && nr < 64;) {
    char *end;
    rm[nr++] = strtof(c, &end);
    if (end == c) return -1;
    c = *end == ',' ? end + 1 : end;
  }
  static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  unsigned acc = 0;
  int bits = 0;
  long n = 0;
  for (const char *c = a + 5; *c && *c != '"' && *c != '='; c++) {
    const char *k = strchr(b64, *c);
    if (!k) return -1;
    acc = (acc << 6) | (unsigned)(k - b64);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      if (n >= cap || n / lk >= nr) return -1;
      out[n] = (float)((acc >> bits) & 255) * rm[n / lk] / 255.0f;
      n++;
    }
  }
  return n;
}

/* The page's compact weights: soft rows (and an all-zero one) come back
 * within rowmax / 510, zeros and row maxima exactly; 35 and 4 weights
 * exercise both base64 endings. */
/* the cross-attention page names its axes output / source; the
 * self-attention page query / key */
static void test_html_cross_page_names_output_and_source(void) {
  float p[2 * 6] = {1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0};
  const char *out[2] = {"K", "AE1"}, *src[3] = {"c", "a", "t"};
  char path[320];
  snprintf(path, sizeof path, "%s", out_path("cross.html"));
  CHECK_OK(attn_viz_html_cross_f32(path, p, 1, 2, 2, 3, out, src, "cat"));
  char *s = read_whole_file(path, NULL);
  CHECK(s && strstr(s, "\"qn\":\"output\",\"kn\":\"source\""));
  CHECK(s && strstr(s, "Hover a token on the left (output) to see its attention to the source "
                      "tokens (right)"));
  free(s);
  snprintf(path, sizeof path, "%s", out_path("self.html"));
  CHECK_OK(attn_viz_html_f32(path, p, 1, 2, 2, 3, out, src, "cat"));
  s = read_whole_file(path, NULL);
  CHECK(s && strstr(s, "\"qn\":\"query\",\"kn\":\"key\"") &&
        strstr(s, "Hover a token on the left (query)"));
  free(s);
}

static void test_html_weights_round_trip(void) {
  enum { LQ = 5, LK = 7 };
  float p[LQ * LK], got[LQ * LK + 8];
  for (int i = 0; i < LQ; i++) {
    float sum = 0;
    for (int j = 0; j < LK; j++) sum += p[i * LK + j] = expf(sinf(1.7f * (float)(i * LK + j)) * 3);
    for (int j = 0; j < LK; j++) p[i * LK + j] = i == 2 ? 0.0f : p[i * LK + j] / sum;
  }
  p[4 * LK + 3] = 0;
  char path[320];
  snprintf(path, sizeof path, "%s", out_path("soft.html"));
  CHECK_OK(attn_viz_html_f32(path, p, 1, 1, LQ, LK, NULL, NULL, "soft"));
  long n;
  char *s = read_whole_file(path, &n);
  CHECK(s != NULL);
  if (!s) return;
  CHECK(page_weights(s, got, LQ * LK + 8, LK) == LQ * LK);
  double worst = 0;
  for (int i = 0; i < LQ; i++) {
    float m = 0;
    for (int j = 0; j < LK; j++) m = fmaxf(m, p[i * LK + j]);
    for (int j = 0; j < LK; j++) {
      double e = fabs((double)got[i * LK + j] - p[i * LK + j]);
      worst = fmax(worst, m > 0 ? e / m : e);
      CHECK(e <= m / 510.0 * 1.001 + 1e-7);
      if (p[i * LK + j] == 0) CHECK(got[i * LK + j] == 0);
      if (p[i * LK + j] == m) CHECK(fabsf(got[i * LK + j] - m) <= 1e-6f * m);
    }
  }
  printf("  worst error %.5f of the row maximum (bound 1/510 = %.5f)\n", worst, 1 / 510.0);
  free(s);
  float q[4] = {0.25f, 0.75f, 1, 0};
  CHECK_OK(attn_viz_html_f32(path, q, 1, 1, 2, 2, NULL, NULL, "four"));
  s = read_whole_file(path, &n);
  CHECK(s && page_weights(s, got, 8, 2) == 4);
  CHECK(got[0] == 85 * (0.75f / 255.0f) && got[1] == 0.75f && got[2] == 1 && got[3] == 0);
  free(s);
}

/* The attn tool itself (ATTN_BIN, set by make test) on such a file. */
static void test_cli_viz_and_diagnose(void) {
  const char *bin = getenv("ATTN_BIN");
  if (!bin) {
    SKIP("ATTN_BIN not set: the attn tool is not exercised");
    return;
  }
  float p[2 * 3 * 25];
  char in_path[320], cmd[2048];
  snprintf(in_path, sizeof in_path, "%s", out_path("in.safetensors"));
  write_attn_file(in_path, p);
#ifdef ATTN_HAVE_CAIRO
  const char *runs[] = {"viz %s %s/c1.png --layer 1 --head 1 --cmap viridis",
                        "viz %s %s/c2.svg --all-heads", "viz %s %s/c3.pdf --model --region 0:3,1:5",
                        "viz %s %s/c4.html",
                        "viz %s %s/c6.png --layer 1 --head 1 --cmap viridis --row-norm",
                        "diagnose %s --chart %s/c5.png" /* last: its table is read below */};
#else /* pictures need cairo; the page and the table do not */
  const char *runs[] = {"viz %s %s/c4.html", "diagnose %s"};
#endif
  /* a sanitizer build of the tool leaks nothing: it releases cairo's and
   * fontconfig's caches itself (no suppressions given here) */
  for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
    char args[512];
    snprintf(args, sizeof args, runs[r], in_path, OUT_DIR);
    snprintf(cmd, sizeof cmd, "%s %s > %s/out.txt 2>&1", bin, args, OUT_DIR);
    int rc = system(cmd);
    if (rc != 0) printf("  '%s' -> %d\n", cmd, rc);
    CHECK(rc == 0);
  }
#ifdef ATTN_HAVE_CAIRO
  png_image img, norm;
  CHECK(png_load(out_path("c1.png"), &img) && png_load(out_path("c6.png"), &norm));
  if (img.s && norm.s) { /* --row-norm reached the picture: one-hot rows look the same, the
                          * colour bar's caption ("weight / row max") and subtitle differ */
    long differ = 0;
    for (int y = 0; y < img.h && y < norm.h; y++)
      for (int x = 0; x < img.w && x < norm.w; x++)
        differ += px(&img, x, y) != px(&norm, x, y);
    CHECK(differ > 100 || img.w != norm.w);
  }
  if (img.s) cairo_surface_destroy(img.s);
  if (norm.s) cairo_surface_destroy(norm.s);
#endif
  long n;
  char *s = read_whole_file(out_path("out.txt"), &n); /* the diagnose table */
  CHECK(s && strstr(s, "previous-token") && strstr(s, "diagonal"));
  free(s);
  /* usage errors exit 2, bad files 1 */
  snprintf(cmd, sizeof cmd, "%s viz %s %s/x.png --head 1 --all-heads >/dev/null 2>&1", bin, in_path,
           OUT_DIR);
  CHECK(WEXITSTATUS(system(cmd)) == 2);
  snprintf(cmd, sizeof cmd, "%s viz %s %s/x.html --head 7 >/dev/null 2>&1", bin, in_path, OUT_DIR);
  CHECK(WEXITSTATUS(system(cmd)) == 1);
  snprintf(cmd, sizeof cmd, "%s viz %s %s/x.bmp >/dev/null 2>&1", bin, in_path, OUT_DIR);
  CHECK(WEXITSTATUS(system(cmd)) == 1);
  snprintf(cmd, sizeof cmd, "%s diagnose %s/none.safetensors >/dev/null 2>&1", bin, OUT_DIR);
  CHECK(WEXITSTATUS(system(cmd)) == 1);
}

static void test_report_writes_everything(void) {
  float p[2 * 3 * 25];
  char in_path[320], prefix[320];
  snprintf(in_path, sizeof in_path, "%s", out_path("in.safetensors"));
  write_attn_file(in_path, p);
  snprintf(prefix, sizeof prefix, "%s", out_path("msg"));
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  attn_status st =
      attn_viz_report_f32(prefix, p, 2, 3, 5, 5, file_tokens, file_tokens, 0, 1, NULL, f);
  fclose(f);
#ifdef ATTN_HAVE_CAIRO
  CHECK_OK(st);
  CHECK(buf && strstr(buf, "previous-token") && strstr(buf, "diagonal"));
  const char *pngs[] = {"msg_heatmap.png", "msg_heads.png", "msg_model.png", "msg_diagnosis.png"};
  for (int i = 0; i < 4; i++) {
    png_image img;
    CHECK(png_load(out_path(pngs[i]), &img));
    if (img.s) cairo_surface_destroy(img.s);
  }
  CHECK(access(out_path("msg.html"), F_OK) == 0);
#else
  CHECK(st == ATTN_EUNSUPPORTED);
#endif
  free(buf);
  CHECK_ERR(attn_viz_report_f32(prefix, p, 2, 3, 5, 5, NULL, NULL, 2, 0, NULL, NULL), ATTN_EINVAL);
  CHECK_ERR(attn_viz_report_f32("", p, 2, 3, 5, 5, NULL, NULL, 0, 0, NULL, NULL), ATTN_EINVAL);
}

/* Headless Chromium (tests/chromium.h) loads the page, replays a
 * layer/heads choice and a hover through the page's own event handlers, and
 * we check the DOM it ends with and a screenshot. */
static const char *find_chromium(void) { return chromium_find(); }

static char *chromium_run(const char *bin, const char *args, const char *url) {
  return chromium_dump(bin, OUT_DIR, args, url);
}

#ifdef ATTN_HAVE_CAIRO
/* An 800x600 screenshot of page#hash as OUT_DIR/name, loaded into img (img->s
 * NULL and 0 when there is none). */
static int screenshot(const char *bin, const char *page, const char *hash, const char *name,
                      png_image *img) {
  char args[400], url[512];
  snprintf(args, sizeof args, "--window-size=800,600 --screenshot='%s/%s'", OUT_DIR, name);
  snprintf(url, sizeof url, "file://%s#%s", page, hash);
  free(chromium_run(bin, args, url));
  img->s = NULL;
  return png_load(out_path(name), img);
}
#endif

/* data-w of key token j in a dumped DOM, or -1 */
static double key_weight(const char *dom, int j) {
  char pat[32];
  snprintf(pat, sizeof pat, "id=\"k%d\" data-w=\"", j);
  const char *p = strstr(dom, pat);
  return p ? atof(p + strlen(pat)) : -1;
}

static void test_html_page_in_headless_chromium(void) {
  const char *bin = find_chromium();
  if (!bin) {
    SKIP("no chromium: install Debian's 'chromium' to run the browser test");
    return;
  }
  float p[2 * 3 * 25];
  char in_path[320], page[320], url[512];
  snprintf(in_path, sizeof in_path, "%s", out_path("in.safetensors"));
  write_attn_file(in_path, p); /* layer 0 head 1: previous token; the others: diagonal */
  snprintf(page, sizeof page, "%s", out_path("head_view.html"));
  CHECK_OK(attn_viz_html_f32(page, p, 2, 3, 5, 5, file_tokens, file_tokens, "browser test"));
  snprintf(url, sizeof url, "file://%s#layer=0&heads=1&hover=3", page);
  char *dom = chromium_run(bin, "--dump-dom", url);
  CHECK(dom != NULL);
  if (dom) {
    CHECK(!strstr(dom, "id=\"state\"") && !strstr(dom, ">layer=0 heads=1 hover=3<")); /* no debug line */
    CHECK(strstr(dom, "<canvas id=\"lines\" width=\"220\" height=\"100\" data-lines=\"1\">") != NULL);
    CHECK(strstr(dom, "<title>browser test</title>") != NULL);
    CHECK(key_weight(dom, 2) == 1.0); /* token 3 attends to token 2 */
    for (int j = 0; j < 5; j++)
      if (j != 2) CHECK(key_weight(dom, j) == 0.0);
    CHECK(strstr(dom, "class=\"tok on\" id=\"q3\"") != NULL); /* the hovered token is marked */
    CHECK(strstr(dom, "&lt;/script&gt;&lt;b&gt;") != NULL);   /* the odd token shown as text */
    CHECK(strstr(dom, "heatmaps: layer 0, heads 1 ") && strstr(dom, "id=\"heat1\"") &&
          !strstr(dom, "id=\"heat0\"")); /* one heatmap per selected head */
    free(dom);
  }
  snprintf(url, sizeof url, "file://%s#layer=1&heads=0,2&hover=4", page);
  dom = chromium_run(bin, "--dump-dom", url);
  CHECK(dom != NULL);
  if (dom) {
    CHECK(strstr(dom, "heatmaps: layer 1, heads 0,2 ") != NULL);
    CHECK(key_weight(dom, 4) == 1.0 && key_weight(dom, 3) == 0.0); /* diagonal heads */
    free(dom);
  }
#ifdef ATTN_HAVE_CAIRO
  png_image img;
  CHECK(screenshot(bin, page, "hover=2", "shot.png", &img));
  if (img.s) {
    CHECK(img.w == 800 && img.h == 600);
    CHECK(distinct_colours(&img, 64) >= 16); /* text, head colours, heatmap */
    cairo_surface_destroy(img.s);
  }
#endif
}

/* The tag of key token j in a dumped DOM (a copy; "" if absent). */
static void key_tag(const char *dom, int j, char *buf, size_t n) {
  char pat[32];
  snprintf(pat, sizeof pat, "id=\"k%d\"", j);
  const char *p = strstr(dom, pat), *e = p ? strchr(p, '>') : NULL;
  snprintf(buf, n, "%.*s", e ? (int)(e - p) : 0, p ? p : "");
}

/* 512 tokens, each row nearly uniform (weights ~0.002, 3x on the next
 * token): hovering a token must still show it. Raw weights as opacity drew
 * no line (all < 0.01) and shading of alpha 0.006; scaled to the row's
 * largest weight, the strongest key is fully shaded, the others at 1/3, a
 * line goes to every key, and pointing at a key gives its weight. */
static void test_html_long_rows_visible_in_chromium(void) {
  const char *bin = find_chromium();
  if (!bin) {
    SKIP("no chromium: install Debian's 'chromium' to run the browser test");
    return;
  }
  enum { N = 512 };
  float *p = malloc(sizeof(float) * N * N);
  if (!p) return;
  for (int i = 0; i < N; i++)
    for (int j = 0; j < N; j++) p[i * N + j] = (j == (i + 1) % N ? 3.0f : 1.0f) / (N + 2);
  char page[320], url[512], want[160], tag[1024];
  snprintf(page, sizeof page, "%s", out_path("long.html"));
  CHECK_OK(attn_viz_html_f32(page, p, 1, 1, N, N, NULL, NULL, "512 tokens"));
  free(p);
  snprintf(url, sizeof url, "file://%s#hover=3&key=4", page);
  char *dom = chromium_run(bin, "--dump-dom", url);
  CHECK(dom != NULL);
  if (dom) {
    double w4 = key_weight(dom, 4), w100 = key_weight(dom, 100);
    CHECK(fabs(w4 - 3.0 / (N + 2)) < 1e-4 && fabs(w100 - 1.0 / (N + 2)) < 1e-4);
    key_tag(dom, 4, tag, sizeof tag); /* the row's largest: fully shaded */
    CHECK(strstr(tag, "background: rgb(40, 90, 160)") != NULL);
    if (!strstr(tag, "background: rgb(40, 90, 160)")) printf("  k4: %s\n", tag);
    key_tag(dom, 100, tag, sizeof tag); /* a third of it: a third of the shade */
    CHECK(strstr(tag, "background: rgba(40, 90, 160, 0.33") != NULL);
    if (!strstr(tag, "rgba(40, 90, 160, 0.33")) printf("  k100: %s\n", tag);
    CHECK(strstr(tag, "title=\"") && strstr(tag, "(key 100): weight "));
    CHECK(strstr(dom, "data-lines=\"512\"") != NULL); /* one line per key */
    snprintf(want, sizeof want, "(key 4): weight %.4f, 100 %% of the row", w4);
    const char *tip = strstr(dom, "<div id=\"tip\" style=\"");
    CHECK(tip && strstr(tip, "display: block") && strstr(tip, want)); /* the tooltip */
    if (!tip || !strstr(tip, want)) printf("  want '%s' in the tooltip\n", want);
    free(dom);
  }
#ifdef ATTN_HAVE_CAIRO
  /* and on screen: the red lines of head 0 fan out from the hovered token */
  png_image img;
  CHECK(screenshot(bin, page, "hover=3", "long_page.png", &img));
  if (img.s) {
    long red = 0;
    for (int y = 0; y < img.h; y++)
      for (int x = 0; x < img.w; x++) {
        uint32_t c = px(&img, x, y);
        int r = (c >> 16) & 255, g = (c >> 8) & 255, b = c & 255;
        red += r - g > 30 && r - b > 30;
      }
    printf("  %ld reddish pixels of the lines\n", red);
    CHECK(red > 10000); /* the head's label alone is ~600 */
    cairo_surface_destroy(img.s);
  }
#endif
}


/* attn_viz_save_f32 writes what attn_viz_input_load reads: one "tokens"
 * for shared labels, query_tokens / key_tokens otherwise, the cross marker */
static void test_save_round_trip(void) {
  float p[2 * 2 * 3] = {0.5f, 0.25f, 0.25f, 0, 1, 0, 1, 0, 0, 0.125f, 0.375f, 0.5f};
  const char *q[2] = {"K", "AE1"}, *k[3] = {"c", "a", "t"};
  const char *kv[] = {"attention", "cross", "word", "cat", NULL};
  char path[320];
  snprintf(path, sizeof path, "%s", out_path("saved.safetensors"));
  CHECK_OK(attn_viz_save_f32(path, p, 1, 2, 2, 3, q, k, kv));
  attn_viz_input in;
  CHECK_OK(attn_viz_input_load(path, NULL, &in));
  CHECK(in.cross == 1 && in.layers == 1 && in.heads == 2 && in.lq == 2 && in.lk == 3);
  CHECK(in.probs && !memcmp(in.probs, p, sizeof p));
  CHECK(in.q_labels && in.k_labels && !strcmp(in.q_labels[1], "AE1") && !strcmp(in.k_labels[2], "t"));
  attn_viz_input_free(&in);
  attn_st *st = NULL;
  CHECK_OK(attn_st_load(path, &st));
  CHECK(!attn_st_meta(st, "tokens") && attn_st_meta(st, "query_tokens") &&
        !strcmp(attn_st_meta(st, "word"), "cat"));
  attn_st_free(st);
  const char *same[2] = {"a", "b"};
  CHECK_OK(attn_viz_save_f32(path, p, 1, 1, 2, 2, same, same, NULL)); /* self attention */
  CHECK_OK(attn_st_load(path, &st));
  CHECK(attn_st_meta(st, "tokens") && !strcmp(attn_st_meta(st, "tokens"), "[\"a\",\"b\"]") &&
        !attn_st_meta(st, "query_tokens") && !attn_st_meta(st, "attention"));
  attn_st_free(st);
  CHECK_OK(attn_viz_input_load(path, NULL, &in));
  CHECK(in.cross == 0);
  attn_viz_input_free(&in);
  CHECK_ERR(attn_viz_save_f32(path, p, 0, 1, 2, 2, NULL, NULL, NULL), ATTN_EINVAL);
  CHECK_ERR(attn_viz_save_f32(out_path("no/such/dir.safetensors"), p, 1, 1, 2, 2, NULL, NULL, NULL), ATTN_EIO);
}

/* attn viz --mean draws the mean of the layer's heads (the same picture as
 * a file holding that mean as its one head); a file marked cross attention
 * is drawn and diagnosed as such without --cross */
static void test_cli_mean_and_cross_marker(void) {
  const char *bin = getenv("ATTN_BIN");
  if (!bin) {
    SKIP("ATTN_BIN not set: the attn tool is not exercised");
    return;
  }
  /* each layer: heads {0.25, 0.75} -> mean 0.5 exactly */
  float two[2 * 2 * 6] = {0}, one[6] = {1, 0, 0, 0, 0.5f, 0.5f};
  const float h0[6] = {1, 0, 0, 0, 0.25f, 0.75f}, h1[6] = {1, 0, 0, 0, 0.75f, 0.25f};
  for (int l = 0; l < 2; l++) {
    memcpy(two + l * 12, h0, sizeof h0);
    memcpy(two + l * 12 + 6, h1, sizeof h1);
  }
  const char *q[2] = {"K", "AE1"}, *k[3] = {"c", "a", "t"};
  const char *kv[] = {"attention", "cross", NULL};
  char a[320], b[320], cmd[2048];
  snprintf(a, sizeof a, "%s", out_path("two.safetensors"));
  snprintf(b, sizeof b, "%s", out_path("one.safetensors"));
  CHECK_OK(attn_viz_save_f32(a, two, 2, 2, 2, 3, q, k, kv));
  CHECK_OK(attn_viz_save_f32(b, one, 1, 1, 2, 3, q, k, kv));
  snprintf(cmd, sizeof cmd, "%s diagnose %s > %s/out.txt 2>&1", bin, a, OUT_DIR);
  CHECK(system(cmd) == 0);
  char *s = read_whole_file(out_path("out.txt"), NULL);
  CHECK(s && strstr(s, "cross attention, 2 layer(s) x 2 head(s)") && strstr(s, "layer 1 mean"));
  free(s);
  snprintf(cmd, sizeof cmd, "%s viz %s %s/two.html > /dev/null 2>&1", bin, a, OUT_DIR);
  CHECK(system(cmd) == 0);
  s = read_whole_file(out_path("two.html"), NULL);
  CHECK(s && strstr(s, "\"qn\":\"output\",\"kn\":\"source\""));
  free(s);
  snprintf(cmd, sizeof cmd, "%s viz %s %s/x.png --mean --head 1 > /dev/null 2>&1", bin, a, OUT_DIR);
  CHECK(WEXITSTATUS(system(cmd)) == 2);
#ifdef ATTN_HAVE_CAIRO
  snprintf(cmd, sizeof cmd, "%s viz %s %s/mean.png --layer 1 --mean --title T > /dev/null 2>&1 && "
           "%s viz %s %s/ref.png --title T > /dev/null 2>&1 && "
           "%s viz %s %s/head.png --layer 1 --title T > /dev/null 2>&1", bin, a, OUT_DIR, bin, b, OUT_DIR,
           bin, a, OUT_DIR);
  CHECK(system(cmd) == 0);
  png_image m, r, h;
  CHECK(png_load(out_path("mean.png"), &m) && png_load(out_path("ref.png"), &r) &&
        png_load(out_path("head.png"), &h));
  if (m.s && r.s && h.s) {
    long differ = 0, from_head = 0;
    CHECK(m.w == r.w && m.h == r.h && m.w == h.w && m.h == h.h);
    for (int y = 0; y < m.h && y < r.h && y < h.h; y++)
      for (int x = 0; x < m.w && x < r.w && x < h.w; x++) {
        differ += px(&m, x, y) != px(&r, x, y);
        from_head += px(&m, x, y) != px(&h, x, y);
      }
    CHECK(differ == 0 && from_head > 100);
  }
  if (m.s) cairo_surface_destroy(m.s);
  if (r.s) cairo_surface_destroy(r.s);
  if (h.s) cairo_surface_destroy(h.s);
#endif
}

int main(void) {
  if (!mkdtemp(OUT_DIR)) return 1;
  RUN(test_colormaps_match_matplotlib);
  RUN(test_label_stride_thins_long_axes);
  RUN(test_labels_json);
  RUN(test_bad_inputs_fail_cleanly);
  RUN(test_input_from_safetensors);
  RUN(test_html_page_is_self_contained);
  RUN(test_html_weights_round_trip);
  RUN(test_html_cross_page_names_output_and_source);
  RUN(test_cli_viz_and_diagnose);
  RUN(test_save_round_trip);
  RUN(test_cli_mean_and_cross_marker);
  RUN(test_report_writes_everything);
  RUN(test_html_page_in_headless_chromium);
  RUN(test_html_long_rows_visible_in_chromium);
#ifdef ATTN_HAVE_CAIRO
  RUN(test_png_heatmap_is_oriented_and_coloured);
  RUN(test_png_bone_graded_and_thinned_500);
  RUN(test_svg_and_pdf_are_well_formed);
  RUN(test_grid_and_model_views);
  RUN(test_cross_grid_has_the_mean_column);
  RUN(test_constant_matrix_and_missing_labels);
  RUN(test_write_is_atomic);
#else
  RUN_SKIPPED(test_png_heatmap_is_oriented_and_coloured, "built without cairo");
  RUN_SKIPPED(test_png_bone_graded_and_thinned_500, "built without cairo");
  RUN_SKIPPED(test_svg_and_pdf_are_well_formed, "built without cairo");
  RUN_SKIPPED(test_grid_and_model_views, "built without cairo");
  RUN_SKIPPED(test_cross_grid_has_the_mean_column, "built without cairo");
  RUN_SKIPPED(test_constant_matrix_and_missing_labels, "built without cairo");
  RUN_SKIPPED(test_write_is_atomic, "built without cairo");
#endif
  if (!getenv("ATTN_KEEP_TEST_OUTPUT")) remove_out_dir();
#ifdef ATTN_HAVE_CAIRO
  attn_viz_release_fonts(); /* font caches, so LeakSanitizer sees no leaks */
#endif
  HARNESS_END();
}
