/* `attn sdpa` end to end: the golden inputs through the built tool compared
 * with the golden outputs, and bad inputs (exit code, message naming the
 * tensor or key, no output file). The tool is $ATTN_BIN (set by `make test`),
 * else <dir of this program>/../attn. Tolerances as in test_sdpa.c. */
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static char bin[512], tmpdir[64];

static int file_exists(const char *path) {
  struct stat s;
  return stat(path, &s) == 0;
}

/* Runs `bin args` with stdout/stderr into tmpdir; returns the exit status and
 * leaves stderr's text in err (and stdout's in out when non-NULL). */
static int run_tool(const char *args, char *err, size_t nerr, char *out, size_t nout) {
  char cmd[2048], ep[128], op[128];
  snprintf(ep, sizeof ep, "%s/stderr.txt", tmpdir);
  snprintf(op, sizeof op, "%s/stdout.txt", tmpdir);
  snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>'%s'", bin, args, op, ep);
  int rc = system(cmd);
  const char *paths[2] = {ep, op};
  char *bufs[2] = {err, out};
  size_t ns[2] = {nerr, nout};
  for (int i = 0; i < 2; i++) {
    if (!bufs[i]) continue;
    bufs[i][0] = '\0';
    FILE *f = fopen(paths[i], "r");
    if (!f) continue;
    size_t n = fread(bufs[i], 1, ns[i] - 1, f);
    bufs[i][n] = '\0';
    fclose(f);
  }
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

static const char *const inputs[] = {"q",
                                     "k",
                                     "v",
                                     "mask",
                                     "key_lens",
                                     "dout",
                                     "alibi_slopes",
                                     "sinks",
                                     "cu_seqlens_q",
                                     "cu_seqlens_k",
                                     "prefix_lens"};

/* Writes the input part (and metadata) of golden file `g` to path; skip names
 * the given tensor. */
static void write_input(const attn_st *g, const char *path, const char *skip) {
  attn_st *in = NULL;
  CHECK_OK(attn_st_new(&in));
  for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
    const attn_tensor *t = attn_st_get(g, inputs[i]);
    if (t && (!skip || strcmp(skip, inputs[i])))
      CHECK_OK(attn_st_add(in, inputs[i], t->dtype, t->ndim, t->shape, t->data));
  }
  for (int i = 0; i < attn_st_meta_count(g); i++)
    CHECK_OK(attn_st_set_meta(in, attn_st_meta_key(g, i), attn_st_meta(g, attn_st_meta_key(g, i))));
  CHECK_OK(attn_st_save(in, path));
  attn_st_free(in);
}

static void compare(const attn_st *got, const attn_st *want, const char *name, double atol,
                    double rtol, double *maxerr) {
  const attn_tensor *a = attn_st_get(got, name), *b = attn_st_get(want, name);
  CHECK(a && b && a->dtype == ATTN_F32 && a->ndim == b->ndim);
  if (!a || !b || a->ndim != b->ndim) return;
  for (int i = 0; i < a->ndim; i++) CHECK(a->shape[i] == b->shape[i]);
  double e = CHECK_CLOSE(name, a->data, b->data, attn_tensor_numel(b), atol, rtol);
  if (e > *maxerr) *maxerr = e;
}

static void golden_through_cli(const char *name, const char *opts, double atol, double rtol) {
  char gpath[256], in[128], out[128], args[512], err[4096];
  /* cap_*: tools/golden_softcap.py (softcap and sinks; OUT also has dsinks);
   * plm_*: tools/golden_prefix_lm.py (tensor prefix_lens, dense and varlen) */
  snprintf(gpath, sizeof gpath,
           strncmp(name, "cap_", 4) && strncmp(name, "plm_", 4) ? "tests/golden/sdpa_%s.safetensors"
                                                                : "tests/golden/%s.safetensors",
           name);
  snprintf(in, sizeof in, "%s/in.safetensors", tmpdir);
  snprintf(out, sizeof out, "%s/out.safetensors", tmpdir);
  attn_st *g = NULL, *o = NULL;
  CHECK_OK(attn_st_load(gpath, &g));
  if (!g) return;
  write_input(g, in, NULL);
  unlink(out);
  snprintf(args, sizeof args, "sdpa '%s' '%s' %s", in, out, opts);
  int rc = run_tool(args, err, sizeof err, NULL, 0);
  if (rc != 0) printf("  %s: exit %d: %s", name, rc, err);
  CHECK(rc == 0);
  CHECK_OK(attn_st_load(out, &o));
  if (o) {
    double e = 0;
    const int sinks = attn_st_get(g, "dsinks") != NULL;
    const int slopes = attn_st_get(g, "alibi_slopes") != NULL; /* OUT also has dalibi_slopes */
    CHECK(attn_st_count(o) == 5 + sinks + slopes);
    if (sinks) compare(o, g, "dsinks", atol, rtol, &e);
    compare(o, g, "out", atol, rtol, &e);
    compare(o, g, "lse", atol, rtol, &e);
    compare(o, g, "dq", atol, rtol, &e);
    compare(o, g, "dk", atol, rtol, &e);
    compare(o, g, "dv", atol, rtol, &e);
    printf("  cli %-20s %-22s max abs err %.1e\n", name, opts, e);
  }
  attn_st_free(g);
  attn_st_free(o);
}

static void golden_all(const char *opts) {
  static const char *cases[] = {"plain", "causal", "causal_lq_lt_lk", "causal_lq_gt_lk", "window",
                                "window_left_causal", "key_lens", "bool_mask_2d",
                                "bool_mask_b11k", "add_mask", "gqa", "dv_ne_d", "masked_batch",
                                "scale", "combined", "big"};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    golden_through_cli(cases[i], opts, 1e-5, 1e-4);
  golden_through_cli("large_logits", opts, 1e-4, 1e-4);
  golden_through_cli("large_offset", opts, 2e-3, 2e-3);
  golden_through_cli("cap_sdpa_softcap_sinks_masks", opts, 2e-5, 1e-4);
  golden_through_cli("cap_sdpa_gemma_tiles", opts, 2e-5, 1e-4);
  /* packed varlen file with softcap, sinks, per-sequence slopes (refused before: peer suite) */
  golden_through_cli("cap_sdpa_varlen", opts, 2e-5, 1e-4);
  /* prefix-LM (tensor prefix_lens), dense with window / key_lens / mask, and packed varlen */
  golden_through_cli("plm_basic", opts, 1e-5, 1e-4);
  golden_through_cli("plm_combined", opts, 1e-5, 1e-4);
  golden_through_cli("plm_varlen", opts, 1e-5, 1e-4);
}

static void test_cli_reproduces_golden_files_math(void) {
  golden_all("--backend math");
  golden_through_cli("combined", "--backend math --threads 1", 1e-5, 1e-4);
  golden_through_cli("combined", "--backend math --threads 3", 1e-5, 1e-4);
  golden_through_cli("cap_sdpa_varlen", "--backend flash", 2e-5, 1e-4);
}

/* the default backend (auto: flash where it runs, else math) */
static void test_cli_reproduces_golden_files_default(void) { golden_all(""); }

/* without dout: only out and lse */
static void test_cli_forward_only(void) {
  char in[128], out[128], args[512], err[4096];
  snprintf(in, sizeof in, "%s/in.safetensors", tmpdir);
  snprintf(out, sizeof out, "%s/out.safetensors", tmpdir);
  attn_st *g = NULL, *o = NULL;
  CHECK_OK(attn_st_load("tests/golden/sdpa_key_lens.safetensors", &g));
  if (!g) return;
  write_input(g, in, "dout");
  attn_st *in_st = NULL; /* the key safetensors tooling writes is accepted */
  CHECK_OK(attn_st_load(in, &in_st));
  CHECK_OK(attn_st_set_meta(in_st, "format", "pt"));
  CHECK_OK(attn_st_save(in_st, in));
  attn_st_free(in_st);
  unlink(out);
  snprintf(args, sizeof args, "sdpa '%s' '%s' --backend auto", in, out);
  CHECK(run_tool(args, err, sizeof err, NULL, 0) == 0);
  CHECK_OK(attn_st_load(out, &o));
  if (o) {
    double e = 0;
    CHECK(attn_st_count(o) == 2 && attn_st_get(o, "dq") == NULL);
    compare(o, g, "out", 1e-5, 1e-4, &e);
    compare(o, g, "lse", 1e-5, 1e-4, &e);
  }
  attn_st_free(g);
  attn_st_free(o);
}

/* A golden file with its metadata keys drop[0..ndrop) spelt otherwise: keys[i]
 * = vals[i] replace them (nkeys 0..2). Returns the exit status; out and dq
 * compared with the golden output when 0. */
static int meta_spelt(const char *golden, const char *const *drop, int ndrop,
                      const char *const *keys, const char *const *vals, int nkeys, char *err,
                      size_t nerr) {
  char in[128], out[128], args[512];
  snprintf(in, sizeof in, "%s/in.safetensors", tmpdir);
  snprintf(out, sizeof out, "%s/out.safetensors", tmpdir);
  attn_st *g = NULL, *w = NULL, *o = NULL;
  CHECK_OK(attn_st_load(golden, &g));
  CHECK_OK(attn_st_new(&w));
  if (!g || !w) return -1;
  for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++) {
    const attn_tensor *t = attn_st_get(g, inputs[i]);
    if (t) CHECK_OK(attn_st_add(w, inputs[i], t->dtype, t->ndim, t->shape, t->data));
  }
  for (int i = 0; i < attn_st_meta_count(g); i++) {
    int dropped = 0;
    for (int x = 0; x < ndrop; x++)
      dropped |= !strcmp(attn_st_meta_key(g, i), drop[x]);
    if (!dropped)
      CHECK_OK(attn_st_set_meta(w, attn_st_meta_key(g, i), attn_st_meta(g, attn_st_meta_key(g, i))));
  }
  for (int i = 0; i < nkeys; i++) CHECK_OK(attn_st_set_meta(w, keys[i], vals[i]));
  CHECK_OK(attn_st_save(w, in));
  unlink(out);
  snprintf(args, sizeof args, "sdpa '%s' '%s' --backend math", in, out);
  int rc = run_tool(args, err, nerr, NULL, 0);
  if (rc == 0 && attn_st_load(out, &o) == ATTN_OK) {
    double e = 0;
    compare(o, g, "out", 1e-5, 1e-4, &e);
    compare(o, g, "dq", 1e-5, 1e-4, &e);
  }
  if (rc != 0) CHECK(!file_exists(out));
  attn_st_free(g);
  attn_st_free(w);
  attn_st_free(o);
  return rc;
}

/* The golden causal case with its "causal" key spelt otherwise. */
static int causal_spelt(const char *const *keys, const char *const *vals, int nkeys, char *err,
                        size_t nerr) {
  static const char *const drop[] = {"causal"};
  return meta_spelt("tests/golden/sdpa_causal.safetensors", drop, 1, keys, vals, nkeys, err, nerr);
}

/* The peers' spellings: FlashAttention's window_size "(left, right)" for
 * window_left / window_right, ggml's logit_softcap for softcap; both
 * spellings at once must agree (window: one only). */
static void test_cli_peer_spellings(void) {
  char err[4096];
  static const char *const wdrop[] = {"window_left", "window_right"};
  const char *ws = "window_size";
  static const char *const wvals[] = {"(3, 2)", "[3,2]", "3,2", " ( 3 , 2 ) "};
  for (int i = 0; i < 4; i++)
    CHECK(meta_spelt("tests/golden/sdpa_window.safetensors", wdrop, 2, &ws, &wvals[i], 1, err,
                     sizeof err) == 0);
  static const char *const wbad[] = {"(3)", "(3, -2)", "(a, 2)", "3;2", "(3, 2, 1)"};
  for (int i = 0; i < 5; i++) {
    CHECK(meta_spelt("tests/golden/sdpa_window.safetensors", wdrop, 2, &ws, &wbad[i], 1, err,
                     sizeof err) == 1);
    CHECK(strstr(err, "window_size") != NULL);
  }
  const char *wboth[2] = {"window_size", "window_left"}, *wbv[2] = {"(3, 2)", "3"};
  CHECK(meta_spelt("tests/golden/sdpa_window.safetensors", wdrop, 2, wboth, wbv, 2, err,
                   sizeof err) == 1 &&
        strstr(err, "both"));
  static const char *const cdrop[] = {"softcap"};
  const char *ls = "logit_softcap", *two = "2.0", *lboth[2] = {"softcap", "logit_softcap"};
  const char *agree[2] = {"2.0", "2.0"}, *differ[2] = {"2.0", "3.0"};
  CHECK(meta_spelt("tests/golden/cap_sdpa_softcap.safetensors", cdrop, 1, &ls, &two, 1, err,
                   sizeof err) == 0);
  CHECK(meta_spelt("tests/golden/cap_sdpa_softcap.safetensors", cdrop, 1, lboth, agree, 2, err,
                   sizeof err) == 0);
  CHECK(meta_spelt("tests/golden/cap_sdpa_softcap.safetensors", cdrop, 1, lboth, differ, 2, err,
                   sizeof err) == 1 &&
        strstr(err, "disagree"));
}

/* causal = True as PyTorch users write it, any boolean spelling, and
 * is_causal (F.scaled_dot_product_attention's name) for the same thing;
 * both keys must agree. */
static void test_cli_causal_booleans(void) {
  char err[4096];
  static const char *const trues[] = {"True", "true", "TRUE", "1", "yes", "on"};
  const char *causal = "causal", *is_causal = "is_causal";
  for (int i = 0; i < 6; i++) {
    CHECK(causal_spelt(&causal, &trues[i], 1, err, sizeof err) == 0);
    CHECK(causal_spelt(&is_causal, &trues[i], 1, err, sizeof err) == 0);
  }
  const char *both[2] = {"causal", "is_causal"}, *agree[2] = {"1", "True"}, *differ[2] = {"1", "False"};
  CHECK(causal_spelt(both, agree, 2, err, sizeof err) == 0);
  CHECK(causal_spelt(both, differ, 2, err, sizeof err) == 1 && strstr(err, "disagree"));
  const char *maybe = "maybe";
  CHECK(causal_spelt(&is_causal, &maybe, 1, err, sizeof err) == 1);
  CHECK(strstr(err, "attn sdpa: ") == err && strstr(err, "is_causal") && strstr(err, "expected a boolean"));
}

static void test_cli_help_and_usage(void) {
  char err[4096], out[8192];
  CHECK(run_tool("sdpa --help", err, sizeof err, out, sizeof out) == 0);
  CHECK(strstr(out, "usage: attn sdpa") && strstr(out, "--backend") && strstr(out, "key_lens"));
  CHECK(run_tool("sdpa", err, sizeof err, NULL, 0) == 2);
  CHECK(strstr(err, "usage") != NULL);
  CHECK(run_tool("sdpa a b c", err, sizeof err, NULL, 0) == 2);
  CHECK(run_tool("sdpa a b --frobnicate", err, sizeof err, NULL, 0) == 2);
  CHECK(strstr(err, "--frobnicate") != NULL);
  CHECK(run_tool("sdpa a b --backend fast", err, sizeof err, NULL, 0) == 2);
  CHECK(strstr(err, "fast") != NULL);
  CHECK(run_tool("sdpa a b --threads 0", err, sizeof err, NULL, 0) == 2);
  CHECK(run_tool("sdpa a b --threads", err, sizeof err, NULL, 0) == 2);
}

/* ---- bad inputs: each is a modified copy of a golden input --------------- */

typedef enum { ADD_TENSOR, REPLACE_TENSOR, SET_META } edit_kind;

typedef struct {
  const char *what;   /* for the log */
  edit_kind kind;
  const char *name;   /* tensor or metadata key */
  attn_dtype dtype;   /* for tensors */
  int ndim;
  int64_t shape[5];
  int64_t fill;       /* integer fill value (tensors) */
  const char *value;  /* metadata value */
  const char *expect; /* substring of the message */
} bad_case;

/* c applied to the inputs of tests/golden/<golden>.safetensors */
static void run_bad_case(const bad_case *c, const char *golden) {
  char in[128], out[128], args[512], err[4096];
  snprintf(in, sizeof in, "%s/bad.safetensors", tmpdir);
  snprintf(out, sizeof out, "%s/bad_out.safetensors", tmpdir);
  char gpath[256];
  snprintf(gpath, sizeof gpath, "tests/golden/%s.safetensors", golden);
  attn_st *g = NULL, *b = NULL;
  CHECK_OK(attn_st_load(gpath, &g));
  if (!g) return;
  write_input(g, in, c->kind == REPLACE_TENSOR ? c->name : NULL);
  CHECK_OK(attn_st_load(in, &b));
  if (c->kind == SET_META) {
    CHECK_OK(attn_st_set_meta(b, c->name, c->value));
  } else {
    int64_t n = 1;
    for (int i = 0; i < c->ndim; i++) n *= c->shape[i];
    unsigned char *data = calloc((size_t)n, 8);
    for (int64_t i = 0; i < n; i++) {
      if (c->dtype == ATTN_I32) ((int32_t *)data)[i] = (int32_t)c->fill;
      else if (c->dtype == ATTN_I64) ((int64_t *)data)[i] = c->fill;
      else if (c->dtype == ATTN_F32) ((float *)data)[i] = (float)c->fill;
      else if (c->dtype == ATTN_BOOL || c->dtype == ATTN_U8) data[i] = (unsigned char)c->fill;
    }
    CHECK_OK(attn_st_add(b, c->name, c->dtype, c->ndim, c->shape, data));
    free(data);
  }
  CHECK_OK(attn_st_save(b, in));
  unlink(out);
  snprintf(args, sizeof args, "sdpa '%s' '%s'", in, out);
  int rc = run_tool(args, err, sizeof err, NULL, 0);
  if (rc != 1 || !strstr(err, c->expect) || file_exists(out)) {
    printf("  bad input '%s': exit %d, message: %s", c->what, rc, err);
    h_case_failed = 1;
  }
  attn_st_free(g);
  attn_st_free(b);
}

static void test_cli_rejects_bad_inputs(void) {
  /* combined: q [2,4,12,8] k [2,2,14,8] v [2,2,14,12] mask F32 [4,1,14], key_lens I32 [2] */
  static const bad_case cases[] = {
      {"unknown tensor", ADD_TENSOR, "qq", ATTN_F32, 1, {3}, 0, NULL, "'qq'"},
      {"unknown metadata", SET_META, "causl", 0, 0, {0}, 0, "1", "'causl'"},
      {"causal = 2", SET_META, "causal", 0, 0, {0}, 0, "2", "causal"},
      {"window_left = abc", SET_META, "window_left", 0, 0, {0}, 0, "abc", "window_left"},
      {"window_right = -2", SET_META, "window_right", 0, 0, {0}, 0, "-2", "window_right"},
      {"scale = nan", SET_META, "scale", 0, 0, {0}, 0, "nan", "scale"},
      {"scale = 1x", SET_META, "scale", 0, 0, {0}, 0, "1x", "scale"},
      {"q I32", REPLACE_TENSOR, "q", ATTN_I32, 4, {2, 4, 12, 8}, 1, NULL, "'q'"},
      {"q rank 3", REPLACE_TENSOR, "q", ATTN_F32, 3, {2, 4, 12}, 1, NULL, "'q'"},
      {"q 3 heads", REPLACE_TENSOR, "q", ATTN_F32, 4, {2, 3, 12, 8}, 1, NULL, "multiple"},
      {"k wrong D", REPLACE_TENSOR, "k", ATTN_F32, 4, {2, 2, 14, 7}, 1, NULL, "'k'"},
      {"k wrong B", REPLACE_TENSOR, "k", ATTN_F32, 4, {1, 2, 14, 8}, 1, NULL, "'k'"},
      {"v wrong Lk", REPLACE_TENSOR, "v", ATTN_F32, 4, {2, 2, 13, 12}, 1, NULL, "'v'"},
      {"dout wrong Dv", REPLACE_TENSOR, "dout", ATTN_F32, 4, {2, 4, 12, 8}, 1, NULL, "'dout'"},
      {"mask not broadcastable", REPLACE_TENSOR, "mask", ATTN_F32, 2, {12, 13}, 0, NULL, "'mask'"},
      {"mask rank 5", REPLACE_TENSOR, "mask", ATTN_BOOL, 5, {1, 1, 1, 1, 1}, 1, NULL, "'mask'"},
      {"mask I32", REPLACE_TENSOR, "mask", ATTN_I32, 2, {12, 14}, 1, NULL, "'mask'"},
      {"key_lens too long", REPLACE_TENSOR, "key_lens", ATTN_I64, 1, {2}, 15, NULL, "key_lens"},
      {"key_lens negative", REPLACE_TENSOR, "key_lens", ATTN_I32, 1, {2}, -1, NULL, "key_lens"},
      {"key_lens shape", REPLACE_TENSOR, "key_lens", ATTN_I32, 1, {3}, 1, NULL, "key_lens"},
      {"key_lens F32", REPLACE_TENSOR, "key_lens", ATTN_F32, 1, {2}, 1, NULL, "key_lens"},
      {"sinks [3] for 4 heads", ADD_TENSOR, "sinks", ATTN_F32, 1, {3}, 1, NULL, "'sinks'"},
      {"sinks [4,1]", ADD_TENSOR, "sinks", ATTN_F32, 2, {4, 1}, 1, NULL, "'sinks'"},
      {"sinks I32", ADD_TENSOR, "sinks", ATTN_I32, 1, {4}, 1, NULL, "'sinks'"},
      {"softcap = 0", SET_META, "softcap", 0, 0, {0}, 0, "0", "softcap"},
      {"softcap = -30", SET_META, "softcap", 0, 0, {0}, 0, "-30", "softcap"},
      {"softcap = nan", SET_META, "softcap", 0, 0, {0}, 0, "nan", "softcap"},
      {"softcap = inf", SET_META, "softcap", 0, 0, {0}, 0, "inf", "softcap"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_bad_case(&cases[i], "sdpa_combined");
  /* a packed varlen file (4 heads): the same checks on sinks and softcap */
  static const bad_case varlen[] = {
      {"varlen sinks [3]", REPLACE_TENSOR, "sinks", ATTN_F32, 1, {3}, 1, NULL, "'sinks'"},
      {"varlen softcap = 0", SET_META, "softcap", 0, 0, {0}, 0, "0", "softcap"},
      {"varlen softcap = nan", SET_META, "softcap", 0, 0, {0}, 0, "nan", "softcap"},
  };
  for (size_t i = 0; i < sizeof varlen / sizeof varlen[0]; i++)
    run_bad_case(&varlen[i], "cap_sdpa_varlen");
}

static void test_cli_bad_files(void) {
  char args[512], err[4096], out[128], path[128];
  snprintf(out, sizeof out, "%s/never.safetensors", tmpdir);
  snprintf(args, sizeof args, "sdpa '%s/missing.safetensors' '%s'", tmpdir, out);
  CHECK(run_tool(args, err, sizeof err, NULL, 0) == 1);
  CHECK(strstr(err, "missing.safetensors") != NULL);
  snprintf(path, sizeof path, "%s/garbage.safetensors", tmpdir);
  FILE *f = fopen(path, "wb");
  if (f) fputs("this is not a safetensors file", f), fclose(f);
  snprintf(args, sizeof args, "sdpa '%s' '%s'", path, out);
  CHECK(run_tool(args, err, sizeof err, NULL, 0) == 1);
  CHECK(err[0] != '\0');
  /* missing q */
  attn_st *st = NULL;
  CHECK_OK(attn_st_new(&st));
  float x = 1;
  const int64_t shape[4] = {1, 1, 1, 1};
  CHECK_OK(attn_st_add_f32(st, "k", 4, shape, &x));
  CHECK_OK(attn_st_add_f32(st, "v", 4, shape, &x));
  CHECK_OK(attn_st_save(st, path));
  attn_st_free(st);
  CHECK(run_tool(args, err, sizeof err, NULL, 0) == 1);
  CHECK(strstr(err, "'q'") != NULL);
  CHECK(!file_exists(out));
  /* the flash backend where it cannot run, or an output folder that does not exist */
  snprintf(args, sizeof args, "sdpa tests/golden/sdpa_plain.safetensors '%s'", out);
  CHECK(run_tool(args, err, sizeof err, NULL, 0) == 1); /* golden files hold outputs too */
  CHECK(strstr(err, "unknown tensor") != NULL);
}

/* Writes q [qs], k [ks], v [vs] (zeros), an optional BOOL tensor `extra`
 * [es] of ones, and metadata key=value pairs (NULL-terminated) to path. */
static void write_problem(const char *path, const int64_t qs[4], const int64_t ks[4],
                          const int64_t vs[4], const char *extra, int en, const int64_t *es,
                          const char *const *meta) {
  attn_st *st = NULL;
  CHECK_OK(attn_st_new(&st));
  const int64_t *shapes[3] = {qs, ks, vs};
  const char *names[3] = {"q", "k", "v"};
  float *zeros = calloc(4096, sizeof(float));
  unsigned char *ones = malloc(4096);
  memset(ones, 1, 4096);
  for (int i = 0; i < 3; i++) CHECK_OK(attn_st_add_f32(st, names[i], 4, shapes[i], zeros));
  if (extra) CHECK_OK(attn_st_add(st, extra, ATTN_BOOL, en, es, ones));
  for (int i = 0; meta && meta[i]; i += 2) CHECK_OK(attn_st_set_meta(st, meta[i], meta[i + 1]));
  CHECK_OK(attn_st_save(st, path));
  attn_st_free(st);
  free(zeros);
  free(ones);
}

/* Sizes near INT64_MAX (found by fuzzing): refused with a message, or run,
 * and never a signed overflow on the way (under UBSan that is a "runtime
 * error" and the tool stops). */
static void test_cli_huge_sizes_do_not_overflow(void) {
  char in[128], out[128], args[512], err[4096];
  snprintf(in, sizeof in, "%s/huge.safetensors", tmpdir);
  snprintf(out, sizeof out, "%s/huge_out.safetensors", tmpdir);
  snprintf(args, sizeof args, "sdpa '%s' '%s'", in, out);
  const int64_t G = (int64_t)1 << 62, one[4] = {1, 1, 1, 1}, two[4] = {1, 1, 2, 1};
  const int64_t bm[2] = {1, 1};
  /* an empty batch whose other dims multiply past 2^63: the mask's strides */
  const int64_t qz[4] = {0, G, G, 1}, kz[4] = {0, 1, 1, 1}, mz[4] = {0, G, G, 1};
  write_problem(in, qz, kz, kz, "mask", 4, mz, NULL);
  unlink(out);
  int rc = run_tool(args, err, sizeof err, NULL, 0);
  CHECK(rc == 1 && strstr(err, "too large") && !strstr(err, "runtime error"));
  if (rc != 1 || !strstr(err, "too large")) printf("  empty batch: exit %d: %s", rc, err);
  /* block_size = INT64_MAX: one block each way, an ordinary call */
  const char *bs_max[] = {"block_size", "9223372036854775807", NULL};
  write_problem(in, two, two, two, "block_mask", 2, bm, bs_max);
  rc = run_tool(args, err, sizeof err, NULL, 0);
  CHECK(rc == 0 && file_exists(out));
  if (rc != 0) printf("  block_size INT64_MAX: exit %d: %s", rc, err);
  /* q_offset = INT64_MAX: q_offset + Lq does not fit */
  const char *qo_max[] = {"block_size", "4", "q_offset", "9223372036854775807", NULL};
  write_problem(in, one, one, one, "block_mask", 2, bm, qo_max);
  unlink(out);
  rc = run_tool(args, err, sizeof err, NULL, 0);
  CHECK(rc == 1 && strstr(err, "q_offset") && !file_exists(out));
  if (rc != 1 || !strstr(err, "q_offset")) printf("  q_offset INT64_MAX: exit %d: %s", rc, err);
  for (int b = 0; b < 2; b++) { /* the same through each backend */
    snprintf(args, sizeof args, "sdpa '%s' '%s' --backend %s", in, out, b ? "flash" : "math");
    write_problem(in, two, two, two, "block_mask", 2, bm, bs_max);
    unlink(out);
    rc = run_tool(args, err, sizeof err, NULL, 0);
    CHECK(rc == 0 && file_exists(out));
    if (rc != 0) printf("  block_size INT64_MAX (%s): exit %d: %s", b ? "flash" : "math", rc, err);
  }
}

static void cleanup(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  if (system(cmd) != 0) printf("  could not remove %s\n", tmpdir);
}

/* ATTN_CPU: `attn version` names the level in use and why; an unknown or
 * unavailable level is refused (exit 2) with the levels this CPU has, before
 * any command runs; every available level can be asked for by name. */
static void test_cli_isa_levels(void) {
  static char err[4096], out[4096], saved[64] = "";
  const char *was = getenv("ATTN_CPU"); /* tests/run.sh's level, restored at the end */
  if (was) snprintf(saved, sizeof saved, "%s", was);
  unsetenv("ATTN_CPU");
  CHECK(run_tool("version", err, sizeof err, out, sizeof out) == 0);
  CHECK(strstr(out, "isa: ") != NULL && strstr(out, "levels: generic") != NULL);
  const char *bad[] = {"sse9", "AVX2"};
  for (int b = 0; b < 2; b++) {
    setenv("ATTN_CPU", bad[b], 1);
    CHECK(run_tool("sdpa --help", err, sizeof err, NULL, 0) == 2);
    CHECK(strstr(err, "ATTN_CPU") != NULL && strstr(err, bad[b]) != NULL);
    CHECK(strstr(err, "generic") != NULL); /* the levels this CPU has */
  }
  const char *lv[] = {"generic", "avx2", "avx512", "neon"};
  for (int i = 0; i < 4; i++) {
    char want[64];
    setenv("ATTN_CPU", lv[i], 1);
    int rc = run_tool("version", err, sizeof err, out, sizeof out);
    snprintf(want, sizeof want, "isa: %s (ATTN_CPU=%s)", lv[i], lv[i]);
    if (rc == 0)
      CHECK(strstr(out, want) != NULL);
    else
      CHECK(rc == 2 && strstr(err, "is not available") != NULL);
  }
  if (*saved)
    setenv("ATTN_CPU", saved, 1);
  else
    unsetenv("ATTN_CPU");
}

int main(int argc, char **argv) {
  const char *env = getenv("ATTN_BIN");
  if (env && env[0]) {
    snprintf(bin, sizeof bin, "%s", env);
  } else { /* BUILD/tests/test_cli_sdpa -> BUILD/attn */
    snprintf(bin, sizeof bin, "%s", argc > 0 ? argv[0] : "");
    char *slash = strrchr(bin, '/');
    if (slash) *slash = '\0', slash = strrchr(bin, '/');
    if (slash) strcpy(slash + 1, "attn");
    else snprintf(bin, sizeof bin, "build/attn");
  }
  snprintf(tmpdir, sizeof tmpdir, "/tmp/attn_cli_sdpa_XXXXXX");
  if (!mkdtemp(tmpdir)) {
    printf("mkdtemp failed\n");
    return 1;
  }
  if (!file_exists(bin)) printf("  %s not found (set ATTN_BIN)\n", bin);
  RUN(test_cli_help_and_usage);
  RUN(test_cli_isa_levels);
  RUN(test_cli_huge_sizes_do_not_overflow);
  RUN(test_cli_reproduces_golden_files_math);
  RUN(test_cli_reproduces_golden_files_default);
  RUN(test_cli_forward_only);
  RUN(test_cli_causal_booleans);
  RUN(test_cli_peer_spellings);
  RUN(test_cli_rejects_bad_inputs);
  RUN(test_cli_bad_files);
  cleanup();
  HARNESS_END();
}
