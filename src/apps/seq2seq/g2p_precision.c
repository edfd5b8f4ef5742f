/* --precision for the G2P commands (g2p_precision.h). */
#include "apps/seq2seq/g2p_precision.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apps/train/batch_plan.h"

static double clock_s(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* the probe's run: one measured thing in precision prec (k = which) */
typedef attn_status (*probe_fn)(void *user, attn_precision prec, uint64_t step);

/* f32 and cands[0..n) (warm-up, then alternating rounds, best kept) */
static attn_status run_probe(probe_fn fn, void *user, const attn_precision *cands, int n,
                             int64_t tokens, attn_prec_probe_result *r) {
  memset(r, 0, sizeof *r);
  r->t[0].prec = ATTN_PREC_F32;
  r->n = 1;
  for (int i = 0; i < n && r->n < 3; i++)
    if (cands[i] != ATTN_PREC_F32) r->t[r->n++].prec = cands[i];
  r->tokens = tokens;
  const double t_start = clock_s(CLOCK_MONOTONIC);
  attn_status st = ATTN_OK;
  uint64_t step = 0;
  for (int i = 0; !st && i < r->n; i++) st = fn(user, r->t[i].prec, step++);
  for (int round = 0; !st && round < 3; round++) {
    if (round > 0 && clock_s(CLOCK_MONOTONIC) - t_start > 1.5) break;
    for (int i = 0; !st && i < r->n; i++) {
      attn_prec_timing *t = &r->t[i];
      const double c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID), w0 = clock_s(CLOCK_MONOTONIC);
      st = fn(user, t->prec, step++);
      const double w = clock_s(CLOCK_MONOTONIC) - w0, c = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
      if (!t->rounds || w < t->fb_seconds) t->fb_seconds = w;
      if (!t->rounds || c < t->fb_cpu_seconds) t->fb_cpu_seconds = c;
      t->rounds++;
    }
  }
  for (int i = 0; i < r->n; i++)
    r->t[i].tokens_per_s = r->t[i].fb_seconds > 0 ? (double)tokens / r->t[i].fb_seconds : 0;
  r->seconds = clock_s(CLOCK_MONOTONIC) - t_start;
  return st;
}

/* auto's choice, or an explicit precision with a warning when slower */
static attn_status decide(probe_fn fn, void *user, int64_t tokens, int want_auto,
                          attn_precision *prec, const char *what, char *why, size_t why_cap) {
  attn_prec_info bf;
  attn_prec_info_get(ATTN_PREC_BF16, &bf);
  attn_precision cand = want_auto ? ATTN_PREC_BF16 : *prec;
  if (want_auto && !bf.candidate) { /* nothing to time */
    *prec = attn_prec_auto_choose(NULL, 0, why, why_cap);
    return ATTN_OK;
  }
  if (!want_auto && *prec == ATTN_PREC_F32) {
    snprintf(why, why_cap, "--precision f32: the reference");
    return ATTN_OK;
  }
  attn_prec_probe_result r;
  attn_status st = run_probe(fn, user, &cand, 1, tokens, &r);
  if (st) return attn_prefix_error(st, "precision probe");
  const double ratio = attn_prec_probe_ratio(&r, cand);
  char line[400];
  if (want_auto) {
    *prec = attn_prec_auto_choose(&r, 0, line, sizeof line);
  } else {
    attn_prec_info pi;
    attn_prec_info_get(cand, &pi);
    const int no_unit = cand == ATTN_PREC_BF16 && !pi.candidate;
    snprintf(line, sizeof line, "--precision %s; probe %.2fx f32 here, %s%s%s%s",
             attn_precision_name(cand), ratio, pi.units,
             ratio < 0.9 ? "; warning: slower than f32 here" : "",
             no_unit ? "; warning: " : "", no_unit ? pi.why : "");
  }
  snprintf(why, why_cap, "%s (%s probe %.2f s: f32 %.1fk tokens/s, %s %.1fk)", line, what,
           r.seconds, r.t[0].tokens_per_s / 1e3, attn_precision_name(cand),
           r.n > 1 ? r.t[1].tokens_per_s / 1e3 : 0.0);
  return ATTN_OK;
}

/* ---- training -------------------------------------------------------------- */
typedef struct {
  attn_g2p_model m;
  attn_g2p_batch bt;
  attn_g2p_saved sv;
  attn_g2p_train_opts o; /* seed, shards */
} train_probe;

static attn_status train_step(void *user, attn_precision prec, uint64_t step) {
  train_probe *p = user;
  float loss = 0;
  p->o.precision = prec;
  attn_status st = attn_g2p_batch_grad(&p->m, &p->sv, &p->bt, &p->o, (int64_t)step, &loss);
  attn_params_zero_grad(&p->m.p);
  return st;
}

attn_status attn_g2p_prec_train(const attn_g2p_model *m, const attn_g2p_set *train, int batch,
                                int shards, uint64_t seed, int want_auto, attn_precision *prec,
                                char *why, size_t why_cap) {
  train_probe p;
  memset(&p, 0, sizeof p);
  attn_g2p_train_opts_default(&p.o);
  p.o.seed = seed;
  p.o.shards = shards;

  attn_batch_plan plan = {0};
  attn_status st = attn_batch_plan_make(train->src_len, train->n, batch, 1, 0, 0, 0, &plan);
  if (!st) st = attn_g2p_create(&p.m, &m->c, &m->g);
  if (!st) st = attn_g2p_init(&p.m, seed);
  const int b = plan.nb / 2;
  if (!st) st = attn_g2p_batch_gather(train, plan.order + plan.start[b], plan.start[b + 1] - plan.start[b], &p.bt);
  if (!st) st = decide(train_step, &p, p.bt.tokens, want_auto, prec, "training", why, why_cap);
  attn_batch_plan_free(&plan);
  attn_g2p_batch_free(&p.bt);
  attn_g2p_saved_free(&p.sv);
  attn_g2p_free(&p.m);
  return st;
}

/* ---- inference ------------------------------------------------------------- */
typedef struct {
  const attn_g2p_model *m;
  const int32_t *const *src;
  const int32_t *lens;
  int n;
} infer_probe;

static attn_status infer_step(void *user, attn_precision prec, uint64_t step) {
  infer_probe *p = user;
  (void)step;
  attn_nn_ctx ctx = {.precision = prec};
  attn_g2p_decode_opts o;
  attn_g2p_decode_opts_default(&o);
  attn_g2p_hyps h;
  attn_status st = attn_g2p_search(p->m, &ctx, &o, p->src, p->lens, p->n, &h);
  attn_g2p_hyps_free(&h);
  return st;
}

attn_status attn_g2p_prec_infer(const attn_g2p_model *m, const int32_t *const *src,
                                const int32_t *src_lens, int n, int want_auto,
                                attn_precision *prec, char *why, size_t why_cap) {
  infer_probe p = {m, src, src_lens, n < 32 ? n : 32};
  int64_t tokens = 0;
  for (int i = 0; i < p.n; i++) tokens += src_lens[i];
  if (p.n < 1) {
    if (want_auto) *prec = ATTN_PREC_F32;
    snprintf(why, why_cap, "no words to probe");
    return ATTN_OK;
  }
  return decide(infer_step, &p, tokens, want_auto, prec, "decoding", why, why_cap);
}
