/* Beam search (src/apps/seq2seq/beam.h) on toy models whose best sequences
 * are known: a model where greedy is wrong and a beam of 2 is right; K = 1
 * equal to a plain greedy loop; a beam wide enough to be exhaustive equal to
 * brute-force enumeration under each length normalisation; a batch equal to
 * its sources searched one by one; n-best sorted; the model's rows reordered
 * only within a source; bad configurations refused. Scores are compared
 * with 1e-5 (sums of a few f32 log-probabilities). */
#include <stdint.h>

#include "apps/seq2seq/beam.h"
#include "harness.h"

#define MAXROWS 256
#define MAXT 16

/* The toy model's own state: each row's tokens so far (bos first), kept in
 * step with the search by reorder. logp depends on the whole prefix, so a
 * wrong reorder shows in the result. */
typedef struct {
  int K; /* rows per source: a reorder across sources is a failure */
  int64_t V;
  int32_t hist[MAXROWS][MAXT];
  int len[MAXROWS];
  int bad_reorder, steps;
  int64_t source0; /* source id of row 0 (to search sources one by one) */
  int kind;        /* 0: the greedy trap, 1: hashed prefixes */
  uint8_t retired[MAXROWS]; /* sources the search told finished (toy_retire) */
  int retire_calls, retire_bad;
} toy;

/* log-softmax of a score derived from a hash of (source, prefix, v);
 * token 4 (bos) impossible */
static void hashed(const toy *m, int64_t s, const int32_t *h, int n, float *lp) {
  double z = 0, sc[8];
  for (int64_t v = 0; v < m->V; v++) {
    uint32_t x = 2166136261u ^ (uint32_t)(s * 7919);
    for (int i = 0; i < n; i++)
      x = (x ^ (uint32_t)h[i]) * 16777619u;
    x = (x ^ (uint32_t)(v + 101)) * 16777619u;
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    x ^= x >> 15;
    sc[v] = 3.0 * (double)(x & 0xffff) / 65536.0;
    if (v == 4) sc[v] = -INFINITY;
    z += exp(sc[v]);
  }
  for (int64_t v = 0; v < m->V; v++)
    lp[v] = (float)(sc[v] - log(z));
}

/* eos 0, A 1, B 2, bos 3: P(A) .6, P(B) .4; after A: eos, A, B 1/3 each;
 * after B: eos .9, A .05, B .05. Greedy: A eos (.2); best: B eos (.36). */
static void trap(const int32_t *h, int n, float *lp) {
  static const float first[4] = {0, .6f, .4f, 0}, afterA[4] = {1 / 3.f, 1 / 3.f, 1 / 3.f, 0},
                     afterB[4] = {.9f, .05f, .05f, 0}, other[4] = {.5f, .25f, .25f, 0};
  const float *p = n == 1 ? first : h[n - 1] == 1 ? afterA : h[n - 1] == 2 ? afterB : other;
  for (int v = 0; v < 4; v++)
    lp[v] = p[v] > 0 ? logf(p[v]) : -INFINITY;
}

static attn_status toy_step(void *user, const int32_t *tokens, int64_t rows, int64_t t,
                            float *logp) {
  toy *m = user;
  m->steps++;
  for (int64_t r = 0; r < rows; r++) {
    if (m->len[r] != t || t >= MAXT)
      return attn_set_error(ATTN_EINVAL, "toy: row %lld", (long long)r);
    m->hist[r][m->len[r]++] = tokens[r];
    if (m->kind == 0)
      trap(m->hist[r], m->len[r], logp + r * m->V);
    else
      hashed(m, m->source0 + r / m->K, m->hist[r], m->len[r], logp + r * m->V);
  }
  return ATTN_OK;
}

static attn_status toy_reorder(void *user, const int64_t *src, int64_t rows) {
  toy *m = user;
  static int32_t h[MAXROWS][MAXT];
  static int len[MAXROWS];
  for (int64_t r = 0; r < rows; r++) {
    if (src[r] / m->K != r / m->K) m->bad_reorder = 1;
    memcpy(h[r], m->hist[src[r]], sizeof h[r]);
    len[r] = m->len[src[r]];
  }
  memcpy(m->hist, h, sizeof h);
  memcpy(m->len, len, sizeof len);
  return ATTN_OK;
}

static attn_beam_result run(toy *m, int kind, int K, int n_best, int64_t V, int max_len, int64_t B,
                            int64_t source0, attn_beam_norm norm) {
  memset(m, 0, sizeof *m);
  m->K = K, m->V = V, m->kind = kind, m->source0 = source0;
  attn_beam_config c;
  attn_beam_config_default(&c);
  c.K = K, c.n_best = n_best, c.V = V, c.max_len = max_len, c.eos = 0;
  c.bos = kind == 0 ? 3 : 4;
  c.norm = norm;
  attn_beam_model mod = {m, toy_step, toy_reorder, NULL};
  attn_beam_result r;
  CHECK_OK(attn_beam_search(&c, &mod, B, &r));
  CHECK(!m->bad_reorder);
  return r;
}

static void test_beam_of_two_escapes_the_greedy_trap(void) {
  toy m;
  attn_beam_result g = run(&m, 0, 1, 1, 4, 8, 1, 0, ATTN_BEAM_NORM_NONE);
  attn_beam_result b = run(&m, 0, 2, 2, 4, 8, 1, 0, ATTN_BEAM_NORM_NONE);
  CHECK(g.count[0] == 1 && g.hyps[0].len == 1 && g.hyps[0].tokens[0] == 1 && g.hyps[0].finished);
  CHECK(fabsf(g.hyps[0].logp - logf(.6f / 3)) < 1e-5f);
  CHECK(b.count[0] == 2 && b.hyps[0].len == 1 && b.hyps[0].tokens[0] == 2);
  CHECK(fabsf(b.hyps[0].score - logf(.4f * .9f)) < 1e-5f);
  CHECK(b.hyps[1].score <= b.hyps[0].score); /* n-best: best first */
  attn_beam_result_free(&g);
  attn_beam_result_free(&b);
}

/* argmax each step (lower id on ties) until eos or max_len */
static int greedy(int64_t s, int64_t V, int max_len, int32_t *out, float *sum) {
  toy m = {.K = 1, .V = V, .kind = 1};
  int32_t h[MAXT] = {4};
  float lp[8];
  int n = 0;
  *sum = 0;
  for (int t = 0; t < max_len; t++) {
    hashed(&m, s, h, t + 1, lp);
    int best = 0;
    for (int v = 1; v < V; v++)
      if (lp[v] > lp[best]) best = v;
    *sum += lp[best];
    if (best == 0) break;
    h[t + 1] = out[n++] = best;
  }
  return n;
}

static void test_beam_of_one_is_greedy(void) {
  toy m;
  attn_beam_result r = run(&m, 1, 1, 1, 5, 6, 9, 0, ATTN_BEAM_NORM_GNMT);
  for (int64_t s = 0; s < 9; s++) {
    int32_t want[MAXT];
    float sum;
    int n = greedy(s, 5, 6, want, &sum);
    CHECK(r.count[s] == 1 && r.hyps[s].len == n);
    CHECK(!memcmp(r.hyps[s].tokens, want, (size_t)n * sizeof(int32_t)));
    CHECK(fabsf(r.hyps[s].logp - sum) < 1e-5f);
  }
  attn_beam_result_free(&r);
}

/* the best sequence by enumeration: tokens 1..3 then eos (or none at max_len) */
static float brute_best(int64_t s, int max_len, attn_beam_norm norm, int32_t *best, int *best_len) {
  toy m = {.K = 1, .V = 5, .kind = 1};
  attn_beam_config c;
  attn_beam_config_default(&c);
  c.norm = norm;
  float top = -INFINITY;
  int total = 1;
  for (int i = 0; i < max_len; i++)
    total *= 3;
  for (int code = 0; code < total; code++) {
    int32_t h[MAXT] = {4};
    float lp[8], sum = 0;
    int x = code;
    for (int t = 0; t < max_len; t++) {
      h[t + 1] = 1 + x % 3, x /= 3;
      hashed(&m, s, h, t + 1, lp);
      float with_eos = sum + lp[0];
      float sc = with_eos / (norm == ATTN_BEAM_NORM_LENGTH ? (t + 1)
                             : norm == ATTN_BEAM_NORM_GNMT ? powf((5.f + t + 1) / 6.f, c.alpha)
                                                           : 1.f);
      if (sc > top + 1e-6f) top = sc, *best_len = t, memcpy(best, h + 1, t * sizeof(int32_t));
      sum += lp[h[t + 1]];
    }
    int L = max_len;
    float sc = sum / (norm == ATTN_BEAM_NORM_LENGTH ? L
                      : norm == ATTN_BEAM_NORM_GNMT ? powf((5.f + L) / 6.f, c.alpha)
                                                    : 1.f);
    if (sc > top + 1e-6f) top = sc, *best_len = L, memcpy(best, h + 1, L * sizeof(int32_t));
  }
  return top;
}

/* a hypothesis's logp recomputed from the model over its own tokens (a wrong
 * reorder would have scored some prefix against another row's history) */
static void check_own_logp(int64_t s, const attn_beam_hyp *h) {
  toy m = {.K = 1, .V = 5, .kind = 1};
  int32_t seq[MAXT] = {4};
  float lp[8], sum = 0;
  for (int t = 0; t < h->len; t++) {
    hashed(&m, s, seq, t + 1, lp);
    sum += lp[seq[t + 1] = h->tokens[t]];
  }
  if (h->finished) {
    hashed(&m, s, seq, h->len + 1, lp);
    sum += lp[0];
  }
  CHECK(fabsf(sum - h->logp) < 1e-5f);
}

static void test_wide_beam_finds_the_enumerated_best(void) {
  const attn_beam_norm norms[3] = {ATTN_BEAM_NORM_NONE, ATTN_BEAM_NORM_LENGTH, ATTN_BEAM_NORM_GNMT};
  for (int i = 0; i < 3; i++) {
    toy m;
    /* max_len 3: at most 9 live rows x 4 tokens = 36 candidates <= K = 40 */
    attn_beam_result r = run(&m, 1, 40, 3, 5, 3, 4, 0, norms[i]);
    for (int64_t s = 0; s < 4; s++) {
      int32_t best[MAXT];
      int len = 0;
      float top = brute_best(s, 3, norms[i], best, &len);
      CHECK(fabsf(r.hyps[s * 3].score - top) < 1e-5f);
      CHECK(r.hyps[s * 3].len == len && !memcmp(r.hyps[s * 3].tokens, best, len * sizeof(int32_t)));
      for (int c = 0; c < r.count[s]; c++)
        check_own_logp(s, &r.hyps[s * 3 + c]);
      CHECK(r.count[s] == 3 && r.hyps[s * 3 + 1].score <= r.hyps[s * 3].score &&
            r.hyps[s * 3 + 2].score <= r.hyps[s * 3 + 1].score);
    }
    attn_beam_result_free(&r);
  }
}

/* a batch of sources gives what each source gives alone */
static void test_batch_equals_sources_one_by_one(void) {
  toy m;
  attn_beam_result all = run(&m, 1, 4, 2, 5, 7, 6, 0, ATTN_BEAM_NORM_GNMT);
  for (int64_t s = 0; s < 6; s++) {
    attn_beam_result one = run(&m, 1, 4, 2, 5, 7, 1, s, ATTN_BEAM_NORM_GNMT);
    CHECK(one.count[0] == all.count[s]);
    for (int i = 0; i < one.count[0] && i < all.count[s]; i++) {
      const attn_beam_hyp *a = &all.hyps[s * 2 + i], *b = &one.hyps[i];
      CHECK(a->len == b->len && a->finished == b->finished && a->score == b->score);
      check_own_logp(s, a);
      CHECK(!memcmp(a->tokens, b->tokens, (size_t)a->len * sizeof(int32_t)));
    }
    attn_beam_result_free(&one);
  }
  attn_beam_result_free(&all);
}

/* rows of retired sources get logp 0 everywhere: read, they would win */
static attn_status toy_step_retired(void *user, const int32_t *tokens, int64_t rows, int64_t t,
                                    float *logp) {
  toy *m = user;
  attn_status st = toy_step(user, tokens, rows, t, logp);
  for (int64_t r = 0; !st && r < rows; r++)
    for (int64_t v = 0; m->retired[r / m->K] && v < m->V; v++) logp[r * m->V + v] = 0.0f;
  return st;
}

static attn_status toy_retire(void *user, const int *done, int64_t B) {
  toy *m = user;
  int more = 0;
  m->retire_calls++;
  for (int64_t s = 0; s < B; s++) {
    if (m->retired[s] && !done[s]) m->retire_bad = 1; /* a finished source came back */
    more |= done[s] && !m->retired[s];
    m->retired[s] = done[s] != 0;
  }
  if (!more) m->retire_bad = 1; /* called without news */
  return ATTN_OK;
}

/* retire tells the model each source as it finishes (every one by the end,
 * once); the finished sources' rows are never read again: the same result */
static void test_retire_names_finished_sources(void) {
  toy m;
  attn_beam_result want = run(&m, 1, 3, 2, 6, 9, 5, 0, ATTN_BEAM_NORM_GNMT);
  memset(&m, 0, sizeof m);
  m.K = 3, m.V = 6, m.kind = 1;
  attn_beam_config c;
  attn_beam_config_default(&c);
  c.K = 3, c.n_best = 2, c.V = 6, c.max_len = 9, c.eos = 0, c.bos = 4;
  attn_beam_model mod = {&m, toy_step_retired, toy_reorder, toy_retire};
  attn_beam_result got;
  CHECK_OK(attn_beam_search(&c, &mod, 5, &got));
  CHECK(m.retire_calls >= 1 && !m.retire_bad && !m.bad_reorder);
  for (int64_t s = 0; s < 5; s++) {
    CHECK(m.retired[s]);
    CHECK(got.count[s] == want.count[s]);
    for (int i = 0; i < got.count[s] && i < want.count[s]; i++) {
      const attn_beam_hyp *a = &got.hyps[s * 2 + i], *b = &want.hyps[s * 2 + i];
      CHECK(a->len == b->len && a->score == b->score);
      CHECK(!memcmp(a->tokens, b->tokens, (size_t)a->len * sizeof(int32_t)));
    }
  }
  attn_beam_result_free(&want);
  attn_beam_result_free(&got);
}

/* max_len 1 in the trap: no eos at step 0 beats A/B, the live ones stop unfinished */
static void test_max_len_stops_unfinished(void) {
  toy m;
  attn_beam_result r = run(&m, 0, 2, 2, 4, 1, 1, 0, ATTN_BEAM_NORM_NONE);
  CHECK(r.count[0] == 2 && !r.hyps[0].finished && r.hyps[0].len == 1 && r.hyps[0].tokens[0] == 1);
  CHECK(r.hyps[1].tokens[0] == 2 && m.steps == 1);
  attn_beam_result_free(&r);
}

static void test_bad_configurations_are_refused(void) {
  toy m = {.K = 1, .V = 4};
  attn_beam_model mod = {&m, toy_step, toy_reorder, NULL};
  attn_beam_config c;
  attn_beam_config_default(&c);
  c.V = 4, c.bos = 3, c.eos = 0;
  attn_beam_result r;
  c.K = 0;
  CHECK_ERR(attn_beam_search(&c, &mod, 1, &r), ATTN_EINVAL);
  c.K = 2, c.n_best = 3;
  CHECK_ERR(attn_beam_search(&c, &mod, 1, &r), ATTN_EINVAL);
  c.n_best = 1, c.bos = 4;
  CHECK_ERR(attn_beam_search(&c, &mod, 1, &r), ATTN_EINVAL);
  c.bos = 3;
  CHECK_ERR(attn_beam_search(&c, &mod, 0, &r), ATTN_EINVAL);
  mod.reorder = NULL;
  CHECK_ERR(attn_beam_search(&c, &mod, 1, &r), ATTN_EINVAL);
  CHECK(r.hyps == NULL);
}

int main(void) {
  RUN(test_beam_of_two_escapes_the_greedy_trap);
  RUN(test_beam_of_one_is_greedy);
  RUN(test_wide_beam_finds_the_enumerated_best);
  RUN(test_batch_equals_sources_one_by_one);
  RUN(test_retire_names_finished_sources);
  RUN(test_max_len_stops_unfinished);
  RUN(test_bad_configurations_are_refused);
  HARNESS_END();
}
