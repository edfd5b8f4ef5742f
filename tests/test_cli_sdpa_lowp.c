/* `attn sdpa` on F16 / BF16 files (tools/golden_sdpa.py: q, k, v, dout and
 * a float mask rounded to the dtype and stored in it; the float64 reference
 * on the rounded values; outputs F32):
 * - math backend: every tensor widened to F32 exactly, so the f32 tolerance
 *   of test_cli_sdpa.c (1e-5 + 1e-4 relative) holds;
 * - auto / flash: the fp16 kernel (f32 arithmetic: the same tolerance) or
 *   the bf16 kernel (on AMX / AVX512_BF16 or the portable path P and dS are
 *   rounded to bf16: 2e-2, sdpa_bf16.h's ~1e-2; without a bf16 unit its path
 *   is the f32 flash on widened blocks), and the tool's output is bit for
 *   bit the library's bf16 kernel called directly;
 * - a position variant (alibi), or q, k, v of mixed dtypes: widened, bit for
 *   bit the F32 file with the same values;
 * - packed variable-length files (cu_seqlens) with F16 / BF16 q, k, v: bit
 *   for bit the library's varlen fp16 / bf16 kernels (auto, flash) or the
 *   f32 math varlen on the widened values (math). */
#include <sys/stat.h>
#include <unistd.h>

#include "attn/sdpa_bf16.h"
#include "attn/sdpa_varlen.h"
#include "harness.h"
#include "round16.h"
#include "tool_run.h"

static char bin[512], tmpdir[64];

/* q, k, v, mask, key_lens, dout of golden file g (with their dtypes) into
 * path; widen: F16 / BF16 of these as F32; meta_key/val: one more key. */
static void write_input(const attn_st *g, const char *path, const char *const *widen,
                        const char *meta_key, const char *meta_val) {
  static const char *const inputs[] = {"q", "k", "v", "mask", "key_lens", "dout", NULL};
  attn_st *in = NULL, *wide = NULL;
  CHECK_OK(attn_st_new(&in));
  for (int i = 0; inputs[i]; i++) {
    const attn_tensor *t = attn_st_get(g, inputs[i]);
    if (t) CHECK_OK(attn_st_add(in, inputs[i], t->dtype, t->ndim, t->shape, t->data));
  }
  for (int i = 0; i < attn_st_meta_count(g); i++)
    CHECK_OK(attn_st_set_meta(in, attn_st_meta_key(g, i), attn_st_meta(g, attn_st_meta_key(g, i))));
  if (meta_key) CHECK_OK(attn_st_set_meta(in, meta_key, meta_val));
  /* widen everything but the names not in widen */
  const char *keep[8] = {NULL};
  int nk = 0;
  for (int i = 0; inputs[i] && widen; i++) {
    int w = 0;
    for (int j = 0; widen[j]; j++) w |= !strcmp(widen[j], inputs[i]);
    if (!w) keep[nk++] = inputs[i];
  }
  CHECK_OK(attn_st_widen(in, widen ? keep : inputs, &wide));
  CHECK_OK(attn_st_save(wide, path));
  attn_st_free(in);
  attn_st_free(wide);
}

/* Runs the tool on path with opts; *out = its OUT (NULL on failure). */
static void run_sdpa(const char *path, const char *opts, attn_st **out) {
  char o[128], args[512], err[4096];
  snprintf(o, sizeof o, "%s/out.safetensors", tmpdir);
  unlink(o);
  snprintf(args, sizeof args, "sdpa '%s' '%s' %s", path, o, opts);
  int rc = tool_run("", bin, tmpdir, args, NULL, 0, err, sizeof err);
  if (rc) printf("  %s %s: exit %d: %s", path, opts, rc, err);
  CHECK(rc == 0);
  *out = NULL;
  if (!rc) CHECK_OK(attn_st_load(o, out));
}

static const char *const results[] = {"out", "lse", "dq", "dk", "dv"};

static void against_golden(const char *name, const char *opts, double atol, double rtol) {
  char g_path[256], in[128];
  snprintf(g_path, sizeof g_path, "tests/golden/sdpa_%s.safetensors", name);
  snprintf(in, sizeof in, "%s/in.safetensors", tmpdir);
  attn_st *g = NULL, *o = NULL;
  CHECK_OK(attn_st_load(g_path, &g));
  if (!g) return;
  CHECK(attn_st_get(g, "q")->dtype != ATTN_F32);
  write_input(g, in, NULL, NULL, NULL);
  run_sdpa(in, opts, &o);
  double worst = 0;
  for (int i = 0; o && i < 5; i++) {
    const attn_tensor *a = attn_st_get(o, results[i]), *b = attn_st_get(g, results[i]);
    CHECK(a && b && a->dtype == ATTN_F32 && attn_tensor_numel(a) == attn_tensor_numel(b));
    if (!a || !b || attn_tensor_numel(a) != attn_tensor_numel(b)) continue;
    double e = CHECK_CLOSE(results[i], a->data, b->data, attn_tensor_numel(b), atol, rtol);
    if (e > worst) worst = e;
  }
  printf("  %-18s %-16s max abs err %.1e\n", name, opts, worst);
  attn_st_free(g);
  attn_st_free(o);
}

static void test_golden_math_widened(void) {
  against_golden("bf16_causal_gqa", "--backend math", 1e-5, 1e-4);
  against_golden("f16_add_mask", "--backend math", 1e-5, 1e-4);
  against_golden("bf16_window_dv", "--backend math", 1e-5, 1e-4);
}

static void test_golden_lowp_kernels(void) {
  against_golden("f16_add_mask", "", 1e-5, 1e-4);
  against_golden("f16_add_mask", "--backend flash", 1e-5, 1e-4);
  against_golden("bf16_causal_gqa", "", 2e-2, 2e-2);
  against_golden("bf16_window_dv", "--backend flash", 2e-2, 2e-2);
}

/* The tool's bf16 result is the bf16 kernel's (bit for bit). */
static void test_bf16_kernel_runs(void) {
  char in[128];
  snprintf(in, sizeof in, "%s/in.safetensors", tmpdir);
  attn_st *g = NULL, *o = NULL;
  CHECK_OK(attn_st_load("tests/golden/sdpa_bf16_causal_gqa.safetensors", &g));
  if (!g) return;
  write_input(g, in, NULL, NULL, NULL);
  run_sdpa(in, "", &o);
  const attn_tensor *q = attn_st_get(g, "q"), *k = attn_st_get(g, "k"), *v = attn_st_get(g, "v");
  const attn_tensor *kl = attn_st_get(g, "key_lens");
  attn_sdpa_desc d;
  attn_sdpa_desc_init(&d, q->shape[0], q->shape[1], k->shape[1], q->shape[2], k->shape[2],
                      q->shape[3], v->shape[3]);
  d.causal = 1;
  d.key_lens = kl->data;
  int64_t n = attn_tensor_numel(q) / q->shape[3] * v->shape[3], nl = n / v->shape[3];
  float *out = malloc(sizeof(float) * (size_t)n), *lse = malloc(sizeof(float) * (size_t)nl);
  CHECK_OK(attn_sdpa_forward_bf16(&d, q->data, k->data, v->data, out, lse));
  const attn_tensor *got = o ? attn_st_get(o, "out") : NULL;
  CHECK(got && !memcmp(got->data, out, sizeof(float) * (size_t)n));
  attn_st_free(g);
  attn_st_free(o);
  free(out);
  free(lse);
}

/* --path P runs the bf16 kernel's path P (the library's call with that path,
 * bit for bit) where this CPU has it, else exits 1 naming it; --path math the
 * widened reference; --backend takes only the f32 words (usage error). */
static void test_path_option(void) {
  char in[128], args[512], err[2048];
  snprintf(in, sizeof in, "%s/in.safetensors", tmpdir);
  attn_st *g = NULL;
  CHECK_OK(attn_st_load("tests/golden/sdpa_bf16_causal_gqa.safetensors", &g));
  if (!g) return;
  write_input(g, in, NULL, NULL, NULL);
  const attn_tensor *q = attn_st_get(g, "q"), *k = attn_st_get(g, "k"), *v = attn_st_get(g, "v");
  attn_sdpa_desc d;
  attn_sdpa_desc_init(&d, q->shape[0], q->shape[1], k->shape[1], q->shape[2], k->shape[2],
                      q->shape[3], v->shape[3]);
  d.causal = 1;
  d.key_lens = attn_st_get(g, "key_lens")->data;
  const int64_t n = attn_tensor_numel(q) / q->shape[3] * v->shape[3], nl = n / v->shape[3];
  float *out = malloc(sizeof(float) * (size_t)n), *lse = malloc(sizeof(float) * (size_t)nl);
  static const char *const names[] = {"math", "flash", "portable", "simd", "amx", "f32"};
  for (int i = 0; i < 6; i++) {
    attn_sdpa_path p;
    CHECK_OK(attn_sdpa_path_from_name(names[i], &p));
    snprintf(args, sizeof args, "--path %s", names[i]);
    if (!attn_sdpa_path_available(ATTN_BF16, p)) {
      char o[160];
      snprintf(o, sizeof o, "%s/o.safetensors", tmpdir);
      snprintf(args, sizeof args, "sdpa '%s' '%s' --path %s", in, o, names[i]);
      CHECK(tool_run("", bin, tmpdir, args, NULL, 0, err, sizeof err) == 1);
      CHECK(strstr(err, "attn sdpa: ") == err);
      continue;
    }
    attn_st *o = NULL;
    run_sdpa(in, args, &o);
    CHECK_OK(attn_sdpa_forward(&d, &(attn_sdpa_args){.dtype = ATTN_BF16,
                                                     .path = p,
                                                     .q = q->data,
                                                     .k = k->data,
                                                     .v = v->data,
                                                     .out = out,
                                                     .lse = lse}));
    const attn_tensor *got = o ? attn_st_get(o, "out") : NULL;
    CHECK(got && !memcmp(got->data, out, sizeof(float) * (size_t)n));
    if (got && memcmp(got->data, out, sizeof(float) * (size_t)n)) printf("  --path %s\n", names[i]);
    attn_st_free(o);
  }
  /* RoPE rotates f32 q, k in the tool: refused with a 16-bit kernel path, not misread */
  write_input(g, in, NULL, "rope", "half");
  snprintf(args, sizeof args, "sdpa '%s' '%s/r.safetensors' --path portable", in, tmpdir);
  CHECK(tool_run("", bin, tmpdir, args, NULL, 0, err, sizeof err) == 1 && strstr(err, "rope"));
  snprintf(args, sizeof args, "sdpa '%s' x --backend amx", in);
  CHECK(tool_run("", bin, tmpdir, args, NULL, 0, err, sizeof err) == 2 && strstr(err, "--backend"));
  snprintf(args, sizeof args, "sdpa '%s' x --path fast", in);
  CHECK(tool_run("", bin, tmpdir, args, NULL, 0, err, sizeof err) == 2 && strstr(err, "fast"));
  free(out);
  free(lse);
  attn_st_free(g);
}

/* bit-equal OUTs of the lowp file (less `widen`, plus a key) and of the
 * same values all in F32 */
static void same_as_f32(const char *golden, const char *const *widen, const char *key,
                        const char *val, const char *opts) {
  char a[128], b[128];
  snprintf(a, sizeof a, "%s/a.safetensors", tmpdir);
  snprintf(b, sizeof b, "%s/b.safetensors", tmpdir);
  attn_st *g = NULL, *oa = NULL, *ob = NULL;
  CHECK_OK(attn_st_load(golden, &g));
  if (!g) return;
  write_input(g, a, widen, key, val);
  write_input(g, b, (const char *const[]){"q", "k", "v", "mask", "dout", NULL}, key, val);
  run_sdpa(a, opts, &oa);
  run_sdpa(b, opts, &ob);
  for (int i = 0; oa && ob && i < 5; i++) {
    const attn_tensor *x = attn_st_get(oa, results[i]), *y = attn_st_get(ob, results[i]);
    CHECK(x && y && x->dtype == ATTN_F32 && attn_tensor_nbytes(x) == attn_tensor_nbytes(y));
    if (x && y && attn_tensor_nbytes(x) == attn_tensor_nbytes(y))
      CHECK(!memcmp(x->data, y->data, attn_tensor_nbytes(x)));
  }
  attn_st_free(g);
  attn_st_free(oa);
  attn_st_free(ob);
}

static void test_widened_exactly(void) {
  /* ALiBi: no bf16 kernel for it, the f32 flash on the widened values */
  same_as_f32("tests/golden/sdpa_bf16_causal_gqa.safetensors", NULL, "alibi", "true", "");
  /* RoPE on f16 q and k */
  same_as_f32("tests/golden/sdpa_f16_add_mask.safetensors", NULL, "rope", "half", "--backend flash");
  /* q in F32, k and v in BF16: mixed, widened */
  same_as_f32("tests/golden/sdpa_bf16_window_dv.safetensors", (const char *const[]){"q", NULL},
              NULL, NULL, "");
  /* math: always widened */
  same_as_f32("tests/golden/sdpa_bf16_window_dv.safetensors", NULL, NULL, NULL, "--backend math");
}

/* The library's varlen results on a packed batch (q, k, v the 16-bit bits
 * u of dtype dt, or their f32 values x with the math backend): out, lse as
 * [Hq, total_q] (the tool's layout), dq, dk, dv; into r[0..4]. */
static void varlen_library(attn_dtype dt, int math, const attn_sdpa_desc *d,
                           const attn_sdpa_varlen *vl, uint16_t *const u[3], float *const x[3],
                           const float *dout, float *r[5]) {
  const int64_t tq = vl->total_q, Hq = d->Hq;
  float *lse = malloc(sizeof(float) * (size_t)(tq * Hq + 1));
  if (math) {
    CHECK_OK(attn_sdpa_varlen_forward(d, vl, ATTN_BACKEND_MATH, x[0], x[1], x[2], r[0], lse));
    CHECK_OK(attn_sdpa_varlen_backward(d, vl, ATTN_BACKEND_MATH, x[0], x[1], x[2], r[0], lse, dout,
                                       r[2], r[3], r[4]));
  } else if (dt == ATTN_BF16) {
    CHECK_OK(attn_sdpa_varlen_forward_bf16(d, vl, u[0], u[1], u[2], r[0], lse));
    CHECK_OK(attn_sdpa_varlen_backward_bf16(d, vl, u[0], u[1], u[2], r[0], lse, dout, r[2], r[3],
                                            r[4]));
  } else {
    CHECK_OK(attn_sdpa_varlen_forward_f16(d, vl, u[0], u[1], u[2], r[0], lse));
    CHECK_OK(attn_sdpa_varlen_backward_f16(d, vl, u[0], u[1], u[2], r[0], lse, dout, r[2], r[3],
                                           r[4]));
  }
  for (int64_t s = 0; s < d->B; s++) { /* [Hq, len] per sequence -> [Hq, total_q] */
    const int64_t q0 = vl->cu_seqlens_q[s], len = vl->cu_seqlens_q[s + 1] - q0;
    for (int64_t h = 0; h < Hq; h++)
      for (int64_t i = 0; i < len; i++)
        r[1][h * tq + q0 + i] = lse[Hq * q0 + h * len + i];
  }
  free(lse);
}

/* Packed F16 / BF16 files (three sequences, one without queries, GQA,
 * causal + window): the tool's results are the library's, bit for bit. */
static void test_varlen_packed(void) {
  enum { B = 3, HQ = 4, HKV = 2, D = 8, DV = 12 };
  const int32_t cq[B + 1] = {0, 9, 9, 29}, ck[B + 1] = {0, 12, 17, 37};
  const int64_t tq = cq[B], tk = ck[B], sc[1] = {B + 1};
  const int64_t shp[4][3] = {{tq, HQ, D}, {tk, HKV, D}, {tk, HKV, DV}, {tq, HQ, DV}};
  const int64_t n[5] = {tq * HQ * DV, tq * HQ, tq * HQ * D, tk * HKV * D, tk * HKV * DV};
  const attn_sdpa_varlen vl = {cq, ck, tq, tk};
  attn_sdpa_desc d;
  attn_sdpa_desc_init(&d, B, HQ, HKV, 20, 20, D, DV);
  d.causal = 1;
  d.window_left = 6;
  char in[128];
  snprintf(in, sizeof in, "%s/varlen.safetensors", tmpdir);
  for (int bf = 0; bf < 2; bf++) {
    const attn_dtype dt = bf ? ATTN_BF16 : ATTN_F16;
    float *x[4];
    uint16_t *u[3];
    attn_st *f = NULL;
    CHECK_OK(attn_st_new(&f));
    for (int t = 0; t < 4; t++) {
      const int64_t m = shp[t][0] * shp[t][1] * shp[t][2];
      x[t] = malloc(sizeof(float) * (size_t)m);
      fill_uniform(x[t], m, 40 + t, -1, 1);
      if (t == 3) break;
      u[t] = malloc(2 * (size_t)m);
      round16(x[t], u[t], m, bf);
      CHECK_OK(attn_st_add(f, t == 0 ? "q" : t == 1 ? "k" : "v", dt, 3, shp[t], u[t]));
    }
    CHECK_OK(attn_st_add_f32(f, "dout", 3, shp[3], x[3]));
    CHECK_OK(attn_st_add(f, "cu_seqlens_q", ATTN_I32, 1, sc, cq));
    CHECK_OK(attn_st_add(f, "cu_seqlens_k", ATTN_I32, 1, sc, ck));
    CHECK_OK(attn_st_set_meta(f, "causal", "true"));
    CHECK_OK(attn_st_set_meta(f, "window_left", "6"));
    CHECK_OK(attn_st_save(f, in));
    static const char *const opts[] = {"", "--backend flash", "--backend math"};
    for (int o = 0; o < 3; o++) {
      float *r[5];
      for (int i = 0; i < 5; i++)
        r[i] = calloc((size_t)n[i] + 1, sizeof(float));
      varlen_library(dt, o == 2, &d, &vl, u, x, x[3], r);
      attn_st *got = NULL;
      run_sdpa(in, opts[o], &got);
      for (int i = 0; got && i < 5; i++) {
        const attn_tensor *t = attn_st_get(got, results[i]);
        CHECK(t && t->dtype == ATTN_F32 && attn_tensor_numel(t) == n[i]);
        if (t && attn_tensor_numel(t) == n[i])
          CHECK(!memcmp(t->data, r[i], sizeof(float) * (size_t)n[i]));
      }
      printf("  varlen %s %-16s %s\n", bf ? "bf16" : "f16", opts[o], got ? "ran" : "failed");
      attn_st_free(got);
      for (int i = 0; i < 5; i++)
        free(r[i]);
    }
    attn_st_free(f);
    for (int t = 0; t < 4; t++)
      free(x[t]);
    for (int t = 0; t < 3; t++)
      free(u[t]);
  }
}

int main(int argc, char **argv) {
  (void)argc;
  tool_path(argv[0], bin, sizeof bin);
  snprintf(tmpdir, sizeof tmpdir, "/tmp/attn_sdpa_lowp_XXXXXX");
  if (!mkdtemp(tmpdir)) {
    printf("mkdtemp failed\n");
    return 1;
  }
  RUN(test_golden_math_widened);
  RUN(test_golden_lowp_kernels);
  RUN(test_bf16_kernel_runs);
  RUN(test_path_option);
  RUN(test_widened_exactly);
  RUN(test_varlen_packed);
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  if (system(cmd)) printf("  could not remove %s\n", tmpdir);
  HARNESS_END();
}
