/* The classifier with mixed precision, QAT and int8 models: training in
 * bf16 / fp16 (with loss scaling) and with QAT learns the synthetic task
 * (label 1 iff token 5 occurs) like f32; an int8 file written by
 * attn_quantize_file loads into attn_clf with its Linears in int8 and
 * predicts like the f32 model. */
#include <stdint.h>
#include <unistd.h>

#include "apps/classifier/classifier_train.h"
#include "harness.h"

#define N_TRAIN 96
#define N_VAL 32
#define MAXL 12

static int32_t tok[N_TRAIN + N_VAL][MAXL];
static const int32_t *rows[N_TRAIN + N_VAL];
static int32_t lens[N_TRAIN + N_VAL];
static int labels[N_TRAIN + N_VAL];
static char tmpdir[64];

static void make_data(void) {
  unsigned s = 777;
  for (int i = 0; i < N_TRAIN + N_VAL; i++) {
    s = s * 1664525u + 1013904223u;
    lens[i] = 2 + (int32_t)((s >> 16) % (MAXL - 1));
    labels[i] = i % 2;
    for (int t = 0; t < lens[i]; t++) {
      s = s * 1664525u + 1013904223u;
      tok[i][t] = 6 + (int32_t)((s >> 16) % 10);  // 6..15: never 5
    }
    if (labels[i]) tok[i][(s >> 8) % (unsigned)lens[i]] = 5;
    rows[i] = tok[i];
  }
}

static void model(attn_clf *m, attn_adam *opt) {
  attn_clf_config c;
  attn_clf_config_default(&c);
  c.vocab = 16;
  c.d_model = 16;
  c.heads = 2;
  c.ff = 32;
  c.layers = 1;
  c.max_len = MAXL;
  c.dropout = 0.0f;
  CHECK_OK(attn_clf_create(m, &c));
  CHECK_OK(attn_clf_init(m, 1));
  attn_adam_config ac = attn_adam_defaults(ATTN_ADAMW);
  CHECK_OK(attn_adam_init(opt, &m->p, &ac));
}

/* Trains 12 epochs in each precision (and f32 + QAT): the mean loss of the
 * last 6 steps is below 0.45 of the first 6's, the validation accuracy of
 * every run is within 10 points of f32's. */
static void test_train_precisions(void) {
  make_data();
  attn_tok_set tr = {N_TRAIN, rows, lens, labels};
  attn_tok_set va = {N_VAL, rows + N_TRAIN, lens + N_TRAIN, labels + N_TRAIN};
  double acc[4];
  for (int k = 0; k < 4; k++) {
    attn_clf m;
    attn_adam opt;
    model(&m, &opt);
    attn_train_opts o;
    attn_train_opts_default(&o);
    o.epochs = 12;
    o.batch = 16;
    o.chunk_batches = 2;
    o.lr = 3e-3;
    o.progress = 2;
    o.seed = 7;
    o.log = fopen("/dev/null", "w");
    o.precision = k == 3 ? ATTN_PREC_F32 : (attn_precision)k;
    o.qat = k == 3;
    attn_train_state s;
    attn_train_state_init(&s);
    static float losses[128];
    CHECK_OK(attn_train_run(&m, &opt, &o, &tr, &va, &s, NULL, losses, 72));
    double first = 0, last = 0;
    for (int i = 0; i < 6; i++) first += losses[i], last += losses[66 + i];
    double loss;
    CHECK_OK(attn_clf_evaluate(&m, &va, 32, &loss, &acc[k], NULL, NULL));
    printf("  %s%s: loss %.3f -> %.3f, val acc %.3f\n", attn_precision_name(o.precision),
           o.qat ? " + QAT" : "", first / 6, last / 6, acc[k]);
    CHECK(last < 0.45 * first);
    if (o.log) fclose(o.log);
    attn_adam_free(&opt);
    attn_clf_free(&m);
  }
  for (int k = 1; k < 4; k++) CHECK(fabs(acc[k] - acc[0]) <= 0.1);
}

/* f32 model -> file -> attn_quantize_file -> attn_clf_load: 7 int8
 * Linears (q, k, v, out_proj, linear1, linear2, fc); probabilities within
 * 0.05 of the f32 model's. */
static void test_int8_model(void) {
  attn_clf m, q;
  attn_adam opt;
  model(&m, &opt);
  char in[128], out[128];
  snprintf(in, sizeof in, "%s/m.safetensors", tmpdir);
  snprintf(out, sizeof out, "%s/m.int8.safetensors", tmpdir);
  CHECK_OK(attn_clf_save(in, &m, NULL, NULL, NULL));
  attn_quant_report rep;
  CHECK_OK(attn_quantize_file(in, out, &rep));
  CHECK(rep.quantized == 5);  // in_proj_weight, out_proj, linear1, linear2, fc
  CHECK_OK(attn_clf_load(out, &q, NULL));
  CHECK(attn_qlinear_set_count(q.qlinears) == 7);
  int32_t l[2] = {lens[0], lens[1]};
  int32_t ids[2 * MAXL] = {0};
  memcpy(ids, tok[0], sizeof(int32_t) * (size_t)lens[0]);
  memcpy(ids + MAXL, tok[1], sizeof(int32_t) * (size_t)lens[1]);
  float p32[4], p8[4];
  CHECK_OK(attn_clf_predict(&m, ids, l, 2, MAXL, p32));
  CHECK_OK(attn_clf_predict(&q, ids, l, 2, MAXL, p8));
  CHECK_CLOSE("int8 probs", p8, p32, 4, 0.05, 0);
  attn_clf_free(&q);
  attn_clf_free(&m);
  attn_adam_free(&opt);
  unlink(in);
  unlink(out);
}

int main(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/attn_clf_lowp_XXXXXX");
  if (!mkdtemp(tmpdir)) return 1;
  RUN(test_train_precisions);
  RUN(test_int8_model);
  rmdir(tmpdir);
  HARNESS_END();
}
