/* G2P decoding (src/apps/seq2seq/g2p_decode.h) on small random models:
 * the incremental decoder's logits against the full teacher-forced forward
 * on every backend, beam search against an exhaustive search over every
 * output of a short maximum length, n-best lists sorted and distinct, a
 * batch of words equal to its words decoded one by one, batches decoded in
 * parallel equal to one thread's, ensembles (the mean of the models'
 * probabilities), and bad options.
 * (K = 1 against the full forward's argmax: test_g2p's greedy test, which
 * decodes through the same search.)
 *
 * Tolerances: logits are sums of O(1) terms through two layers; the step
 * runs the same terms through GEMMs of other shapes and, on flash, another
 * softmax order: |step - full| <= 2e-5 + 2e-4 |full| (test_decoder_step's
 * bound). Scores are sums of three f32 log-probabilities: 1e-4. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "apps/seq2seq/g2p_decode.h"
#include "g2p_small.h"
#include "harness.h"

/* three words of 5, 2 and 7 letters, padded to 7 */
static const int32_t words[3][7] = {{4, 5, 6, 7, 8, 0, 0}, {9, 10, 0, 0, 0, 0, 0},
                                    {11, 4, 5, 6, 4, 9, 10}};
static const int32_t word_lens[3] = {5, 2, 7};

static void test_incremental_logits_equal_full_forward(void) {
  attn_g2p_model m;
  g2p_small_model(&m, 10, 2, 3);
  const int64_t B = 3, Ls = 7, Lt = 9, V = m.vocab_tgt, G = 2; /* 2 decoder rows per word */
  int32_t tgt[3 * 9];
  for (int64_t i = 0; i < B * Lt; i++) tgt[i] = i % Lt == 0 ? ATTN_G2P_BOS : (int32_t)(4 + (i * 7) % (V - 4));
  attn_g2p_saved full = {0};
  attn_nn_ctx ref = {.backend = ATTN_BACKEND_MATH};
  CHECK_OK(attn_g2p_encode(&m, &ref, &full, &words[0][0], word_lens, B, Ls));
  CHECK_OK(attn_g2p_decode(&m, &ref, &full, tgt, Lt));
  const attn_backend bes[3] = {ATTN_BACKEND_MATH, ATTN_BACKEND_FLASH, ATTN_BACKEND_AUTO};
  float *got = malloc((size_t)(B * G * V) * sizeof(float));
  for (int i = 0; i < 3; i++) {
    attn_nn_ctx ctx = {.backend = bes[i]};
    attn_g2p_saved sv = {0};
    attn_g2p_stepper d;
    CHECK_OK(attn_g2p_encode(&m, &ctx, &sv, &words[0][0], word_lens, B, Ls));
    CHECK_OK(attn_g2p_stepper_init(&d, &m, &ctx, &sv, G));
    int bad = 0;
    for (int64_t t = 0; t < Lt; t++) {
      int32_t tok[6];
      for (int64_t r = 0; r < B * G; r++) tok[r] = tgt[(r / G) * Lt + t];
      CHECK_OK(attn_g2p_stepper_step(&d, tok, t));
      for (int64_t r = 0; r < B * G; r++) {
        const float *want = full.logits + ((r / G) * Lt + t) * V, *x = d.logits + r * V;
        for (int64_t v = 0; v < V; v++)
          if (!(fabsf(x[v] - want[v]) <= 2e-5f + 2e-4f * fabsf(want[v]))) bad++;
      }
    }
    if (bad) printf("  backend %d: %d logits off\n", (int)bes[i], bad);
    CHECK(bad == 0);
    /* a step out of order is refused */
    int32_t tok[6] = {4, 4, 4, 4, 4, 4};
    CHECK_ERR(attn_g2p_stepper_step(&d, tok, 3), ATTN_EINVAL);
    attn_g2p_stepper_free(&d);
    attn_g2p_saved_free(&sv);
  }
  free(got);
  attn_g2p_saved_free(&full);
  attn_g2p_free(&m);
}

typedef struct {
  int32_t tok[2];
  int len;
  double score;
} seq;

static double norm(double logp, int len, float alpha) {
  return alpha > 0 ? logp / pow((5.0 + len) / 6.0, alpha) : logp;
}

static int by_score(const void *a, const void *b) {
  const seq *x = a, *y = b;
  return x->score > y->score ? -1 : x->score < y->score;
}

static void log_softmax(const float *x, int64_t V, double *y) {
  double mx = x[0], z = 0;
  for (int64_t v = 1; v < V; v++) mx = x[v] > mx ? x[v] : mx;
  for (int64_t v = 0; v < V; v++) z += exp(x[v] - mx);
  for (int64_t v = 0; v < V; v++) y[v] = x[v] - mx - log(z);
}

/* every output of at most 2 tokens of word w: </s>; a </s>; a b (cut at
 * max_len, no </s>), scored from the full forward; sorted best first */
static int exhaustive(const attn_g2p_model *m, int w, float alpha, seq *out) {
  const int64_t V = m->vocab_tgt, P = V - ATTN_G2P_SPECIAL; /* phonemes */
  attn_nn_ctx ctx = {.backend = ATTN_BACKEND_MATH};
  attn_g2p_saved sv = {0};
  int32_t *src = malloc((size_t)(P * 7) * sizeof *src), *tin = malloc((size_t)(P * 2) * sizeof *tin);
  int32_t *sl = malloc((size_t)P * sizeof *sl);
  double *lp0 = malloc((size_t)V * sizeof *lp0), *lp1 = malloc((size_t)V * sizeof *lp1);
  for (int64_t a = 0; a < P; a++) {
    memcpy(src + a * 7, words[w], 7 * sizeof *src);
    sl[a] = word_lens[w];
    tin[a * 2] = ATTN_G2P_BOS;
    tin[a * 2 + 1] = (int32_t)(ATTN_G2P_SPECIAL + a);
  }
  CHECK_OK(attn_g2p_encode(m, &ctx, &sv, src, sl, P, 7));
  CHECK_OK(attn_g2p_decode(m, &ctx, &sv, tin, 2));
  int n = 0;
  log_softmax(sv.logits, V, lp0);
  out[n++] = (seq){{0, 0}, 0, norm(lp0[ATTN_G2P_EOS], 1, alpha)};
  for (int64_t a = 0; a < P; a++) {
    const int32_t ta = (int32_t)(ATTN_G2P_SPECIAL + a);
    log_softmax(sv.logits + (a * 2 + 1) * V, V, lp1);
    out[n++] = (seq){{ta, 0}, 1, norm(lp0[ta] + lp1[ATTN_G2P_EOS], 2, alpha)};
    for (int64_t b = 0; b < P; b++)
      out[n++] = (seq){{ta, (int32_t)(ATTN_G2P_SPECIAL + b)}, 2,
                       norm(lp0[ta] + lp1[ATTN_G2P_SPECIAL + b], 2, alpha)};
  }
  qsort(out, (size_t)n, sizeof *out, by_score);
  attn_g2p_saved_free(&sv);
  free(src), free(tin), free(sl), free(lp0), free(lp1);
  return n;
}

/* max_tgt 3: at most 2 tokens out; a beam of 80 keeps every one of the 69
 * phonemes after step 0, so its 6 best are the exhaustive 6 best */
static void test_beam_equals_exhaustive_search(void) {
  attn_g2p_model m;
  g2p_small_model(&m, 3, 1, 11);
  const int64_t V = m.vocab_tgt;
  seq *all = malloc((size_t)(1 + V * V) * sizeof *all);
  const float alphas[2] = {0.0f, 0.6f};
  for (int a = 0; a < 2; a++) {
    attn_g2p_decode_opts o;
    attn_g2p_decode_opts_default(&o);
    o.beam = 80;
    o.n_best = 6;
    o.alpha = alphas[a];
    const int32_t *src[3] = {words[0], words[1], words[2]};
    attn_g2p_hyps h;
    attn_nn_ctx ctx = {0};
    CHECK_OK(attn_g2p_search(&m, &ctx, &o, src, word_lens, 3, &h));
    for (int w = 0; w < 3; w++) {
      exhaustive(&m, w, alphas[a], all);
      CHECK(h.count[w] == 6);
      for (int k = 0; k < h.count[w]; k++) {
        const int64_t j = (int64_t)w * h.n_best + k;
        CHECK(h.len[j] == all[k].len);
        CHECK(h.len[j] < 1 || h.ph[j * h.max_tgt] == all[k].tok[0]);
        CHECK(h.len[j] < 2 || h.ph[j * h.max_tgt + 1] == all[k].tok[1]);
        CHECK(fabs(h.score[j] - all[k].score) < 1e-4);
      }
    }
    attn_g2p_hyps_free(&h);
  }
  free(all);
  attn_g2p_free(&m);
}

/* n-best: sorted by score, pairwise distinct; a batch of words equals its
 * words decoded one at a time */
static void test_n_best_sorted_distinct_and_batch_independent(void) {
  attn_g2p_model m;
  g2p_small_model(&m, 8, 2, 5);
  attn_g2p_decode_opts o;
  attn_g2p_decode_opts_default(&o);
  o.beam = 5;
  o.n_best = 5;
  const int32_t *src[3] = {words[0], words[1], words[2]};
  attn_g2p_hyps h, one;
  attn_nn_ctx ctx = {0};
  CHECK_OK(attn_g2p_search(&m, &ctx, &o, src, word_lens, 3, &h));
  const int64_t T = h.max_tgt;
  for (int w = 0; w < 3; w++) {
    CHECK(h.count[w] == 5);
    for (int k = 0; k < h.count[w]; k++) {
      const int64_t j = (int64_t)w * 5 + k;
      CHECK(h.len[j] >= 0 && h.len[j] <= 7);
      CHECK(k == 0 || h.score[j] <= h.score[j - 1]);
      for (int i = 0; i < k; i++) {
        const int64_t q = (int64_t)w * 5 + i;
        CHECK(h.len[q] != h.len[j] || memcmp(h.ph + q * T, h.ph + j * T, (size_t)h.len[j] * 4));
      }
    }
    o.batch = 1;
    CHECK_OK(attn_g2p_search(&m, &ctx, &o, src + w, word_lens + w, 1, &one));
    for (int k = 0; k < 5; k++) {
      const int64_t j = (int64_t)w * 5 + k;
      CHECK(one.len[k] == h.len[j] && !memcmp(one.ph + k * T, h.ph + j * T, (size_t)h.len[j] * 4));
      CHECK(fabsf(one.score[k] - h.score[j]) < 1e-4f);
    }
    attn_g2p_hyps_free(&one);
    o.batch = 128;
  }
  attn_g2p_hyps_free(&h);
  /* greedy = the first of a beam of 1 */
  int32_t out[3 * 8];
  int ol[3];
  o.beam = o.n_best = 1;
  CHECK_OK(attn_g2p_search(&m, &ctx, &o, src, word_lens, 3, &h));
  CHECK_OK(attn_g2p_greedy(&m, &ctx, src, word_lens, 3, 2, out, ol));
  for (int w = 0; w < 3; w++)
    CHECK(ol[w] == h.len[w] && !memcmp(out + w * T, h.ph + w * T, (size_t)ol[w] * 4));
  attn_g2p_hyps_free(&h);
  attn_g2p_free(&m);
}

/* words in batches decoded by 1, 2 and 3 threads (batches in parallel,
 * each thread's stepper reused from batch to batch, the last batch smaller):
 * the same bits, and each batch as decoded on its own */
static void test_batches_in_parallel_same_bits(void) {
  attn_g2p_model m;
  g2p_small_model(&m, 8, 2, 5);
  enum { N = 11 };
  const int32_t *src[N];
  int32_t lens[N];
  for (int i = 0; i < N; i++) src[i] = words[i % 3], lens[i] = word_lens[i % 3] - (i / 3) % 2;
  attn_g2p_decode_opts o;
  attn_g2p_decode_opts_default(&o);
  o.beam = 3;
  o.n_best = 2;
  o.batch = 3;
  attn_nn_ctx ctx = {0};
  const int nt = attn_get_num_threads();
  attn_g2p_hyps h[3], alone;
  for (int t = 0; t < 3; t++) {
    attn_set_num_threads(t + 1);
    CHECK_OK(attn_g2p_search(&m, &ctx, &o, src, lens, N, &h[t]));
  }
  attn_set_num_threads(nt);
  const int64_t T = h[0].max_tgt, k = (int64_t)N * 2;
  for (int t = 1; t < 3; t++) {
    CHECK(!memcmp(h[t].count, h[0].count, N * sizeof(int)));
    CHECK(!memcmp(h[t].len, h[0].len, (size_t)k * sizeof(int)));
    CHECK(!memcmp(h[t].score, h[0].score, (size_t)k * sizeof(float)));
    CHECK(!memcmp(h[t].logp, h[0].logp, (size_t)k * sizeof(float)));
    for (int64_t j = 0; j < k; j++)
      CHECK(!memcmp(h[t].ph + j * T, h[0].ph + j * T, (size_t)h[0].len[j] * 4));
  }
  for (int i0 = 0; i0 < N; i0 += o.batch) { /* each batch by itself, a fresh stepper */
    const int W = N - i0 < o.batch ? N - i0 : o.batch;
    CHECK_OK(attn_g2p_search(&m, &ctx, &o, src + i0, lens + i0, W, &alone));
    CHECK(!memcmp(alone.score, h[0].score + i0 * 2, (size_t)W * 2 * sizeof(float)));
    CHECK(!memcmp(alone.len, h[0].len + i0 * 2, (size_t)W * 2 * sizeof(int)));
    attn_g2p_hyps_free(&alone);
  }
  for (int t = 0; t < 3; t++) attn_g2p_hyps_free(&h[t]);
  attn_g2p_free(&m);
}

/* an ensemble of two models of other sizes, greedy: each step's token is
 * the argmax of the mean of the two models' probabilities (computed here
 * from each model's teacher-forced forward on the output), the hypothesis's
 * logp the sum of the log of those means; an ensemble of one is the model
 * bit for bit, a model with itself the model up to rounding; models that
 * read other lengths are refused */
static void test_ensemble_is_the_mean_of_probabilities(void) {
  attn_g2p_model m1, m2, m3;
  g2p_small_model(&m1, 8, 2, 5);
  g2p_small_model(&m2, 8, 1, 9);
  g2p_small_model(&m3, 9, 1, 9);
  const attn_g2p_model *ms[2] = {&m1, &m2}, *self[2] = {&m1, &m1}, *bad[2] = {&m1, &m3};
  const int32_t *src[3] = {words[0], words[1], words[2]};
  attn_nn_ctx ctx = {0};
  attn_g2p_decode_opts o;
  attn_g2p_decode_opts_default(&o);
  o.alpha = 0;
  attn_g2p_hyps h, h1, one, two;
  CHECK_OK(attn_g2p_search_ensemble(ms, 2, &ctx, &o, src, word_lens, 3, &h));
  CHECK_OK(attn_g2p_search(&m1, &ctx, &o, src, word_lens, 3, &h1));
  CHECK_OK(attn_g2p_search_ensemble(ms, 1, &ctx, &o, src, word_lens, 3, &one));
  CHECK_OK(attn_g2p_search_ensemble(self, 2, &ctx, &o, src, word_lens, 3, &two));
  const int64_t T = h.max_tgt, V = m1.vocab_tgt;
  int differs = 0;
  for (int w = 0; w < 3 && V <= 128 && T < 16; w++) {
    CHECK(one.len[w] == h1.len[w] && one.logp[w] == h1.logp[w] &&
          !memcmp(one.ph + w * T, h1.ph + w * T, (size_t)h1.len[w] * 4));
    CHECK(two.len[w] == h1.len[w] && fabsf(two.logp[w] - h1.logp[w]) <= 1e-5f &&
          !memcmp(two.ph + w * T, h1.ph + w * T, (size_t)h1.len[w] * 4));
    differs += h.len[w] != h1.len[w] || memcmp(h.ph + w * T, h1.ph + w * T, (size_t)h1.len[w] * 4);
    // the ensemble's output, teacher-forced through each model
    const int L = h.len[w], steps = L + (L < T - 1); /* + </s> when it finished */
    int32_t tin[16];
    tin[0] = ATTN_G2P_BOS;
    for (int t = 0; t < L; t++) tin[t + 1] = h.ph[w * T + t];
    attn_g2p_saved sv[2] = {{0}, {0}};
    for (int k = 0; k < 2; k++) {
      CHECK_OK(attn_g2p_encode(ms[k], &ctx, &sv[k], words[w], word_lens + w, 1, word_lens[w]));
      CHECK_OK(attn_g2p_decode(ms[k], &ctx, &sv[k], tin, steps));
    }
    double logp = 0;
    int argmax_ok = 1;
    for (int t = 0; t < steps; t++) {
      double p[128] = {0};
      for (int k = 0; k < 2; k++) {
        const float *x = sv[k].logits + t * V;
        double mx = x[0], z = 0;
        for (int64_t v = 1; v < V; v++) mx = x[v] > mx ? x[v] : mx;
        for (int64_t v = 0; v < V; v++) z += exp(x[v] - mx);
        for (int64_t v = 0; v < V; v++) p[v] += exp(x[v] - mx) / z / 2;
      }
      int best = ATTN_G2P_EOS;
      for (int64_t v = ATTN_G2P_SPECIAL; v < V; v++) best = p[v] > p[best] ? (int)v : best;
      const int32_t chosen = t < L ? h.ph[w * T + t] : ATTN_G2P_EOS;
      argmax_ok &= best == chosen;
      logp += log(p[chosen]);
    }
    CHECK(argmax_ok);
    CHECK(fabs(logp - h.logp[w]) <= 1e-4);
    attn_g2p_saved_free(&sv[0]);
    attn_g2p_saved_free(&sv[1]);
  }
  CHECK(V <= 128 && T < 16);
  if (!differs) printf("  (the ensemble's words equal model 1's here)\n");
  // beam search through the ensemble: K hypotheses, best first
  o.beam = 3;
  o.n_best = 3;
  attn_g2p_hyps hb;
  CHECK_OK(attn_g2p_search_ensemble(ms, 2, &ctx, &o, src, word_lens, 3, &hb));
  for (int w = 0; w < 3; w++) {
    CHECK(hb.count[w] == 3 && hb.score[w * 3] >= hb.score[w * 3 + 1]);
    CHECK(hb.score[w * 3] >= h.logp[w] - 1e-5f); /* the beam finds at least greedy's */
  }
  attn_g2p_hyps_free(&hb);
  CHECK_ERR(attn_g2p_search_ensemble(bad, 2, &ctx, &o, src, word_lens, 3, &hb), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "model 2") != NULL && hb.ph == NULL);
  CHECK_ERR(attn_g2p_search_ensemble(ms, 0, &ctx, &o, src, word_lens, 3, &hb), ATTN_EINVAL);
  attn_g2p_hyps_free(&h);
  attn_g2p_hyps_free(&h1);
  attn_g2p_hyps_free(&one);
  attn_g2p_hyps_free(&two);
  attn_g2p_free(&m1);
  attn_g2p_free(&m2);
  attn_g2p_free(&m3);
}

static void test_bad_options_refused(void) {
  attn_g2p_model m;
  g2p_small_model(&m, 8, 1, 5);
  const int32_t *src[3] = {words[0], words[1], words[2]};
  attn_nn_ctx ctx = {0};
  attn_g2p_hyps h;
  attn_g2p_decode_opts o;
  attn_g2p_decode_opts_default(&o);
  o.beam = 2;
  o.n_best = 3;
  CHECK_ERR(attn_g2p_search(&m, &ctx, &o, src, word_lens, 3, &h), ATTN_EINVAL);
  CHECK(h.ph == NULL && h.count == NULL);
  attn_g2p_decode_opts_default(&o);
  o.beam = 0;
  CHECK_ERR(attn_g2p_search(&m, &ctx, &o, src, word_lens, 3, &h), ATTN_EINVAL);
  attn_g2p_decode_opts_default(&o);
  const int32_t lens[2] = {3, 13}; /* longer than max_src 12 */
  CHECK_ERR(attn_g2p_search(&m, &ctx, &o, src, lens, 2, &h), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "word 2") != NULL);
  const int32_t empty[1] = {0};
  CHECK_ERR(attn_g2p_search(&m, &ctx, &o, src, empty, 1, &h), ATTN_EINVAL);
  attn_g2p_free(&m);
}

int main(void) {
  RUN(test_incremental_logits_equal_full_forward);
  RUN(test_beam_equals_exhaustive_search);
  RUN(test_n_best_sorted_distinct_and_batch_independent);
  RUN(test_batches_in_parallel_same_bits);
  RUN(test_ensemble_is_the_mean_of_probabilities);
  RUN(test_bad_options_refused);
  HARNESS_END();
}
