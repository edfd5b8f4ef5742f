/* Train layer: Adam/AdamW, clipping and schedules against PyTorch
 * (tools/golden_train.py -> tests/golden/train.safetensors), NaN/Inf checks,
 * thread-count determinism, checkpoints, the weight EMA against
 * torch.optim.swa_utils.AveragedModel.
 *
 * Tolerances: parameters, m and v after 6 steps, clipped gradients and f32
 * norms: |err| <= 1e-7 + 1e-6 * |want| (we follow torch's float operation
 * order, but the gradient norm is accumulated in double where torch uses
 * float, which moves the clip factor by ~1e-7 relative). Learning rates and
 * the float64 norm: 1e-12 relative (pure double arithmetic). */
#include <dirent.h>
#include <stdint.h>
#include <unistd.h>

#include "harness.h"

#define GOLDEN "tests/golden/train.safetensors"
static const char *NAMES[4] = {"lin.weight", "lin.bias", "norm.weight", "scale"};
static char tmpdir[64];

static void declare(attn_params *p) {
  int64_t w[2] = {3, 5}, b[1] = {3}, n[1] = {4};
  attn_params_init(p);
  CHECK_OK(attn_params_declare(p, NAMES[0], 2, w, NULL));
  CHECK_OK(attn_params_declare(p, NAMES[1], 1, b, NULL));
  CHECK_OK(attn_params_declare(p, NAMES[2], 1, n, NULL));
  CHECK_OK(attn_params_declare(p, NAMES[3], 0, NULL, NULL));
  CHECK_OK(attn_params_alloc(p));
}

/* Copies tensors "<prefix><name>" of the golden file into buf (params layout). */
static void load_into(const attn_st *g, const attn_params *p, const char *prefix, float *buf) {
  char name[128];
  for (int i = 0; i < p->count; i++) {
    snprintf(name, sizeof name, "%s%s", prefix, p->views[i].name);
    const attn_tensor *t;
    CHECK_OK(attn_st_expect(g, name, ATTN_F32, p->views[i].ndim, p->views[i].shape, 1, &t));
    if (t) memcpy(buf + p->views[i].offset, t->data, (size_t)p->views[i].numel * sizeof(float));
  }
}

/* Compares buf (params layout) with the golden tensors "<prefix><name>". */
static void compare(const attn_st *g, const attn_params *p, const char *prefix, const float *buf,
                    double atol, double rtol) {
  char name[128];
  for (int i = 0; i < p->count; i++) {
    snprintf(name, sizeof name, "%s%s", prefix, p->views[i].name);
    const attn_tensor *t = attn_st_get(g, name);
    CHECK(t != NULL);
    if (t) CHECK_CLOSE(name, buf + p->views[i].offset, t->data, p->views[i].numel, atol, rtol);
  }
}

/* Parses a JSON list of numbers from metadata into out; returns the count. */
static int meta_list(const attn_st *g, const char *key, double *out, int max) {
  const char *s = attn_st_meta(g, key);
  int n = 0;
  CHECK(s != NULL);
  if (!s) return 0;
  while (*s && n < max) {
    while (*s == '[' || *s == ',' || *s == ' ' || *s == ']') s++;
    if (!*s) break;
    char *end;
    out[n++] = strtod(s, &end);
    if (end == s) break;
    s = end;
  }
  return n;
}

/* The golden file, and p declared and holding its "init." values (NULL and
 * p untouched when the file cannot be read). */
static attn_st *golden_start(attn_params *p) {
  attn_st *g = NULL;
  CHECK_OK(attn_st_load(GOLDEN, &g));
  if (!g) return NULL;
  declare(p);
  load_into(g, p, "init.", p->data);
  return g;
}

static int close_rel(double got, double want, double rtol) {
  return fabs(got - want) <= rtol * fabs(want);
}

static void test_adamw_with_clip_and_schedule_matches_torch(void) {
  attn_params p;
  attn_st *g = golden_start(&p);
  if (!g) return;
  attn_adam_config cfg = attn_adam_defaults(ATTN_ADAMW);
  cfg.beta1 = 0.9;
  cfg.beta2 = 0.95;
  cfg.eps = 1e-8;
  cfg.weight_decay = 0.1;
  attn_adam opt;
  CHECK_OK(attn_adam_init(&opt, &p, &cfg));
  CHECK_OK(attn_adam_set_decay_rule(&opt, &p, attn_decay_rule_default, NULL));
  CHECK(opt.decay[0] == 1 && opt.decay[1] == 0 && opt.decay[2] == 0 && opt.decay[3] == 1);
  attn_schedule sch = {ATTN_SCHED_WARMUP_COSINE, 1e-2, 1e-4, 2, 5};
  CHECK_OK(attn_schedule_check(&sch));
  double lrs[8], norms[8];
  CHECK(meta_list(g, "adamw_lrs", lrs, 8) == 6 && meta_list(g, "adamw_norms", norms, 8) == 6);
  for (int k = 0; k < 6; k++) {
    char prefix[32];
    snprintf(prefix, sizeof prefix, "grad.%d.", k);
    load_into(g, &p, prefix, p.grad);
    double norm;
    CHECK_OK(attn_clip_grad_norm(&p, 1.0, &norm));
    CHECK(close_rel(norm, norms[k], 1e-6));
    double lr = attn_schedule_lr(&sch, opt.step);
    CHECK(close_rel(lr, lrs[k], 1e-12));
    CHECK_OK(attn_adam_step(&opt, &p, lr));
  }
  CHECK(opt.step == 6);
  compare(g, &p, "adamw.", p.data, 1e-7, 1e-6);
  compare(g, &p, "adamw.m.", opt.m, 1e-7, 1e-6);
  compare(g, &p, "adamw.v.", opt.v, 1e-7, 1e-6);
  attn_adam_free(&opt);
  attn_params_free(&p);
  attn_st_free(g);
}

static void test_adam_matches_torch(void) {
  attn_params p;
  attn_st *g = golden_start(&p);
  if (!g) return;
  attn_adam_config cfg = attn_adam_defaults(ATTN_ADAM);
  CHECK(cfg.weight_decay == 0 && cfg.beta1 == 0.9 && cfg.beta2 == 0.999 && cfg.eps == 1e-8);
  cfg.beta1 = 0.8;
  cfg.beta2 = 0.99;
  cfg.eps = 1e-6;
  cfg.weight_decay = 0.05;
  attn_adam opt;
  CHECK_OK(attn_adam_init(&opt, &p, &cfg));
  CHECK_OK(attn_adam_set_decay_rule(&opt, &p, attn_decay_rule_default, NULL));
  attn_schedule sch = {ATTN_SCHED_CONSTANT, 3e-3, 0, 0, 0};
  CHECK_OK(attn_schedule_check(&sch));
  double lrs[8];
  CHECK(meta_list(g, "adam_lrs", lrs, 8) == 6);
  for (int k = 0; k < 6; k++) {
    char prefix[32];
    snprintf(prefix, sizeof prefix, "grad.%d.", k);
    load_into(g, &p, prefix, p.grad);
    CHECK(attn_schedule_lr(&sch, opt.step) == lrs[k]);
    CHECK_OK(attn_adam_step(&opt, &p, attn_schedule_lr(&sch, opt.step)));
  }
  compare(g, &p, "adam.", p.data, 1e-7, 1e-6);
  compare(g, &p, "adam.m.", opt.m, 1e-7, 1e-6);
  compare(g, &p, "adam.v.", opt.v, 1e-7, 1e-6);
  /* a different update would fail: the golden values are far from the start */
  const attn_tensor *t0 = attn_st_get(g, "init.lin.weight"), *t1 = attn_st_get(g, "adam.lin.weight");
  CHECK(t0 && t1 && fabsf(((float *)t0->data)[0] - ((float *)t1->data)[0]) > 1e-3f);
  attn_adam_free(&opt);
  attn_params_free(&p);
  attn_st_free(g);
}

static void test_clip_matches_torch(void) {
  attn_st *g = NULL;
  CHECK_OK(attn_st_load(GOLDEN, &g));
  if (!g) return;
  attn_params p;
  declare(&p);
  load_into(g, &p, "grad.1.", p.grad);
  double norm = 0;
  CHECK_OK(attn_grad_norm(&p, &norm));
  double want64 = strtod(attn_st_meta(g, "clip_norm_f64"), NULL);
  double want32 = strtod(attn_st_meta(g, "clip_norm_f32"), NULL);
  CHECK(close_rel(norm, want64, 1e-12));
  CHECK(close_rel(norm, want32, 1e-6));
  double before;
  CHECK_OK(attn_clip_grad_norm(&p, 0.5, &before));
  CHECK(before == norm);
  compare(g, &p, "clip.", p.grad, 1e-7, 1e-6);
  double after;
  CHECK_OK(attn_grad_norm(&p, &after));
  CHECK(fabs(after - 0.5) < 1e-5);
  /* below the limit: untouched, bit for bit */
  float saved[64];
  memcpy(saved, p.grad, sizeof saved);
  CHECK_OK(attn_clip_grad_norm(&p, 10.0, NULL));
  CHECK(memcmp(saved, p.grad, sizeof saved) == 0);
  CHECK_ERR(attn_clip_grad_norm(&p, 0.0, NULL), ATTN_EINVAL);
  attn_params_free(&p);
  attn_st_free(g);
}

static void test_schedule_matches_torch_lambdalr(void) {
  attn_st *g = NULL;
  CHECK_OK(attn_st_load(GOLDEN, &g));
  if (!g) return;
  double want[16];
  CHECK(meta_list(g, "sched_lrs", want, 16) == 14);
  attn_schedule s = {ATTN_SCHED_WARMUP_COSINE, 1e-3, 1e-5, 3, 10};
  CHECK_OK(attn_schedule_check(&s));
  for (int k = 0; k < 14; k++) {
    double lr = attn_schedule_lr(&s, k);
    if (!close_rel(lr, want[k], 1e-12)) {
      printf("  step %d: lr %.17g, torch %.17g\n", k, lr, want[k]);
      CHECK(0);
    }
  }
  CHECK(attn_schedule_lr(&s, 0) == 1e-3 / 3 && attn_schedule_lr(&s, 2) == 1e-3);
  CHECK(attn_schedule_lr(&s, 1000) == 1e-5);
  attn_schedule c = {ATTN_SCHED_CONSTANT, 2e-3, 0, 4, 0};
  CHECK_OK(attn_schedule_check(&c));
  CHECK(attn_schedule_lr(&c, 0) == 5e-4 && attn_schedule_lr(&c, 3) == 2e-3 &&
        attn_schedule_lr(&c, 99999) == 2e-3);
  attn_schedule bad1 = {ATTN_SCHED_WARMUP_COSINE, 1e-3, 1e-2, 0, 10};
  attn_schedule bad2 = {ATTN_SCHED_WARMUP_COSINE, 1e-3, 0, 10, 10};
  attn_schedule bad3 = {ATTN_SCHED_CONSTANT, -1, 0, 0, 0};
  CHECK_ERR(attn_schedule_check(&bad1), ATTN_EINVAL);
  CHECK_ERR(attn_schedule_check(&bad2), ATTN_EINVAL);
  CHECK_ERR(attn_schedule_check(&bad3), ATTN_EINVAL);
  attn_st_free(g);
}

static void test_nonfinite_grads_are_named(void) {
  attn_params p;
  declare(&p);
  for (int i = 0; i < 4; i++) fill_uniform(attn_params_grad(&p, i), p.views[i].numel, 7, -1, 1);
  CHECK_OK(attn_grads_check_finite(&p));
  attn_params_grad(&p, 2)[2] = NAN;
  attn_params_grad(&p, 3)[0] = INFINITY;
  CHECK_ERR(attn_grads_check_finite(&p), ATTN_ENUMERIC);
  CHECK(strstr(attn_last_error(), "'norm.weight'") && strstr(attn_last_error(), "NaN") &&
        strstr(attn_last_error(), "index 2"));
  float keep = attn_params_grad(&p, 0)[0];
  CHECK_ERR(attn_clip_grad_norm(&p, 1e-3, NULL), ATTN_ENUMERIC);
  CHECK(strstr(attn_last_error(), "norm.weight") != NULL);
  CHECK(attn_params_grad(&p, 0)[0] == keep); /* not scaled */
  attn_params_grad(&p, 2)[2] = 0;
  CHECK_ERR(attn_grads_check_finite(&p), ATTN_ENUMERIC);
  CHECK(strstr(attn_last_error(), "'scale'") && strstr(attn_last_error(), "+Inf"));
  attn_params_free(&p);
}

static void test_decay_rule_and_validation(void) {
  CHECK(attn_decay_rule_default("enc.0.norm1.weight", NULL) == 0);
  CHECK(attn_decay_rule_default("head.bias", NULL) == 0);
  CHECK(attn_decay_rule_default("ln.LayerNorm.weight", NULL) == 0);
  CHECK(attn_decay_rule_default("head.weight", NULL) == 1);
  CHECK(attn_decay_rule_default("bias_table.weight", NULL) == 1);
  attn_params p, q;
  declare(&p);
  attn_params_init(&q);
  attn_adam opt;
  attn_adam_config cfg = attn_adam_defaults(ATTN_ADAMW);
  CHECK(cfg.weight_decay == 1e-2);
  CHECK_ERR(attn_adam_init(&opt, &q, &cfg), ATTN_EINVAL); /* not allocated */
  cfg.beta1 = 1.0;
  CHECK_ERR(attn_adam_init(&opt, &p, &cfg), ATTN_EINVAL);
  cfg = attn_adam_defaults(ATTN_ADAMW);
  cfg.eps = -1;
  CHECK_ERR(attn_adam_init(&opt, &p, &cfg), ATTN_EINVAL);
  cfg = attn_adam_defaults(ATTN_ADAMW);
  CHECK_OK(attn_adam_init(&opt, &p, &cfg));
  CHECK_OK(attn_adam_set_decay(&opt, 1, 0));
  CHECK(opt.decay[1] == 0);
  CHECK_ERR(attn_adam_set_decay(&opt, 4, 0), ATTN_EINVAL);
  CHECK_ERR(attn_adam_step(&opt, &p, NAN), ATTN_EINVAL);
  CHECK_ERR(attn_adam_step(&opt, &p, -1), ATTN_EINVAL);
  CHECK(opt.step == 0);
  /* weight decay only: zero grads, AdamW shrinks decayed params by lr*wd exactly */
  attn_params_data(&p, 0)[0] = 2.0f;
  attn_params_data(&p, 1)[0] = 2.0f;
  CHECK_OK(attn_adam_step(&opt, &p, 0.5));
  CHECK(attn_params_data(&p, 0)[0] == 2.0f * (float)(1 - 0.5 * 1e-2));
  CHECK(attn_params_data(&p, 1)[0] == 2.0f);
  attn_params r;
  int64_t s[1] = {5};
  attn_params_init(&r);
  CHECK_OK(attn_params_declare(&r, "other", 1, s, NULL));
  CHECK_OK(attn_params_alloc(&r));
  CHECK_ERR(attn_adam_step(&opt, &r, 0.1), ATTN_EINVAL); /* another layout */
  attn_params_free(&r);
  attn_adam_free(&opt);
  attn_params_free(&p);
}

/* Norm and update on a model spanning many chunks: same bits with 1 or 4 threads. */
static void test_results_do_not_depend_on_threads(void) {
  double norms[2];
  float *res[2] = {NULL, NULL};
  int64_t big[2] = {70, 1000}, odd[1] = {12345};
  for (int run = 0; run < 2; run++) {
    attn_set_num_threads(run ? 4 : 1);
    attn_params p;
    attn_params_init(&p);
    CHECK_OK(attn_params_declare(&p, "big.weight", 2, big, NULL));
    CHECK_OK(attn_params_declare(&p, "odd.bias", 1, odd, NULL));
    CHECK_OK(attn_params_alloc(&p));
    fill_uniform(p.data, p.numel, 3, -1, 1);
    attn_adam opt;
    attn_adam_config cfg = attn_adam_defaults(ATTN_ADAMW);
    CHECK_OK(attn_adam_init(&opt, &p, &cfg));
    CHECK(opt.nchunks > 4);
    for (int k = 0; k < 3; k++) {
      fill_uniform(p.grad, p.numel, 10 + (unsigned)k, -3, 3);
      CHECK_OK(attn_clip_grad_norm(&p, 50.0, &norms[run]));
      CHECK_OK(attn_adam_step(&opt, &p, 1e-3));
    }
    res[run] = malloc((size_t)p.numel * 3 * sizeof(float));
    memcpy(res[run], p.data, (size_t)p.numel * sizeof(float));
    memcpy(res[run] + p.numel, opt.m, (size_t)p.numel * sizeof(float));
    memcpy(res[run] + 2 * p.numel, opt.v, (size_t)p.numel * sizeof(float));
    if (run) CHECK(memcmp(res[0], res[1], (size_t)p.numel * 3 * sizeof(float)) == 0);
    attn_adam_free(&opt);
    attn_params_free(&p);
  }
  CHECK(norms[0] == norms[1] && norms[0] > 50.0); /* clipping was active */
  attn_set_num_threads(0);
  free(res[0]);
  free(res[1]);
}

/* The update written out plainly (torch's order, with its fused multiply-adds):
 * the library's vector path must give the same bits on a tensor with a tail. */
static void test_update_matches_plain_loop_bitwise(void) {
  for (int kind = 0; kind < 2; kind++) {
    attn_params p;
    int64_t n1[1] = {1000}, n2[1] = {37};
    attn_params_init(&p);
    CHECK_OK(attn_params_declare(&p, "w", 1, n1, NULL));
    CHECK_OK(attn_params_declare(&p, "ln.bias", 1, n2, NULL));
    CHECK_OK(attn_params_alloc(&p));
    fill_uniform(p.data, p.numel, 5, -2, 2);
    attn_adam_config cfg = attn_adam_defaults((attn_adam_kind)kind);
    cfg.weight_decay = 0.3;
    attn_adam opt;
    CHECK_OK(attn_adam_init(&opt, &p, &cfg));
    CHECK_OK(attn_adam_set_decay_rule(&opt, &p, attn_decay_rule_default, NULL));
    float *rp = malloc((size_t)p.numel * sizeof(float) * 3), *rm = rp + p.numel,
          *rv = rp + 2 * p.numel;
    memcpy(rp, p.data, (size_t)p.numel * sizeof(float));
    memset(rm, 0, (size_t)p.numel * 2 * sizeof(float));
    int same = 1;
    for (int step = 1; step <= 3; step++) {
      double lr = 0.01 * step;
      fill_uniform(p.grad, p.numel, 20 + (unsigned)step, -1, 1);
      CHECK_OK(attn_adam_step(&opt, &p, lr));
      double bc1 = 1 - pow(0.9, step), bc2 = 1 - pow(0.999, step);
      for (int v = 0; v < 2; v++) {
        float wd = v == 0 ? 0.3f : 0.0f; /* ln.bias: no decay */
        for (int64_t i = p.views[v].offset; i < p.views[v].offset + p.views[v].numel; i++) {
          float g = p.grad[i], x = rp[i];
          if (kind == ATTN_ADAMW) x = x * (float)(1 - lr * wd);
          else if (wd != 0) g = fmaf(wd, x, g);
          rm[i] = fmaf((float)(1 - 0.9), g, rm[i] * 0.9f);
          rv[i] = fmaf((float)(1 - 0.999) * g, g, rv[i] * 0.999f);
          float denom = sqrtf(rv[i]) / (float)sqrt(bc2) + 1e-8f;
          rp[i] = x + (float)(-(lr / bc1)) * rm[i] / denom;
        }
      }
      same &= memcmp(rp, p.data, (size_t)p.numel * sizeof(float)) == 0;
      same &= memcmp(rm, opt.m, (size_t)p.numel * sizeof(float)) == 0;
      same &= memcmp(rv, opt.v, (size_t)p.numel * sizeof(float)) == 0;
    }
    CHECK(same);
    free(rp);
    attn_adam_free(&opt);
    attn_params_free(&p);
  }
}

/* Two steps of AdamW on the golden model, as a checkpointable state. */
static void trained_state(attn_params *p, attn_adam *opt) {
  attn_st *g = NULL;
  CHECK_OK(attn_st_load(GOLDEN, &g));
  declare(p);
  attn_adam_config cfg = attn_adam_defaults(ATTN_ADAMW);
  CHECK_OK(attn_adam_init(opt, p, &cfg));
  if (!g) return;
  load_into(g, p, "init.", p->data);
  for (int k = 0; k < 2; k++) {
    char prefix[32];
    snprintf(prefix, sizeof prefix, "grad.%d.", k);
    load_into(g, p, prefix, p->grad);
    CHECK_OK(attn_adam_step(opt, p, 1e-2));
  }
  attn_st_free(g);
}

static void test_checkpoint_round_trip_and_resume(void) {
  attn_params p, q;
  attn_adam o, r;
  trained_state(&p, &o);
  attn_st *extra;
  CHECK_OK(attn_st_new(&extra));
  CHECK_OK(attn_st_set_meta(extra, "config", "{\"d_model\": 64, \"layers\": 2}"));
  CHECK_OK(attn_st_set_meta(extra, "tokenizer", "merges...\n\"quoted\""));
  int64_t n3[1] = {3};
  CHECK_OK(attn_st_add(extra, "data.rng_state", ATTN_U8, 1, n3, "\1\2\3"));
  char path[128];
  snprintf(path, sizeof path, "%s/ck.safetensors", tmpdir);
  CHECK_OK(attn_checkpoint_save(path, &p, &o, extra));

  declare(&q);
  attn_adam_config cfg = attn_adam_defaults(ATTN_ADAMW);
  CHECK_OK(attn_adam_init(&r, &q, &cfg));
  attn_st *file = NULL;
  CHECK_OK(attn_checkpoint_load(path, &q, &r, &file));
  CHECK(r.step == 2);
  CHECK(memcmp(p.data, q.data, (size_t)p.numel * sizeof(float)) == 0);
  CHECK(memcmp(o.m, r.m, (size_t)p.numel * sizeof(float)) == 0);
  CHECK(memcmp(o.v, r.v, (size_t)p.numel * sizeof(float)) == 0);
  CHECK(file && attn_st_meta(file, "config") &&
        strcmp(attn_st_meta(file, "config"), "{\"d_model\": 64, \"layers\": 2}") == 0);
  CHECK(file && strcmp(attn_st_meta(file, "tokenizer"), "merges...\n\"quoted\"") == 0);
  CHECK(file && strcmp(attn_st_meta(file, "optim.step"), "2") == 0);
  CHECK(file && attn_st_get(file, "data.rng_state") &&
        memcmp(attn_st_get(file, "data.rng_state")->data, "\1\2\3", 3) == 0);
  CHECK(file && attn_st_get(file, "optim.m.lin.weight") != NULL);
  attn_st_free(file);
  /* resume: one more identical step on both gives identical bits */
  fill_uniform(p.grad, p.numel, 99, -1, 1);
  memcpy(q.grad, p.grad, (size_t)p.numel * sizeof(float));
  CHECK_OK(attn_adam_step(&o, &p, 5e-3));
  CHECK_OK(attn_adam_step(&r, &q, 5e-3));
  CHECK(memcmp(p.data, q.data, (size_t)p.numel * sizeof(float)) == 0);
  /* parameters only (inference) */
  attn_params w;
  declare(&w);
  CHECK_OK(attn_checkpoint_load(path, &w, NULL, NULL));
  attn_params_free(&w);
  /* no tmp file left behind */
  DIR *d = opendir(tmpdir);
  int entries = 0;
  for (struct dirent *e; d && (e = readdir(d));) entries += e->d_name[0] != '.';
  if (d) closedir(d);
  CHECK(entries == 1);
  unlink(path);
  attn_st_free(extra);
  attn_adam_free(&o);
  attn_adam_free(&r);
  attn_params_free(&p);
  attn_params_free(&q);
}

static void test_checkpoint_errors_are_clean(void) {
  attn_params p;
  attn_adam o;
  trained_state(&p, &o);
  char path[128];
  snprintf(path, sizeof path, "%s/bad.safetensors", tmpdir);
  CHECK_OK(attn_checkpoint_save(path, &p, &o, NULL));
  float before = p.data[0];

  /* collisions with the reserved names */
  attn_st *extra;
  CHECK_OK(attn_st_new(&extra));
  CHECK_OK(attn_st_add_f32(extra, "lin.bias", 0, NULL, &before));
  CHECK_ERR(attn_checkpoint_save(path, &p, &o, extra), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "lin.bias") != NULL);
  attn_st_free(extra);
  CHECK_OK(attn_st_new(&extra));
  CHECK_OK(attn_st_set_meta(extra, "optim.step", "7"));
  CHECK_ERR(attn_checkpoint_save(path, &p, &o, extra), ATTN_EINVAL);
  attn_st_free(extra);

  /* a parameter the file does not have; a mis-shaped one */
  attn_params more;
  int64_t w[2] = {3, 5}, b[1] = {3}, n4[1] = {4}, wrong[1] = {5};
  attn_params_init(&more);
  CHECK_OK(attn_params_declare(&more, "lin.weight", 2, w, NULL));
  CHECK_OK(attn_params_declare(&more, "lin.bias", 1, b, NULL));
  CHECK_OK(attn_params_declare(&more, "norm.weight", 1, n4, NULL));
  CHECK_OK(attn_params_declare(&more, "scale", 0, NULL, NULL));
  CHECK_OK(attn_params_declare(&more, "head.weight", 1, b, NULL));
  CHECK_OK(attn_params_alloc(&more));
  CHECK_ERR(attn_checkpoint_load(path, &more, NULL, NULL), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "head.weight") && strstr(attn_last_error(), "missing"));
  attn_params_free(&more);
  attn_params_init(&more);
  CHECK_OK(attn_params_declare(&more, "lin.weight", 2, w, NULL));
  CHECK_OK(attn_params_declare(&more, "lin.bias", 1, wrong, NULL));
  CHECK_OK(attn_params_alloc(&more));
  CHECK_ERR(attn_checkpoint_load(path, &more, NULL, NULL), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "lin.bias") && strstr(attn_last_error(), "[5]"));
  attn_adam mo;
  attn_adam_config cfg = attn_adam_defaults(ATTN_ADAMW);
  CHECK_OK(attn_adam_init(&mo, &more, &cfg));
  CHECK_ERR(attn_checkpoint_load(path, &more, &mo, NULL), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "lin.bias") != NULL);
  attn_adam_free(&mo);
  attn_params_free(&more);

  /* optimizer of another kind */
  attn_adam adam;
  cfg = attn_adam_defaults(ATTN_ADAM);
  CHECK_OK(attn_adam_init(&adam, &p, &cfg));
  CHECK_ERR(attn_checkpoint_load(path, &p, &adam, NULL), ATTN_EINVAL);
  attn_adam_free(&adam);

  /* a parameters-only file cannot restore an optimizer */
  CHECK_OK(attn_checkpoint_save(path, &p, NULL, NULL));
  CHECK_ERR(attn_checkpoint_load(path, &p, &o, NULL), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "optimizer") != NULL);

  /* corrupted bytes: header damaged, file truncated */
  CHECK_OK(attn_checkpoint_save(path, &p, &o, NULL));
  FILE *f = fopen(path, "r+b");
  fseek(f, 12, SEEK_SET);
  fputc('#', f);
  fclose(f);
  CHECK_ERR(attn_checkpoint_load(path, &p, &o, NULL), ATTN_EFORMAT);
  CHECK(strstr(attn_last_error(), path) != NULL);
  CHECK_OK(attn_checkpoint_save(path, &p, &o, NULL));
  CHECK(truncate(path, 200) == 0);
  CHECK_ERR(attn_checkpoint_load(path, &p, &o, NULL), ATTN_EFORMAT);
  int64_t step = o.step;
  CHECK(p.data[0] == before && o.step == step); /* nothing changed by failed loads */
  CHECK_ERR(attn_checkpoint_save("/nonexistent-dir/x.safetensors", &p, &o, NULL), ATTN_EIO);
  unlink(path);
  attn_adam_free(&o);
  attn_params_free(&p);
}

/* attn_ema against torch.optim.swa_utils.AveragedModel with the same avg_fn
 * (tools/golden_train.py): the copy, then 6 updates (decay 0.3, warm-up
 * 0.1, 0.18, 0.25, then 0.3). Same float operations in the same order:
 * tolerance 0. */
static void test_ema_matches_torch(void) {
  attn_params p;
  attn_st *g = golden_start(&p);
  if (!g) return;
  const char *dv = attn_st_meta(g, "ema_decay");
  CHECK(dv != NULL);
  double decay = dv ? strtod(dv, NULL) : 0.3;
  CHECK(attn_ema_decay(decay, 0) == 0.1 && attn_ema_decay(decay, 3) == 0.3);
  attn_ema e;
  CHECK_OK(attn_ema_init(&e, &p, decay));
  CHECK(memcmp(e.avg, p.data, (size_t)p.numel * sizeof(float)) == 0);
  char prefix[32];
  for (int k = 0; k < 6; k++) {
    snprintf(prefix, sizeof prefix, "emaw.%d.", k);
    load_into(g, &p, prefix, p.data);
    CHECK_OK(attn_ema_update(&e, &p));
  }
  CHECK(e.updates == 6);
  compare(g, &p, "ema.", e.avg, 0, 0);
  // swap exchanges; twice restores both
  float *before = malloc((size_t)p.numel * sizeof(float));
  memcpy(before, p.data, (size_t)p.numel * sizeof(float));
  CHECK_OK(attn_ema_swap(&e, &p));
  compare(g, &p, "ema.", p.data, 0, 0);
  CHECK(memcmp(e.avg, before, (size_t)p.numel * sizeof(float)) == 0);
  CHECK_OK(attn_ema_swap(&e, &p));
  CHECK(memcmp(p.data, before, (size_t)p.numel * sizeof(float)) == 0);
  compare(g, &p, "ema.", e.avg, 0, 0);
  free(before);
  attn_ema_free(&e);
  attn_params_free(&p);
  attn_st_free(g);
}

/* attn_ema_store_st / _load_st: bit-exact round trip with the update count;
 * a file without an average is found = 0; bad metadata, a missing or
 * mis-shaped tensor and bad arguments are clean errors that change nothing. */
static void test_ema_store_load(void) {
  attn_params p, q;
  declare(&p);
  fill_uniform(p.data, p.numel, 5, -1, 1);
  attn_ema e, r;
  CHECK_ERR(attn_ema_init(&e, &p, 1.0), ATTN_EINVAL);
  CHECK_ERR(attn_ema_init(&e, &p, 0.0), ATTN_EINVAL);
  CHECK_OK(attn_ema_init(&e, &p, 0.99));
  for (int k = 0; k < 3; k++) {
    fill_uniform(p.data, p.numel, 10u + (unsigned)k, -1, 1);
    CHECK_OK(attn_ema_update(&e, &p));
  }
  attn_st *st;
  CHECK_OK(attn_st_new(&st));
  CHECK_OK(attn_ema_store_st(&e, &p, st));
  CHECK(attn_st_get(st, "ema.lin.weight") && attn_st_get(st, "ema.scale"));
  declare(&q);
  memset(&r, 0, sizeof r);
  int found = -1;
  CHECK_OK(attn_ema_load_st(&r, &q, st, &found));
  CHECK(found == 1 && r.updates == 3 && r.decay == 0.99 && r.numel == e.numel);
  for (int i = 0; r.avg && i < p.count; i++)
    CHECK(memcmp(r.avg + p.views[i].offset, e.avg + p.views[i].offset,
                 (size_t)p.views[i].numel * sizeof(float)) == 0);
  // nothing to load: found 0, r unchanged
  attn_st *none;
  CHECK_OK(attn_st_new(&none));
  float *kept = r.avg;
  CHECK_OK(attn_ema_load_st(&r, &q, none, &found));
  CHECK(found == 0 && r.avg == kept && r.updates == 3);
  attn_st_free(none);
  // bad metadata; a mis-shaped tensor; a missing one
  CHECK_OK(attn_st_set_meta(st, "ema.updates", "-1"));
  CHECK_ERR(attn_ema_load_st(&r, &q, st, &found), ATTN_EFORMAT);
  CHECK_OK(attn_st_set_meta(st, "ema.updates", "3"));
  CHECK_OK(attn_st_set_meta(st, "ema.decay", "1.5"));
  CHECK_ERR(attn_ema_load_st(&r, &q, st, &found), ATTN_EFORMAT);
  CHECK_OK(attn_st_set_meta(st, "ema.decay", "0.99"));
  int64_t five[1] = {5};
  float z[5] = {0};
  CHECK_OK(attn_st_add_f32(st, "ema.lin.bias", 1, five, z));
  CHECK_ERR(attn_ema_load_st(&r, &q, st, &found), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "ema.lin.bias") != NULL);
  CHECK(r.avg == kept && r.updates == 3 && found == 0);
  attn_st_free(st);
  CHECK_OK(attn_st_new(&st));
  CHECK_OK(attn_st_set_meta(st, "ema.decay", "0.99"));
  CHECK_OK(attn_st_set_meta(st, "ema.updates", "3"));
  CHECK_ERR(attn_ema_load_st(&r, &q, st, &found), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "ema.lin.weight") != NULL);
  attn_st_free(st);
  // another layout
  attn_params other;
  int64_t n7[1] = {7};
  attn_params_init(&other);
  CHECK_OK(attn_params_declare(&other, "w", 1, n7, NULL));
  CHECK_OK(attn_params_alloc(&other));
  CHECK_ERR(attn_ema_update(&e, &other), ATTN_EINVAL);
  CHECK_ERR(attn_ema_swap(&e, &other), ATTN_EINVAL);
  attn_params_free(&other);
  attn_ema_free(&e);
  attn_ema_free(&r);
  attn_params_free(&p);
  attn_params_free(&q);
}

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/attn_train_XXXXXX");
  if (!mkdtemp(tmpdir)) return 1;
  RUN(test_adamw_with_clip_and_schedule_matches_torch);
  RUN(test_adam_matches_torch);
  RUN(test_clip_matches_torch);
  RUN(test_schedule_matches_torch_lambdalr);
  RUN(test_nonfinite_grads_are_named);
  RUN(test_decay_rule_and_validation);
  RUN(test_results_do_not_depend_on_threads);
  RUN(test_update_matches_plain_loop_bitwise);
  RUN(test_checkpoint_round_trip_and_resume);
  RUN(test_checkpoint_errors_are_clean);
  RUN(test_ema_matches_torch);
  RUN(test_ema_store_load);
  rmdir(tmpdir);
  HARNESS_END();
}
