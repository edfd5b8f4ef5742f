/* Right-to-left G2P models and n-best rescoring (src/apps/seq2seq/g2p_rescore.h,
 * issue 35): a reversed model's teacher-forced score against the one
 * computed here from its forward logits (one model and an ensemble of two;
 * several hypotheses of a word sharing one encoding, at 1, 2 and 3 threads);
 * its beam's output comes back in reading order with the logp the scorer
 * gives it; rescoring by a model trained to prefer one candidate picks that
 * candidate, in the order the combined score computed here says; bad pairs
 * (an L2R model as rescorer, other graphemes, another inventory) are refused
 * naming what differs; one model trained both ways (--both-directions)
 * decodes from <s>, scores right to left from <unk> and rescores its own
 * beam; and the command line (eval / predict --rescore, --both-directions).
 *
 * Tolerances: a sum of at most 8 log-probabilities computed from f32 logits
 * of the same model through batches of other shapes: 1e-4. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "apps/seq2seq/g2p_rescore.h"
#include "apps/seq2seq/g2p_train.h"
#include "harness.h"
#include "g2p_small.h"
#include "tool_run.h"

static char dir[64], bin[1024];

/* g2p_small.h's model (max_tgt 10) with the direction, stress and graphemes given */
static void model(attn_g2p_model *m, int reverse, int stress, int dec_layers, uint64_t seed,
                  const char *chars) {
  attn_g2p_config c;
  g2p_small_config(&c, 10, dec_layers);
  c.reverse = reverse;
  c.stress = stress;
  g2p_small_create(m, &c, chars, seed);
}

static const int32_t words[2][5] = {{4, 5, 6, 7, 8}, {9, 10, 0, 0, 0}};
static const int32_t word_lens[2] = {5, 2};

/* sum over t of log softmax(logits_t)[y_t] of the teacher-forced forward on
 * start + seq (seq in the model's order; start: the model's first input in
 * the direction r2l, <s> but for a both-directions model's right-to-left
 * pass), y = seq + </s> (eos 0: seq alone); the mean of the models'
 * probabilities per step when nm = 2 */
static double by_hand_dir(const attn_g2p_model *const *ms, int nm, int w, const int32_t *seq, int n,
                          int eos, int r2l) {
  int32_t tin[16] = {ATTN_G2P_BOS}, tout[16];
  for (int t = 0; t < n; t++)
    tin[t + 1] = tout[t] = seq[t];
  tout[n] = ATTN_G2P_EOS;
  double p[16] = {0};
  attn_nn_ctx ctx = {.backend = ATTN_BACKEND_MATH};
  for (int k = 0; k < nm; k++) {
    attn_g2p_saved sv = {0};
    tin[0] = ms[k]->c.both && r2l ? ATTN_G2P_UNK : ATTN_G2P_BOS;
    CHECK_OK(attn_g2p_encode(ms[k], &ctx, &sv, words[w], word_lens + w, 1, word_lens[w]));
    CHECK_OK(attn_g2p_decode(ms[k], &ctx, &sv, tin, n + 1));
    const int64_t V = ms[k]->vocab_tgt;
    for (int t = 0; t <= n && sv.logits; t++) {
      const float *x = sv.logits + t * V;
      double mx = x[0], z = 0;
      for (int64_t v = 1; v < V; v++)
        mx = x[v] > mx ? x[v] : mx;
      for (int64_t v = 0; v < V; v++)
        z += exp(x[v] - mx);
      p[t] += exp(x[tout[t]] - mx) / z / nm;
    }
    attn_g2p_saved_free(&sv);
  }
  double s = 0;
  for (int t = 0; t < n + eos; t++)
    s += log(p[t]);
  return s;
}

static double by_hand_eos(const attn_g2p_model *const *ms, int nm, int w, const int32_t *seq, int n,
                          int eos) {
  return by_hand_dir(ms, nm, w, seq, n, eos, ms[0]->c.reverse);
}

static double by_hand(const attn_g2p_model *const *ms, int nm, int w, const int32_t *seq, int n) {
  return by_hand_eos(ms, nm, w, seq, n, 1);
}

/* a random model seldom ends a word: favour </s> so that beams finish */
static void favour_eos(attn_g2p_model *m) {
  attn_params_data(&m->p, m->out_b)[ATTN_G2P_EOS] += 2.5f;
}

static void reversed(const int32_t *x, int n, int32_t *y) {
  for (int t = 0; t < n; t++)
    y[t] = x[n - 1 - t];
}

/* sequence_logp of a right-to-left model = by hand on the reversed sequence;
 * of an ensemble of two = the log of the mean of their probabilities */
static void test_reversed_teacher_forced_score(void) {
  attn_g2p_model r1, r2;
  model(&r1, 1, 1, 2, 3, "ABCDEFG'");
  model(&r2, 1, 1, 1, 8, "ABCDEFG'");
  const attn_g2p_model *one[1] = {&r1}, *two[2] = {&r1, &r2};
  /* three sequences (reading order) of words 0, 1, 0; one empty */
  const int32_t ph[3][8] = {{30, 12, 50, 7}, {60, 61}, {0}};
  const int len[3] = {4, 2, 0}, word[3] = {0, 1, 0};
  const int32_t *src[2] = {words[0], words[1]};
  double got[3], got2[3];
  attn_nn_ctx ctx = {0};
  CHECK_OK(
      attn_g2p_sequence_logp(one, 1, &ctx, src, word_lens, word, &ph[0][0], 8, len, 3, 2, got));
  CHECK_OK(
      attn_g2p_sequence_logp(two, 2, &ctx, src, word_lens, word, &ph[0][0], 8, len, 3, 3, got2));
  for (int j = 0; j < 3; j++) {
    int32_t rev[8];
    reversed(ph[j], len[j], rev);
    const double want = by_hand(one, 1, word[j], rev, len[j]);
    const double want2 = by_hand(two, 2, word[j], rev, len[j]);
    CHECK(fabs(got[j] - want) <= 1e-4 && fabs(got2[j] - want2) <= 1e-4);
    if (len[j] > 1) /* and not the forward order's score */
      CHECK(fabs(got[j] - by_hand(one, 1, word[j], ph[j], len[j])) > 1e-3);
  }
  /* a phoneme the model does not write is refused */
  const int32_t bad[1][8] = {{ATTN_G2P_BOS}};
  const int one_len[1] = {1}, w0[1] = {0};
  CHECK_ERR(
      attn_g2p_sequence_logp(one, 1, &ctx, src, word_lens, w0, &bad[0][0], 8, one_len, 1, 1, got),
      ATTN_EINVAL);
  attn_g2p_free(&r1);
  attn_g2p_free(&r2);
}

/* several hypotheses per word, runs of one word split across chunks or
 * not: each sequence's score as by hand (each word encoded once per chunk,
 * its rows gathered: attn_g2p_encode_rows), and the same bits for 1, 2 and
 * 3 threads (chunks fixed by the order) */
static void test_words_encoded_once(void) {
  attn_g2p_model r;
  model(&r, 1, 1, 2, 5, "ABCDEFG'");
  const attn_g2p_model *one[1] = {&r};
  enum { N = 8 };
  const int32_t ph[N][8] = {{30, 12, 50, 7}, {30, 12}, {61}, {60, 61, 62}, {60},
                            {12, 13, 14, 15, 16, 17}, {0}, {40, 41}};
  const int len[N] = {4, 2, 1, 3, 1, 6, 0, 2}, word[N] = {0, 0, 0, 1, 1, 0, 0, 1};
  const int32_t *src[2] = {words[0], words[1]};
  double want[N];
  for (int j = 0; j < N; j++) {
    int32_t rev[8];
    reversed(ph[j], len[j], rev);
    want[j] = by_hand(one, 1, word[j], rev, len[j]);
  }
  attn_nn_ctx ctx = {0};
  const int saved = attn_get_num_threads();
  const int batches[3] = {1, 3, 8};
  for (int b = 0; b < 3; b++) {
    double got[3][N];
    for (int nt = 1; nt <= 3; nt++) {
      attn_set_num_threads(nt);
      CHECK_OK(attn_g2p_sequence_logp(one, 1, &ctx, src, word_lens, word, &ph[0][0], 8, len, N,
                                      batches[b], got[nt - 1]));
    }
    for (int j = 0; j < N; j++)
      CHECK(fabs(got[0][j] - want[j]) <= 1e-4);
    CHECK(!memcmp(got[0], got[1], sizeof got[0]) && !memcmp(got[0], got[2], sizeof got[0]));
  }
  attn_set_num_threads(saved);
  /* a decoder row naming a word that is not there */
  attn_g2p_saved sv = {0};
  const int32_t rw[2] = {0, 1}, one_len[1] = {5};
  CHECK_ERR(attn_g2p_encode_rows(&r, &ctx, &sv, words[0], one_len, 1, 5, rw, 2), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "decoder row 1 reads word 1 of 1") != NULL);
  attn_g2p_saved_free(&sv);
  attn_g2p_free(&r);
}

/* a right-to-left model's beam: its outputs in reading order, each with the
 * logp the teacher-forced scorer gives that (reading-order) output (an
 * output stopped at max_tgt - 1 without </s>: the sum without it) */
static void test_reversed_beam_reads_in_order(void) {
  attn_g2p_model r;
  model(&r, 1, 1, 2, 4, "ABCDEFG'");
  favour_eos(&r);
  attn_g2p_decode_opts o;
  attn_g2p_decode_opts_default(&o);
  o.beam = o.n_best = 3;
  const int32_t *src[2] = {words[0], words[1]};
  attn_g2p_hyps h;
  attn_nn_ctx ctx = {0};
  CHECK_OK(attn_g2p_search(&r, &ctx, &o, src, word_lens, 2, &h));
  const attn_g2p_model *one[1] = {&r};
  int finished = 0;
  for (int w = 0; w < 2; w++)
    for (int k = 0; k < h.count[w]; k++) {
      const int64_t j = (int64_t)w * h.n_best + k;
      const int eos = h.len[j] < h.max_tgt - 1; /* else stopped without </s> */
      double lp = 0;
      int32_t rev[16];
      reversed(h.ph + j * h.max_tgt, h.len[j], rev);
      CHECK(fabs(by_hand_eos(one, 1, w, rev, h.len[j], eos) - h.logp[j]) <= 1e-4);
      CHECK_OK(attn_g2p_sequence_logp(one, 1, &ctx, src, word_lens, &w, h.ph + j * h.max_tgt,
                                      h.max_tgt, &h.len[j], 1, 1, &lp));
      CHECK(fabs(lp - by_hand(one, 1, w, rev, h.len[j])) <= 1e-4);
      if (eos) CHECK(fabs(lp - h.logp[j]) <= 1e-4);
      finished += eos;
    }
  CHECK(finished > 0);
  attn_g2p_hyps_free(&h);
  attn_g2p_free(&r);
}

/* trains r (right to left) on word 0 -> x (reading order) until it prefers x */
static void teach(attn_g2p_model *r, const int32_t *x, int n) {
  attn_g2p_train_opts o;
  attn_g2p_train_opts_default(&o);
  attn_adam opt;
  CHECK_OK(attn_g2p_adam_init(&opt, r, &o));
  attn_g2p_batch bt = {0};
  int32_t sl[1] = {word_lens[0]}, tin[16] = {ATTN_G2P_BOS}, tout[16];
  for (int t = 0; t < n; t++)
    tin[t + 1] = tout[t] = x[n - 1 - t];
  tout[n] = ATTN_G2P_EOS;
  bt.B = 1, bt.Ls = word_lens[0], bt.Lt = n + 1, bt.tokens = n + 1;
  bt.src = (int32_t *)words[0], bt.src_len = sl, bt.tin = tin, bt.tout = tout;
  attn_g2p_saved sv = {0};
  float loss = 0;
  for (int s = 0; s < 60; s++)
    CHECK_OK(attn_g2p_train_step(r, &opt, &sv, &bt, &o, 1e-2, s, &loss));
  attn_g2p_saved_free(&sv);
  attn_adam_free(&opt);
}

/* the beam's last candidate x, once a right-to-left model prefers it, wins
 * the rescoring; every hypothesis's combined logp and the new order are as
 * computed here; weight 0 keeps the beam's order */
static void test_rescoring_picks_the_preferred_candidate(void) {
  attn_g2p_model l, r;
  model(&l, 0, 1, 2, 5, "ABCDEFG'");
  model(&r, 1, 1, 1, 6, "ABCDEFG'");
  favour_eos(&l);
  const attn_g2p_model *ls[1] = {&l}, *rs[1] = {&r};
  CHECK_OK(attn_g2p_rescore_check(ls, 1, rs, 1));
  attn_g2p_decode_opts o;
  attn_g2p_decode_opts_default(&o);
  o.beam = o.n_best = 4;
  const int32_t *src[1] = {words[0]};
  attn_g2p_hyps h, h0, base;
  attn_nn_ctx ctx = {0};
  CHECK_OK(attn_g2p_search(&l, &ctx, &o, src, word_lens, 1, &base));
  CHECK(base.count[0] == 4);
  const int64_t T = base.max_tgt;
  int32_t x[16];
  const int nx = base.len[3];
  memcpy(x, base.ph + 3 * T, (size_t)nx * sizeof *x);
  teach(&r, x, nx);
  /* the R2L model now scores x best of the four */
  double lr[4];
  int word[4] = {0, 0, 0, 0};
  CHECK_OK(
      attn_g2p_sequence_logp(rs, 1, &ctx, src, word_lens, word, base.ph, T, base.len, 4, 4, lr));
  CHECK(lr[3] > lr[0] && lr[3] > lr[1] && lr[3] > lr[2]);
  const float wt = 2.0f;
  CHECK_OK(attn_g2p_search(&l, &ctx, &o, src, word_lens, 1, &h));
  CHECK_OK(attn_g2p_rescore(&h, rs, 1, wt, o.alpha, &ctx, src, word_lens, 2));
  CHECK(h.len[0] == nx && !memcmp(h.ph, x, (size_t)nx * sizeof *x));
  /* the order by logp_l2r + W logp_r2l, length-normalised as the beam */
  double want[4];
  int order[4] = {0, 1, 2, 3};
  for (int k = 0; k < 4; k++)
    want[k] = ((double)base.logp[k] + wt * lr[k]) / pow((5.0 + base.len[k] + 1) / 6.0, o.alpha);
  for (int a = 1; a < 4; a++)
    for (int b = a; b > 0 && want[order[b]] > want[order[b - 1]]; b--) {
      const int tmp = order[b];
      order[b] = order[b - 1], order[b - 1] = tmp;
    }
  for (int k = 0; k < 4; k++) {
    const int q = order[k];
    CHECK(h.len[k] == base.len[q] && !memcmp(h.ph + k * T, base.ph + q * T, (size_t)h.len[k] * 4));
    CHECK(fabs(h.score[k] - want[q]) <= 1e-4 * (1 + fabs(want[q])));
    CHECK(fabs(h.logp[k] - (base.logp[q] + wt * lr[q])) <= 1e-4 * (1 + fabs(want[q])));
  }
  CHECK_OK(attn_g2p_search(&l, &ctx, &o, src, word_lens, 1, &h0));
  CHECK_OK(attn_g2p_rescore(&h0, rs, 1, 0.0f, o.alpha, &ctx, src, word_lens, 2));
  for (int k = 0; k < 4; k++)
    CHECK(h0.len[k] == base.len[k] &&
          !memcmp(h0.ph + k * T, base.ph + k * T, (size_t)h0.len[k] * 4));
  CHECK_ERR(attn_g2p_rescore(&h0, rs, 1, -1.0f, o.alpha, &ctx, src, word_lens, 2), ATTN_EINVAL);
  attn_g2p_hyps_free(&h);
  attn_g2p_hyps_free(&h0);
  attn_g2p_hyps_free(&base);
  attn_g2p_free(&l);
  attn_g2p_free(&r);
}

/* attn_g2p_rescore_best (eval's) keeps each word's first hypothesis of
 * attn_g2p_rescore (its phonemes; logp and score to rounding: the scores come
 * from batches of other rows), and one per word,
 * over 40 words, weights 0 to 3 and length penalties 0 and 0.6; the
 * right-to-left model, taught to prefer word 0's last candidate, moves
 * another hypothesis first at some of them */
static void test_rescore_best_same_first(void) {
  attn_g2p_model l, r;
  model(&l, 0, 1, 2, 21, "ABCDEFG'");
  model(&r, 1, 1, 1, 22, "ABCDEFG'");
  favour_eos(&l);
  const attn_g2p_model *rs[1] = {&r};
  enum { W = 40 };
  int32_t wd[W][6], wl[W];
  const int32_t *src[W];
  uint32_t x = 12345;
  for (int w = 0; w < W; w++) {
    wl[w] = 1 + w % 5;
    for (int t = 0; t < wl[w]; t++) {
      x = x * 1103515245u + 12345u;
      wd[w][t] = 4 + (int32_t)((x >> 16) % 8);
    }
    src[w] = wd[w];
  }
  src[0] = words[0], wl[0] = word_lens[0];
  attn_g2p_decode_opts o;
  attn_g2p_decode_opts_default(&o);
  o.beam = o.n_best = 5;
  attn_nn_ctx ctx = {0};
  { /* the rescorer taught to prefer word 0's last candidate */
    attn_g2p_hyps h0;
    CHECK_OK(attn_g2p_search(&l, &ctx, &o, src, wl, 1, &h0));
    CHECK(h0.count[0] == 5);
    teach(&r, h0.ph + 4 * h0.max_tgt, h0.len[4]);
    attn_g2p_hyps_free(&h0);
  }
  const float weights[4] = {0.0f, 0.5f, 1.0f, 3.0f}, alphas[2] = {0.0f, 0.6f};
  int moved = 0;
  for (int a = 0; a < 2; a++) {
    o.alpha = alphas[a];
    attn_g2p_hyps base;
    CHECK_OK(attn_g2p_search(&l, &ctx, &o, src, wl, W, &base));
    for (int wi = 0; wi < 4; wi++) {
      attn_g2p_hyps full, best;
      CHECK_OK(attn_g2p_search(&l, &ctx, &o, src, wl, W, &full));
      CHECK_OK(attn_g2p_search(&l, &ctx, &o, src, wl, W, &best));
      CHECK_OK(attn_g2p_rescore(&full, rs, 1, weights[wi], o.alpha, &ctx, src, wl, 7));
      CHECK_OK(attn_g2p_rescore_best(&best, rs, 1, weights[wi], o.alpha, &ctx, src, wl, 7));
      const int64_t T = full.max_tgt;
      int moved_here = 0;
      for (int w = 0; w < W; w++) {
        const int64_t q = (int64_t)w * full.n_best;
        CHECK(best.count[w] == (full.count[w] > 0));
        if (full.count[w] < 1) continue;
        /* the right-to-left scores come from batches of other rows (the
         * first hypotheses, then the rest): equal to rounding */
        const double tol = 1e-5 * (1 + fabs(full.score[q]));
        CHECK(fabs(best.score[q] - full.score[q]) <= tol &&
              fabs(best.logp[q] - full.logp[q]) <= 1e-5 * (1 + fabs(full.logp[q])));
        if (full.count[w] > 1 && full.score[q] - full.score[q + 1] <= 2 * tol) continue; /* a tie */
        CHECK(best.len[q] == full.len[q] &&
              !memcmp(best.ph + q * T, full.ph + q * T, (size_t)full.len[q] * 4));
        moved_here += full.len[q] != base.len[q] ||
                      memcmp(full.ph + q * T, base.ph + q * T, (size_t)full.len[q] * 4) != 0;
      }
      CHECK(wi > 0 || moved_here == 0); /* weight 0: the beam's order */
      moved += moved_here;
      attn_g2p_hyps_free(&full);
      attn_g2p_hyps_free(&best);
    }
    attn_g2p_hyps_free(&base);
  }
  CHECK(moved > 0);
  attn_g2p_free(&l);
  attn_g2p_free(&r);
}

/* one model trained both ways (--both-directions): its beam is left to right
 * from <s> (reading order; each logp as by hand); it scores right to left
 * from <unk> (the reversed sequence by hand, not from <s>); it rescores its
 * own beam (combined logps = beam + its right-to-left scores) and joins a
 * right-to-left model in a rescoring ensemble (each from its own start) or
 * a left-to-right one in a decoding ensemble */
static void test_both_directions_one_model(void) {
  attn_g2p_config c;
  g2p_small_config(&c, 10, 2);
  c.both = 1;
  attn_g2p_model b, r, l;
  g2p_small_create(&b, &c, "ABCDEFG'", 11);
  model(&r, 1, 1, 1, 12, "ABCDEFG'");
  model(&l, 0, 1, 1, 13, "ABCDEFG'");
  favour_eos(&b);
  const attn_g2p_model *B[1] = {&b}, *BR[2] = {&b, &r}, *BL[2] = {&b, &l};
  CHECK_OK(attn_g2p_rescore_check(B, 1, B, 1));
  CHECK_OK(attn_g2p_rescore_check(B, 1, BR, 2));
  CHECK_OK(attn_g2p_ensemble_check(BL, 2));
  attn_g2p_decode_opts o;
  attn_g2p_decode_opts_default(&o);
  o.beam = o.n_best = 3;
  const int32_t *src[2] = {words[0], words[1]};
  attn_g2p_hyps h, base;
  attn_nn_ctx ctx = {0};
  CHECK_OK(attn_g2p_search(&b, &ctx, &o, src, word_lens, 2, &base));
  const int64_t T = base.max_tgt;
  double lr[6], lr2[6], sum_want = 0;
  int word[6], len[6], nh = 0, finished = 0;
  int32_t ph[6][16];
  for (int w = 0; w < 2; w++)
    for (int k = 0; k < base.count[w]; k++) {
      const int64_t j = (int64_t)w * base.n_best + k;
      const int eos = base.len[j] < T - 1;
      CHECK(fabs(by_hand_dir(B, 1, w, base.ph + j * T, base.len[j], eos, 0) - base.logp[j]) <=
            1e-4);
      finished += eos;
      word[nh] = w, len[nh] = base.len[j];
      memcpy(ph[nh], base.ph + j * T, (size_t)base.len[j] * sizeof **ph);
      nh++;
    }
  CHECK(finished > 0 && nh == 6);
  CHECK_OK(attn_g2p_sequence_logp(B, 1, &ctx, src, word_lens, word, &ph[0][0], 16, len, nh, 4, lr));
  CHECK_OK(
      attn_g2p_sequence_logp(BR, 2, &ctx, src, word_lens, word, &ph[0][0], 16, len, nh, 2, lr2));
  for (int j = 0; j < nh; j++) {
    int32_t rev[16];
    reversed(ph[j], len[j], rev);
    CHECK(fabs(lr[j] - by_hand_dir(B, 1, word[j], rev, len[j], 1, 1)) <= 1e-4);
    CHECK(fabs(lr2[j] - by_hand_dir(BR, 2, word[j], rev, len[j], 1, 1)) <= 1e-4);
    if (len[j] > 0) /* from <unk>, not from <s> */
      CHECK(fabs(lr[j] - by_hand_dir(B, 1, word[j], rev, len[j], 1, 0)) > 1e-3);
    sum_want += base.logp[(int64_t)word[j] * base.n_best + j % 3] + lr[j];
  }
  CHECK_OK(attn_g2p_search(&b, &ctx, &o, src, word_lens, 2, &h));
  CHECK_OK(attn_g2p_rescore(&h, B, 1, 1.0f, o.alpha, &ctx, src, word_lens, 2));
  double sum_got = 0;
  for (int j = 0; j < 6; j++)
    sum_got += h.logp[j];
  CHECK(fabs(sum_got - sum_want) <= 1e-3);
  attn_g2p_hyps_free(&h);
  attn_g2p_hyps_free(&base);
  attn_g2p_free(&b);
  attn_g2p_free(&r);
  attn_g2p_free(&l);
}

static void test_bad_pairs_refused(void) {
  attn_g2p_model l, r, l2, ns, og;
  model(&l, 0, 1, 1, 5, "ABCDEFG'");
  model(&r, 1, 1, 1, 6, "ABCDEFG'");
  model(&l2, 0, 1, 1, 7, "ABCDEFG'");
  model(&ns, 1, 0, 1, 8, "ABCDEFG'");
  model(&og, 1, 1, 1, 9, "ABCDEFGH");
  const attn_g2p_model *L[1] = {&l}, *R[1] = {&r}, *L2[1] = {&l2}, *NS[1] = {&ns}, *OG[1] = {&og};
  CHECK_ERR(attn_g2p_rescore_check(L, 1, L2, 1), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "left-to-right model") && strstr(attn_last_error(), "--reverse"));
  CHECK_ERR(attn_g2p_rescore_check(R, 1, R, 1), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "decoding model 1 is a right-to-left"));
  CHECK_ERR(attn_g2p_rescore_check(L, 1, NS, 1), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "stress-free") && strstr(attn_last_error(), "--no-stress"));
  CHECK_ERR(attn_g2p_rescore_check(L, 1, OG, 1), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "graphemes"));
  CHECK_ERR(attn_g2p_rescore_check(L, 1, R, 0), ATTN_EINVAL);
  /* an ensemble of a left-to-right and a right-to-left model */
  const attn_g2p_model *mix[2] = {&l, &r};
  CHECK_ERR(attn_g2p_ensemble_check(mix, 2), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "right to left") != NULL);
  attn_g2p_free(&l);
  attn_g2p_free(&r);
  attn_g2p_free(&l2);
  attn_g2p_free(&ns);
  attn_g2p_free(&og);
}

static int tool(const char *args, char *out, size_t nout, char *err, size_t nerr) {
  return tool_run("", bin, dir, args, out, nout, err, nerr);
}

/* eval / predict MODEL --rescore R2L: the line that says so, the scores; bad
 * input: a left-to-right rescorer, other stress, --beam 1, a train option */
static void test_cli_rescore(void) {
  char args[1024], out[8192], err[4096];
  const char *kinds[3][2] = {{"l2r", ""}, {"r2l", "--reverse"}, {"r2lns", "--reverse --no-stress"}};
  for (int i = 0; i < 3; i++) {
    snprintf(args, sizeof args,
             "g2p train --data tests/data/g2p --out %s/%s --dim 8 --heads 2 "
             "--ff 8 --layers 1 --batch 8 --epochs 2 %s --progress quiet --precision f32",
             dir, kinds[i][0], kinds[i][1]);
    CHECK(tool(args, out, sizeof out, err, sizeof err) == 0);
  }
  CHECK(strstr(out, "without stress, right to left") != NULL);
  snprintf(args, sizeof args,
           "g2p eval %s/l2r/best.safetensors --rescore %s/r2l/best.safetensors "
           "--data tests/data/g2p --split val --worst 0 --beam 3",
           dir, dir);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 0);
  CHECK(strstr(out, "3 hypotheses rescored by 1 right-to-left model") && strstr(out, "val ") &&
        strstr(out, "stress removed: WER"));
  snprintf(args, sizeof args,
           "g2p predict %s/l2r/best.safetensors abase --rescore "
           "%s/r2l/best.safetensors,%s/r2l/best.safetensors --beam 3 --n-best 2 "
           "--rescore-weight 0.5",
           dir, dir, dir);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 0 && !strncmp(out, "abase\t1\t", 8) &&
        strstr(out, "\nabase\t2\t"));
  /* a right-to-left model alone: its output in reading order (as its own
   * teacher-forced score shows) */
  snprintf(args, sizeof args, "g2p predict %s/r2l/best.safetensors abase", dir);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 0 && !strncmp(out, "abase\t", 6));
  const char *bad[4][3] = {{"l2r", "l2r", "--beam 3"},
                           {"l2r", "r2lns", "--beam 3"},
                           {"l2r", "r2l", "--beam 1"},
                           {"r2l", "r2l", "--beam 3"}};
  const char *why[4] = {"left-to-right model", "stress-free", "--beam K", "decoding model 1"};
  const int rc[4] = {1, 1, 2, 1};
  for (int i = 0; i < 4; i++) {
    snprintf(args, sizeof args,
             "g2p predict %s/%s/best.safetensors abase --rescore "
             "%s/%s/best.safetensors %s",
             dir, bad[i][0], dir, bad[i][1], bad[i][2]);
    CHECK(tool(args, out, sizeof out, err, sizeof err) == rc[i] && out[0] == 0 &&
          strstr(err, why[i]));
    if (!strstr(err, why[i])) printf("  %d: %s", i, err);
  }
  /* one model both ways: trained on each pronunciation twice, it rescores itself */
  snprintf(args, sizeof args,
           "g2p train --data tests/data/g2p --out %s/both --dim 8 --heads 2 --ff 8 --layers 1 "
           "--batch 8 --epochs 1 --both-directions --progress quiet --precision f32",
           dir);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 0 && strstr(out, "each both ways") &&
        strstr(out, "both ways (left to right from <s>, right to left from <unk>)"));
  snprintf(args, sizeof args,
           "g2p eval %s/both/best.safetensors --rescore %s/both/best.safetensors "
           "--data tests/data/g2p --split val --worst 0 --beam 3",
           dir, dir);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 0 &&
        strstr(out, "both-directions model (--both-directions): decoded left to right\n") &&
        strstr(out, "3 hypotheses rescored by 1 right-to-left model"));
  snprintf(args, sizeof args,
           "g2p train --data tests/data/g2p --out %s/x --both-directions --reverse --epochs 1",
           dir);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 1 && strstr(err, "not both"));
  snprintf(args, sizeof args, "g2p train --data tests/data/g2p --out %s/x --rescore a.safetensors",
           dir);
  CHECK(tool(args, out, sizeof out, err, sizeof err) == 2 && strstr(err, "options of eval"));
}

int main(int argc, char **argv) {
  tool_path(argc > 0 ? argv[0] : NULL, bin, sizeof bin);
  snprintf(dir, sizeof dir, "/tmp/attn_g2p_rescore_XXXXXX");
  if (!mkdtemp(dir)) return 1;
  RUN(test_reversed_teacher_forced_score);
  RUN(test_words_encoded_once);
  RUN(test_reversed_beam_reads_in_order);
  RUN(test_rescoring_picks_the_preferred_candidate);
  RUN(test_rescore_best_same_first);
  RUN(test_both_directions_one_model);
  RUN(test_bad_pairs_refused);
  RUN(test_cli_rescore);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) printf("  could not remove %s\n", dir);
  HARNESS_END();
}
