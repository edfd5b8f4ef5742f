/* The language model (src/apps/lm): forward logits, loss and every gradient
 * against PyTorch (tools/golden_lm.py), the KV-cache decoder against the full
 * forward, sampling, thread-count determinism, model files, bad input. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps/lm/lm_data.h"
#include "apps/lm/lm_generate.h"
#include "apps/lm/lm_model.h"
#include "apps/lm/lm_train.h"
#include "attn/kernels.h"
#include "harness.h"
#include "lm_small.h"

static const char *golden_dir = "tests/golden";

static attn_lm_config tiny_config(int tied) {
  attn_lm_config c;
  attn_lm_config_default(&c);
  c.vocab = 50, c.d_model = 16, c.heads = 2, c.ff = 32, c.layers = 2, c.max_len = 64, c.tied = tied;
  return c;
}

/* the golden file's model, inputs and targets; 0 when it cannot be read */
static int load_golden(const char *name, int tied, attn_lm_model *m, attn_st **st) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", golden_dir, name);
  *st = NULL;
  if (attn_st_load(path, st)) {
    printf("  cannot read %s: %s\n", path, attn_last_error());
    h_case_failed = 1;
    return 0;
  }
  attn_lm_config c = tiny_config(tied);
  CHECK_OK(attn_lm_create(m, &c));
  CHECK_OK(attn_params_load_st(&m->p, *st, "", 0));
  return !h_case_failed;
}

static void golden_case(const char *name, int tied) {
  attn_lm_model m;
  attn_st *st;
  if (!load_golden(name, tied, &m, &st)) return;
  const attn_tensor *ids = attn_st_get(st, "input_ids"), *tg = attn_st_get(st, "targets");
  const attn_tensor *lg = attn_st_get(st, "logits"), *ls = attn_st_get(st, "loss");
  CHECK(ids && tg && lg && ls && ids->dtype == ATTN_I32 && tg->dtype == ATTN_I32);
  if (!h_case_failed) {
    attn_lm_saved s = {0};
    const attn_nn_ctx ctx = {0};
    float loss = 0;
    attn_params_zero_grad(&m.p);
    CHECK_OK(attn_lm_forward(&m, &ctx, &s, ids->data, 2, 8));
    /* f32 throughout on both sides: 1e-5 absolute on logits of size ~1 */
    CHECK_CLOSE("logits", s.logits, (const float *)lg->data, 16 * 50, 2e-5, 1e-4);
    CHECK_OK(attn_lm_loss(&m, &ctx, &s, tg->data, 1, &loss));
    CHECK_CLOSE("loss", &loss, (const float *)ls->data, 1, 1e-5, 1e-5);
    double sum = 0;
    int64_t cnt = 0;
    CHECK_OK(attn_lm_nll_sum(&m, &s, tg->data, &sum, &cnt));
    CHECK(cnt == 15); /* one target ignored */
    CHECK(fabs(sum / cnt - loss) < 1e-5);
    for (int v = 0; v < m.p.count; v++) {
      char gname[ATTN_PARAM_NAME_MAX + 8];
      snprintf(gname, sizeof gname, "grad.%s", m.p.views[v].name);
      const attn_tensor *g = attn_st_get(st, gname);
      CHECK(g != NULL);
      if (!g) continue;
      /* gradients of a mean over 15 targets: ~1e-3 in size; 2e-6 absolute */
      CHECK_CLOSE(m.p.views[v].name, attn_params_grad(&m.p, v), (const float *)g->data,
                  m.p.views[v].numel, 2e-6, 1e-3);
    }
    attn_lm_saved_free(&s);
  }
  attn_lm_free(&m);
  attn_st_free(st);
}

static void test_golden_tied_forward_backward(void) { golden_case("lm_tiny.safetensors", 1); }
static void test_golden_untied_forward_backward(void) {
  golden_case("lm_tiny_untied.safetensors", 0);
}

static void test_kv_cache_decoder_matches_full_forward(void) {
  const int64_t V = 60, T = 21;
  attn_lm_model m = lm_small_model(V, 32, 4, 64, 3, 256, 5);
  int32_t ids[T];
  lm_fill_ids(ids, T, V, 3);
  attn_lm_saved s = {0};
  const attn_nn_ctx ctx = {0};
  CHECK_OK(attn_lm_forward(&m, &ctx, &s, ids, 1, T));
  attn_lm_decoder d;
  CHECK_OK(attn_lm_decoder_init(&d, &m, NULL, 0)); /* f32, the model's max_len */
  float *lg = malloc((size_t)(T * V) * sizeof *lg);
  float *probs = malloc((size_t)(3 * 4 * T * T) * sizeof *probs);
  /* a prompt of 6 in one step, then 1, 1, then 3 at once, then one at a time */
  int64_t pos = 0;
  const int64_t chunks[] = {6, 1, 1, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  for (int c = 0; pos < T; c++) {
    const int64_t n = chunks[c];
    CHECK_OK(attn_lm_decoder_step(&d, ids + pos, n, lg + pos * V, NULL, probs));
    CHECK(attn_lm_decoder_len(&d) == pos + n);
    /* each new row's attention: a distribution over keys 0..its position */
    for (int64_t lh = 0; lh < 12; lh++)
      for (int64_t i = 0; i < n; i++) {
        const float *row = probs + (lh * n + i) * (pos + n);
        double sum = 0;
        for (int64_t j = 0; j < pos + n; j++) {
          if (j > pos + i) CHECK(row[j] == 0.0f);
          sum += row[j];
        }
        CHECK(fabs(sum - 1.0) < 1e-5);
      }
    pos += n;
  }
  /* the flash forward and the cache's decode pass sum in another order: 1e-4 */
  CHECK_CLOSE("incremental logits", lg, s.logits, T * V, 1e-4, 1e-4);
  float last[V];
  CHECK_ERR(attn_lm_decoder_step(&d, ids, 300, NULL, last, NULL), ATTN_EINVAL); /* past max_len */
  attn_lm_decoder_free(&d);
  free(lg);
  free(probs);
  attn_lm_saved_free(&s);
  attn_lm_free(&m);
}

/* int8 weights (every Linear and the head): the logits near the f32
 * forward's, and the same argmax wherever that leads by more than twice the
 * error (12 of the 21 positions) */
static void test_int8_weights_decoder(void) {
  const int64_t V = 60, T = 21;
  attn_lm_model m = lm_small_model(V, 32, 4, 64, 3, 256, 5);
  int32_t ids[T];
  lm_fill_ids(ids, T, V, 3);
  attn_lm_saved s = {0};
  const attn_nn_ctx ctx = {0};
  CHECK_OK(attn_lm_forward(&m, &ctx, &s, ids, 1, T));
  attn_lm_decoder d;
  CHECK_OK(attn_lm_decoder_init(&d, &m, NULL, 0));
  CHECK_OK(attn_lm_decoder_set_int8(&d));
  CHECK(d.work.ql && attn_qlinear_set_count(d.work.ql) == 6 * 3 + 1);
  float *lg = malloc((size_t)(T * V) * sizeof *lg);
  CHECK_OK(attn_lm_decoder_step(&d, ids, 5, lg, NULL, NULL));
  for (int64_t t = 5; t < T; t++)
    CHECK_OK(attn_lm_decoder_step(&d, ids + t, 1, lg + t * V, NULL, NULL));
  /* 7 quantized products per position through 3 layers: 0.057 measured at
   * every level */
  double err = CHECK_CLOSE("int8-weight logits", lg, s.logits, T * V, 0.12, 1e-2);
  CHECK(err > 0); /* the weights are quantized: not the f32 bits */
  int clear = 0, agree = 0;
  for (int64_t t = 0; t < T; t++) {
    const float *r = s.logits + t * V, *g = lg + t * V;
    int64_t br = 0, bg = 0, second = br == 0 ? 1 : 0;
    for (int64_t v = 1; v < V; v++) {
      if (r[v] > r[br]) br = v;
      if (g[v] > g[bg]) bg = v;
    }
    for (int64_t v = 0; v < V; v++)
      if (v != br && r[v] > r[second]) second = v;
    if (r[br] - r[second] > 0.12) clear++, agree += bg == br;
  }
  CHECK(clear >= T / 2 && agree == clear);
  attn_lm_decoder_free(&d);
  free(lg);
  attn_lm_saved_free(&s);
  attn_lm_free(&m);
}

static void test_sampling(void) {
  const int64_t V = 40;
  float lg[V];
  for (int64_t j = 0; j < V; j++)
    lg[j] = (float)((j * 37) % 11) * 0.3f;
  lg[3] = 9.0f; /* the argmax is a "special" id below min_id */
  lg[17] = 4.0f;
  attn_lm_sampling s;
  attn_lm_sampling_default(&s);
  s.min_id = 4, s.temperature = 0.0f;
  int32_t a = -1, b = -1;
  CHECK_OK(attn_lm_sample(&s, lg, V, 0, &a));
  CHECK(a == 17); /* greedy, skipping ids < min_id */
  s.temperature = 1.0f, s.top_k = 1;
  CHECK_OK(attn_lm_sample(&s, lg, V, 5, &a));
  CHECK(a == 17);
  s.top_k = 0, s.top_p = 1e-6f;
  CHECK_OK(attn_lm_sample(&s, lg, V, 6, &a));
  CHECK(a == 17);
  /* the same seed and step: the same id; other seeds: other sequences */
  s.top_p = 1.0f, s.seed = 9;
  int same = 1, differ = 0;
  for (uint64_t t = 0; t < 100; t++) {
    CHECK_OK(attn_lm_sample(&s, lg, V, t, &a));
    CHECK_OK(attn_lm_sample(&s, lg, V, t, &b));
    same &= a == b;
    CHECK(a >= 4 && a < V);
    attn_lm_sampling o = s;
    o.seed = 10;
    CHECK_OK(attn_lm_sample(&o, lg, V, t, &b));
    differ += a != b;
  }
  CHECK(same && differ > 10);
  /* the frequencies follow softmax: two ids, p = 1/4, 3/4 */
  float two[6] = {0, 0, 0, 0, 0.0f, logf(3.0f)};
  s.min_id = 4, s.top_k = 0, s.top_p = 1.0f;
  int ones = 0;
  for (uint64_t t = 0; t < 4000; t++) {
    CHECK_OK(attn_lm_sample(&s, two, 6, t, &a));
    ones += a == 5;
  }
  CHECK(fabs(ones / 4000.0 - 0.75) < 0.03);
  /* top-k 2 of four equal ids: only the two lowest ids (ties by id) */
  float four[8] = {0, 0, 0, 0, 1, 1, 1, 1};
  s.top_k = 2;
  for (uint64_t t = 0; t < 200; t++) {
    CHECK_OK(attn_lm_sample(&s, four, 8, t, &a));
    CHECK(a == 4 || a == 5);
  }
  /* bad settings */
  s.top_k = 0;
  s.top_p = 0.0f;
  CHECK_ERR(attn_lm_sample(&s, lg, V, 0, &a), ATTN_EINVAL);
  s.top_p = 1.5f;
  CHECK_ERR(attn_lm_sampling_check(&s), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "top-p") != NULL);
  s.top_p = 0.9f, s.temperature = -1.0f;
  CHECK_ERR(attn_lm_sampling_check(&s), ATTN_EINVAL);
}

/* forward + backward of one batch: logits and gradients */
static void run_once(attn_lm_model *m, const int32_t *ids, const int32_t *tg, int64_t B, int64_t T,
                     float *logits, float *grads) {
  attn_lm_saved s = {0};
  const attn_nn_ctx ctx = {0};
  float loss;
  attn_params_zero_grad(&m->p);
  CHECK_OK(attn_lm_forward(m, &ctx, &s, ids, B, T));
  if (s.logits) memcpy(logits, s.logits, (size_t)(B * T * m->c.vocab) * sizeof *logits);
  CHECK_OK(attn_lm_loss(m, &ctx, &s, tg, 1, &loss));
  memcpy(grads, m->p.grad, (size_t)m->p.numel * sizeof *grads);
  attn_lm_saved_free(&s);
}

/* the sampler before its top-k selection (every candidate sorted), as the
 * reference: the same order, sums and draw */
typedef struct {
  double p;
  int32_t id;
} ref_cand;

static int ref_by_prob(const void *a, const void *b) {
  const ref_cand *x = a, *y = b;
  if (x->p != y->p) return x->p > y->p ? -1 : 1;
  return (x->id > y->id) - (x->id < y->id);
}

static int32_t ref_sample(const attn_lm_sampling *s, const float *lg, int64_t V, uint64_t step) {
  int32_t best = s->min_id;
  for (int64_t j = s->min_id; j < V; j++)
    if (lg[j] > lg[best]) best = (int32_t)j;
  const int64_t n = V - s->min_id;
  ref_cand *c = malloc((size_t)n * sizeof *c);
  for (int64_t j = 0; j < n; j++) {
    c[j].id = (int32_t)(j + s->min_id);
    c[j].p = exp(((double)lg[c[j].id] - lg[best]) / s->temperature);
  }
  qsort(c, (size_t)n, sizeof *c, ref_by_prob);
  int64_t keep = s->top_k > 0 && s->top_k < n ? s->top_k : n;
  double mass = 0;
  for (int64_t j = 0; j < keep; j++)
    mass += c[j].p;
  if (s->top_p < 1.0f) {
    const double want = (double)s->top_p * mass;
    double acc = 0;
    for (int64_t j = 0; j < keep; j++) {
      acc += c[j].p;
      if (acc >= want) {
        keep = j + 1, mass = acc;
        break;
      }
    }
  }
  const double u = (double)attn_rng_uniform(s->seed, step) * mass;
  double acc = 0;
  int32_t pick = c[keep - 1].id;
  for (int64_t j = 0; j < keep; j++) {
    acc += c[j].p;
    if (u < acc) {
      pick = c[j].id;
      break;
    }
  }
  free(c);
  return pick;
}

/* top-k by selection (a heap of the k first, over the ids whose logit is
 * within T / 100 of the k-th largest) picks what the full sort picks: 4,096
 * ids with many ties (logits on a grid of 0.25), k 1 .. V - 1 and 0, top-p
 * 1, 0.95, 0.3, min_id 0 and 4, 64 steps each; then logits of any float
 * value (ids just either side of the cut), logits spread over [-3000, 0]
 * (the k-th one's p below 2^-1000 for the larger k: every id taken), some
 * -inf, and temperatures 0.05 and 3 */
static void test_sampling_top_k_selection(void) {
  enum { V = 4096, REPS = 5 };
  static float lg[V];
  static const int ks[] = {1, 2, 3, 40, 41, 1000, V - 5, V - 1, V, V + 7, 0};
  static const float ps[] = {1.0f, 0.95f, 0.3f};
  static const float temps[REPS] = {0.8f, 0.8f, 0.05f, 3.0f, 0.8f};
  uint32_t st = 12345u;
  int bad = 0, n = 0;
  for (int rep = 0; rep < REPS; rep++) {
    for (int64_t j = 0; j < V; j++) {
      st = st * 1664525u + 1013904223u;
      if (rep < 2)
        lg[j] = (float)((st >> 8) % 64) * 0.25f - 8.0f;
      else if (rep < 4)
        lg[j] = (float)(st >> 8) * 0x1p-21f - 4.0f; /* [-4, 4), all 24 bits */
      else
        lg[j] = (st >> 8) % 97 == 0 ? -INFINITY : -(float)(st >> 8) * 0x1p-24f * 3000.0f;
    }
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
      for (int pi = 0; pi < 3; pi++) {
        attn_lm_sampling s;
        attn_lm_sampling_default(&s);
        s.top_k = ks[ki], s.top_p = ps[pi], s.min_id = rep % 2 ? 4 : 0, s.seed = 7 + (uint64_t)rep;
        s.temperature = temps[rep];
        for (uint64_t t = 0; t < 64; t++) {
          int32_t a = -1;
          CHECK_OK(attn_lm_sample(&s, lg, V, t, &a));
          bad += a != ref_sample(&s, lg, V, t);
          n++;
        }
      }
  }
  CHECK(bad == 0 && n == REPS * 11 * 3 * 64);
}

static void test_same_bits_for_any_thread_count(void) {
  const int64_t V = 300, B = 3, T = 70;
  attn_lm_model m = lm_small_model(V, 64, 4, 128, 2, 256, 11);
  int32_t ids[B * T], tg[B * T];
  lm_fill_ids(ids, B * T, V, 1);
  lm_fill_ids(tg, B * T, V, 2);
  float *l1 = malloc((size_t)(B * T * V) * sizeof *l1),
        *l2 = malloc((size_t)(B * T * V) * sizeof *l2);
  float *g1 = malloc((size_t)m.p.numel * sizeof *g1), *g2 = malloc((size_t)m.p.numel * sizeof *g2);
  const int nt = attn_get_num_threads();
  attn_set_num_threads(1);
  run_once(&m, ids, tg, B, T, l1, g1);
  attn_set_num_threads(3);
  run_once(&m, ids, tg, B, T, l2, g2);
  CHECK(!memcmp(l1, l2, (size_t)(B * T * V) * sizeof *l1));
  CHECK(!memcmp(g1, g2, (size_t)m.p.numel * sizeof *g1));
  /* generation: the same tokens for any thread count */
  attn_lm_sampling s;
  attn_lm_sampling_default(&s);
  attn_lm_generation a = {0}, b = {0};
  attn_set_num_threads(1);
  CHECK_OK(attn_lm_generate(&m, ids, 9, 30, &s, NULL, 0, 0, NULL, NULL, &a));
  attn_set_num_threads(3);
  CHECK_OK(attn_lm_generate(&m, ids, 9, 30, &s, NULL, 0, 0, NULL, NULL, &b));
  CHECK(a.n == 30 && b.n == 30 && a.ids && b.ids && !memcmp(a.ids, b.ids, 30 * sizeof *a.ids));
  attn_lm_generation_free(&b);
  s.seed = 2; /* another seed: another text */
  CHECK_OK(attn_lm_generate(&m, ids, 9, 30, &s, NULL, 0, 0, NULL, NULL, &b));
  CHECK(b.n == 30 && memcmp(a.ids, b.ids, 30 * sizeof *a.ids));
  attn_set_num_threads(nt);
  attn_lm_generation_free(&a);
  attn_lm_generation_free(&b);
  free(l1), free(l2), free(g1), free(g2);
  attn_lm_free(&m);
}

static void test_generation_attention_and_errors(void) {
  attn_lm_model m = lm_small_model(50, 16, 2, 32, 2, 256, 3);
  int32_t p[5] = {4, 9, 11, 30, 2};
  attn_lm_sampling s;
  attn_lm_sampling_default(&s);
  attn_lm_generation g = {0};
  CHECK_OK(attn_lm_generate(&m, p, 5, 7, &s, NULL, 0, 1, NULL, NULL, &g));
  CHECK(g.n == 7 && g.context == 12 && g.probs);
  for (int64_t r = 0; g.probs && r < 2 * 2 * 7; r++) { /* [layers, H, 7, 12] */
    double sum = 0;
    for (int64_t j = 0; j < 12; j++)
      sum += g.probs[r * 12 + j];
    CHECK(fabs(sum - 1.0) < 1e-5);
    CHECK(g.probs[r * 12 + 11] == 0.0f || r % 7 == 6); /* only the last row sees the last token */
  }
  attn_lm_generation_free(&g);
  CHECK_ERR(attn_lm_generate(&m, p, 0, 7, &s, NULL, 0, 0, NULL, NULL, &g), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "empty prompt") != NULL);
  CHECK_ERR(attn_lm_generate(&m, p, 5, 252, &s, NULL, 0, 0, NULL, NULL, &g), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "context of 256") != NULL);
  s.top_p = 0.0f;
  CHECK_ERR(attn_lm_generate(&m, p, 5, 7, &s, NULL, 0, 0, NULL, NULL, &g), ATTN_EINVAL);
  int32_t bad = 50;
  attn_lm_saved sv = {0};
  CHECK_ERR(attn_lm_forward(&m, NULL, &sv, &bad, 1, 1), ATTN_EINVAL);
  attn_lm_saved_free(&sv);
  attn_lm_free(&m);
}

/* the windows of attn_lm_perplexity cover every target once, the last one shorter */
static void test_perplexity_windows(void) {
  attn_lm_model m = lm_small_model(50, 16, 2, 32, 2, 256, 6);
  int32_t ids[23];
  lm_fill_ids(ids, 23, 50, 5);
  double ppl = 0, nll = 0;
  int64_t cnt = 0;
  CHECK_OK(attn_lm_perplexity(&m, ids, 23, 5, 3, &ppl)); /* windows 3 + 1 of 5, one of 2 */
  attn_lm_saved s = {0};
  for (int64_t w = 0; w * 5 < 22; w++) {
    const int64_t T = 22 - w * 5 < 5 ? 22 - w * 5 : 5;
    double sum = 0;
    int64_t k = 0;
    CHECK_OK(attn_lm_forward(&m, NULL, &s, ids + w * 5, 1, T));
    CHECK_OK(attn_lm_nll_sum(&m, &s, ids + w * 5 + 1, &sum, &k));
    nll += sum, cnt += k;
  }
  CHECK(cnt == 22);
  CHECK(fabs(ppl - exp(nll / 22)) < 1e-4 * ppl);
  attn_lm_saved_free(&s);
  attn_lm_free(&m);
}

static void test_model_file_round_trip(void) {
  attn_lm_model m = lm_small_model(50, 16, 2, 32, 2, 256, 4), r;
  char dir[] = "/tmp/attn_test_lm_XXXXXX", path[128];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(path, sizeof path, "%s/m.safetensors", dir);
  CHECK_OK(attn_lm_save(path, &m, NULL, "attn-bpe 1\nmax_chunk 64\nmerges 0\n", NULL));
  attn_st *st = NULL;
  CHECK_OK(attn_lm_load(path, &r, &st));
  CHECK(r.c.vocab == 50 && r.c.d_model == 16 && r.c.layers == 2 && r.c.tied == 1 &&
        r.p.numel == m.p.numel);
  CHECK(r.p.data && !memcmp(r.p.data, m.p.data, (size_t)m.p.numel * sizeof(float)));
  CHECK(st && attn_st_meta(st, "tokenizer") != NULL);
  attn_st_free(st);
  attn_lm_free(&r);
  /* a file that is not an LM */
  attn_st *o = NULL;
  CHECK_OK(attn_st_new(&o));
  snprintf(path, sizeof path, "%s/other.safetensors", dir);
  CHECK_OK(attn_st_save(o, path));
  attn_st_free(o);
  CHECK_ERR(attn_lm_load(path, &r, NULL), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "not a language model") != NULL);
  /* an empty corpus: no documents, or only empty ones */
  CHECK_ERR(attn_lm_corpus_read(dir, &(attn_lm_corpus){0}), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "no .txt documents") != NULL);
  snprintf(path, sizeof path, "%s/empty.txt", dir);
  FILE *f = fopen(path, "w");
  if (f) fclose(f);
  CHECK_ERR(attn_lm_corpus_read(dir, &(attn_lm_corpus){0}), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "empty") != NULL);
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
  attn_lm_free(&m);
}

/* the time-budget re-plan: no timing, the planner fed measured speeds */
static void test_replan(void) {
  /* probe planned 3290 steps; measured 0.5 s a step with 600 s left, no validation: 1200 more */
  CHECK(attn_lm_replan(100, 0.5, 0.0, 600.0, 1100, 8800) == 1300);
  /* faster than the probe: grows, capped by the epochs asked for */
  CHECK(attn_lm_replan(100, 0.01, 0.0, 600.0, 1100, 8800) == 8800);
  /* validation passes count: 0.1 s steps, 100 s left, 10 s a pass, 1100 steps an epoch: no
   * epoch end before step 1100, so one pass (the last step's): 900 steps */
  const int64_t a = attn_lm_replan(100, 0.1, 10.0, 100.0, 1100, 8800);
  CHECK(a == 1000);
  /* epochs of 100 steps: a pass each; k steps cost 0.1 k + 10 ceil(k / 100): 500 steps (50 + 50)
   * is the largest that fits, one more does not */
  const int64_t b = attn_lm_replan(100, 0.1, 10.0, 100.0, 100, 8800);
  const double cost_b = (double)(b - 100) * 0.1 + 10.0 * (double)((b - 100 + 99) / 100);
  const double cost_b1 = (double)(b + 1 - 100) * 0.1 + 10.0 * (double)((b + 1 - 100 + 99) / 100);
  CHECK(b == 600 && cost_b <= 100.0 + 1e-9 && cost_b1 > 100.0);
  /* out of time: at least the next step; a bad speed: the cap */
  CHECK(attn_lm_replan(500, 1.0, 5.0, -3.0, 1100, 8800) == 501);
  CHECK(attn_lm_replan(500, 0.0, 5.0, 10.0, 1100, 8800) == 8800);
}

int main(int argc, char **argv) {
  if (argc > 1) golden_dir = argv[1];
  RUN(test_golden_tied_forward_backward);
  RUN(test_golden_untied_forward_backward);
  RUN(test_kv_cache_decoder_matches_full_forward);
  RUN(test_int8_weights_decoder);
  RUN(test_sampling);
  RUN(test_sampling_top_k_selection);
  RUN(test_same_bits_for_any_thread_count);
  RUN(test_generation_attention_and_errors);
  RUN(test_perplexity_windows);
  RUN(test_model_file_round_trip);
  RUN(test_replan);
  HARNESS_END();
}
