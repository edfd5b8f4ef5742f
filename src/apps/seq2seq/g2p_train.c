/* The G2P training loop (g2p_train.h). */
#include "apps/seq2seq/g2p_train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps/seq2seq/g2p_chunks.h"
#include "apps/train/dist.h"
#include "apps/train/train_plan.h"
#include "apps/train/train_progress.h"
#include "attn.h"

void attn_g2p_train_opts_default(attn_g2p_train_opts *o) {
  memset(o, 0, sizeof *o);
  o->epochs = 10;
  o->batch = 128; /* the measured recipe (docs/G2P.md) */
  o->lr = 1.5e-3;
  o->min_lr = 1e-5;
  o->weight_decay = 0.01;
  o->clip = 1.0;
  o->warmup = -1;
  o->smoothing = 0.1f;
  o->seed = 1;
  o->progress = -1;
  o->schedule = ATTN_SCHED_WARMUP_COSINE;
}

attn_status attn_g2p_plan(const attn_g2p_set *set, const attn_g2p_train_opts *o, int shuffle,
                          int64_t epoch, attn_batch_plan *plan) {
  if (o->batch_tokens <= 0)
    return attn_batch_plan_make(set->src_len, set->n, o->batch, shuffle ? 50 : 1, shuffle,
                                shuffle ? o->seed : 0, shuffle ? epoch : 0, plan);
  memset(plan, 0, sizeof *plan);
  int32_t *cost = malloc((size_t)(set->n > 0 ? set->n : 1) * sizeof *cost);
  if (!cost) return attn_set_error(ATTN_ENOMEM, "g2p: out of memory");
  for (int i = 0; i < set->n; i++)
    cost[i] = set->src_len[i] > set->tgt_len[i] + 1 ? set->src_len[i] : set->tgt_len[i] + 1;
  attn_status st = attn_batch_plan_tokens(cost, set->n, o->batch_tokens, shuffle,
                                          shuffle ? o->seed : 0, shuffle ? epoch : 0, plan);
  free(cost);
  return st;
}

attn_status attn_g2p_schedule(const attn_g2p_train_opts *o, int steps_per_epoch,
                              attn_schedule *sch) {
  memset(sch, 0, sizeof *sch);
  sch->kind = o->schedule;
  sch->base_lr = o->lr;
  sch->min_lr = o->min_lr;
  sch->total_steps = (int64_t)o->epochs * steps_per_epoch;
  sch->warmup_steps = o->warmup >= 0 ? o->warmup : sch->total_steps / 25;
  if (sch->kind == ATTN_SCHED_WARMUP_COSINE && sch->warmup_steps >= sch->total_steps)
    sch->warmup_steps = sch->total_steps - 1;
  if (sch->kind == ATTN_SCHED_WARMUP_INV_SQRT && sch->warmup_steps < 1) sch->warmup_steps = 1;
  return attn_schedule_check(sch);
}

attn_status attn_g2p_adam_init(attn_adam *opt, const attn_g2p_model *m,
                               const attn_g2p_train_opts *o) {
  attn_adam_config ac = attn_adam_defaults(ATTN_ADAMW);
  ac.beta2 = 0.98;
  ac.weight_decay = o->weight_decay;
  attn_status st = attn_adam_init(opt, &m->p, &ac);
  if (!st) st = attn_adam_set_decay_rule(opt, &m->p, attn_g2p_decay_rule, NULL);
  return st;
}

attn_status attn_g2p_batch_loss(const attn_g2p_model *m, attn_precision precision,
                                attn_g2p_saved *sv, const attn_g2p_batch *bt, float *loss) {
  attn_nn_ctx ctx = {.precision = precision};
  attn_status st = attn_g2p_encode(m, &ctx, sv, bt->src, bt->src_len, bt->B, bt->Ls);
  if (!st) st = attn_g2p_decode(m, &ctx, sv, bt->tin, bt->Lt);
  if (!st)
    st = attn_cross_entropy_f32(sv->logits, bt->tout, bt->B * bt->Lt, m->vocab_tgt, -1, 0.0f, loss,
                                NULL);
  return st;
}

attn_status attn_g2p_eval_loss(const attn_g2p_model *m, const attn_g2p_set *set, int batch,
                               attn_precision precision, double *loss) {
  attn_batch_plan plan = {0};
  attn_g2p_batch bt = {0};
  attn_g2p_saved sv = {0};
  double sum = 0, count = 0;
  attn_status st = attn_batch_plan_make(set->src_len, set->n, batch, 1, 0, 0, 0, &plan);
  for (int b = 0; !st && b < plan.nb; b++) {
    int B = plan.start[b + 1] - plan.start[b];
    st = attn_g2p_batch_gather(set, plan.order + plan.start[b], B, &bt);
    float l = 0;
    if (!st) st = attn_g2p_batch_loss(m, precision, &sv, &bt, &l);
    sum += (double)l * (double)bt.tokens;
    count += (double)bt.tokens;
  }
  *loss = count > 0 ? sum / count : 0;
  attn_batch_plan_free(&plan);
  attn_g2p_batch_free(&bt);
  attn_g2p_saved_free(&sv);
  return st;
}

/* ---- checkpoints ---------------------------------------------------------- */
static attn_status save(const attn_g2p_model *m, const attn_adam *opt,
                        const attn_g2p_train_state *s, const char *dir, const char *name) {
  char path[4096], state[256] = "";
  snprintf(path, sizeof path, "%s/%s", dir, name);
  if (s)
    snprintf(state, sizeof state, "%d %d %lld %a %a %d", s->epoch, s->batch, (long long)s->step,
             s->loss_sum, s->best_val, s->best_epoch);
  const char *kv[] = {"g2p.train.state", state, NULL};
  return attn_g2p_save(path, m, opt, s ? kv : NULL);
}

attn_status attn_g2p_train_resume(const char *path, const attn_g2p_train_opts *o, attn_g2p_model *m,
                                  attn_adam *opt, attn_g2p_train_state *s) {
  attn_st *file = NULL;
  memset(opt, 0, sizeof *opt);
  attn_status st = attn_g2p_load(path, m, &file);
  if (st) return st;
  const char *state = attn_st_meta(file, "g2p.train.state");
  long long step = 0;
  memset(s, 0, sizeof *s);
  if (!state ||
      sscanf(state, "%d %d %lld %la %la %d", &s->epoch, &s->batch, &step, &s->loss_sum,
             &s->best_val, &s->best_epoch) != 6 ||
      s->epoch < 0 || s->batch < 0 || step < 0)
    st = attn_set_error(ATTN_EINVAL, "%s: no training state to resume from (a best.safetensors?)",
                        path);
  s->step = step;
  attn_st_free(file);
  if (!st) st = attn_g2p_adam_init(opt, m, o);
  if (!st) st = attn_checkpoint_load(path, &m->p, opt, NULL);
  if (st) {
    attn_adam_free(opt);
    attn_g2p_free(m);
  }
  return st;
}

/* ---- shards: data parallelism inside a step ------------------------------------ */
typedef struct {
  attn_g2p_model *m;
  const attn_g2p_batch *bt;
  attn_nn_ctx ctx;
  attn_g2p_saved *sv; /* the step's: sv->sub [k], sv->sub_grad */
  int k;
  int64_t norm;  /* target tokens of the whole batch */
  float *losses; /* [k] */
  float smoothing;
} shard_job;

/* Shard c: rows [lo, hi) of the batch, forward and backward; its gradient
 * into m->p.grad (shard 0) or its own buffer (zeroed first). */
static attn_status shard_run(void *user, int64_t c, int t) {
  (void)t;
  shard_job *j = user;
  const attn_g2p_batch *bt = j->bt;
  int64_t lo, hi;
  attn_dist_shard_rows(bt->B, j->k, (int)c, &lo, &hi);
  j->losses[c] = 0;
  if (hi <= lo) return ATTN_OK;
  attn_g2p_model mk = *j->m;
  if (c > 0) {
    mk.p.grad = j->sv->sub_grad + (size_t)(c - 1) * (size_t)j->sv->sub_numel;
    memset(mk.p.grad, 0, (size_t)j->sv->sub_numel * sizeof(float));
  }
  attn_nn_ctx ctx = j->ctx; /* dropout draws what the whole batch's rows would */
  ctx.shard_row0 = lo;
  ctx.shard_rows = hi - lo;
  attn_g2p_saved *s = &j->sv->sub[c];
  attn_status st =
      attn_g2p_encode(&mk, &ctx, s, bt->src + lo * bt->Ls, bt->src_len + lo, hi - lo, bt->Ls);
  if (!st) st = attn_g2p_decode(&mk, &ctx, s, bt->tin + lo * bt->Lt, bt->Lt);
  if (!st)
    st = attn_g2p_loss_backward(&mk, &ctx, s, bt->tout + lo * bt->Lt, j->smoothing, j->norm,
                                &j->losses[c]);
  return st;
}

/* The gradient of batch bt accumulated into m->p.grad in k shards. */
static attn_status sharded_grad(attn_g2p_model *m, const attn_nn_ctx *ctx, attn_g2p_saved *sv,
                                const attn_g2p_batch *bt, int k, float smoothing, float *loss) {
  const int64_t numel = m->p.numel;
  if (sv->nsub != k || sv->sub_numel != numel) {
    for (int i = 0; sv->sub && i < sv->nsub; i++)
      attn_g2p_saved_free(&sv->sub[i]);
    free(sv->sub);
    free(sv->sub_grad);
    sv->sub = calloc((size_t)k, sizeof *sv->sub);
    sv->sub_grad = malloc((size_t)(k - 1) * (size_t)numel * sizeof(float));
    sv->nsub = k;
    sv->sub_numel = numel;
    if (!sv->sub || !sv->sub_grad) {
      free(sv->sub);
      free(sv->sub_grad);
      sv->sub = NULL;
      sv->sub_grad = NULL;
      sv->nsub = 0;
      return attn_set_error(ATTN_ENOMEM, "g2p: out of memory for %d shards' gradients", k);
    }
  }
  float losses[64];
  int64_t norm = 0;
  for (int64_t i = 0; i < bt->B * bt->Lt; i++)
    norm += bt->tout[i] >= 0;
  shard_job j = {m, bt, *ctx, sv, k, norm > 0 ? norm : 1, losses, smoothing};
  attn_status st = attn_g2p_run_chunks(k, attn_g2p_chunk_threads(k), shard_run, &j);
  if (st) return st;
  float *g = m->p.grad;
  const float *sg = sv->sub_grad;
  const int nt = attn_g2p_chunk_threads(numel / 65536 + 1);
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
  for (int64_t i = 0; i < numel; i++) /* shard order: ((g0 + g1) + g2) + ... */
    for (int c = 1; c < k; c++)
      g[i] += sg[(size_t)(c - 1) * (size_t)numel + (size_t)i];
  float sum = 0;
  for (int c = 0; c < k; c++)
    sum += losses[c];
  *loss = sum;
  return ATTN_OK;
}

attn_status attn_g2p_batch_grad(attn_g2p_model *m, attn_g2p_saved *sv, const attn_g2p_batch *bt,
                                const attn_g2p_train_opts *o, int64_t step, float *loss) {
  attn_nn_ctx ctx = {0};
  ctx.training = 1;
  ctx.seed = o->seed;
  ctx.step = (uint64_t)step;
  ctx.precision = o->precision;
  if (o->shards < 0 || o->shards > 64)
    return attn_set_error(ATTN_EINVAL, "g2p: %d shards (1 to 64)", o->shards);
  const int k = o->shards < bt->B ? o->shards : (int)bt->B;
  if (k > 1) return sharded_grad(m, &ctx, sv, bt, k, o->smoothing, loss);
  attn_status st = attn_g2p_encode(m, &ctx, sv, bt->src, bt->src_len, bt->B, bt->Ls);
  if (!st) st = attn_g2p_decode(m, &ctx, sv, bt->tin, bt->Lt);
  if (!st) st = attn_g2p_loss_backward(m, &ctx, sv, bt->tout, o->smoothing, 0, loss);
  return st;
}

/* ---- the loop ----------------------------------------------------------------- */
attn_status attn_g2p_train_step(attn_g2p_model *m, attn_adam *opt, attn_g2p_saved *sv,
                                const attn_g2p_batch *bt, const attn_g2p_train_opts *o, double lr,
                                int64_t step, float *loss) {
  attn_status st = attn_g2p_batch_grad(m, sv, bt, o, step, loss);
  if (!st && o->clip > 0) st = attn_clip_grad_norm(&m->p, o->clip, NULL);
  if (!st) st = attn_adam_step(opt, &m->p, lr);
  attn_params_zero_grad(&m->p);
  return st;
}

static int write_i32(FILE *f, const int32_t *x, int64_t n) {
  return fwrite(x, sizeof *x, (size_t)n, f) == (size_t)n;
}

attn_status attn_g2p_train_bench(attn_g2p_model *m, attn_adam *opt, const attn_g2p_set *train,
                                 const attn_g2p_train_opts *o, int steps, const char *dump,
                                 double *tokens, double *seconds) {
  *tokens = *seconds = 0;
  if (train->n < 1 || steps < 1)
    return attn_set_error(ATTN_EINVAL, "g2p bench: %d steps on %d examples", steps, train->n);
  attn_batch_plan plan = {0};
  attn_g2p_batch bt = {0};
  attn_g2p_saved sv = {0};
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp", dump ? dump : "");
  FILE *f = dump ? fopen(tmp, "wb") : NULL;
  attn_status st = dump && !f ? attn_set_error(ATTN_EIO, "cannot write '%s'", tmp) : ATTN_OK;
  if (!st) st = attn_g2p_plan(train, o, 1, 0, &plan);
  const int32_t head[2] = {0x42503247, steps + 1}; /* "G2PB", batches */
  if (!st && f && !write_i32(f, head, 2)) st = attn_set_error(ATTN_EIO, "cannot write '%s'", tmp);
  for (int k = 0; !st && k <= steps; k++) { /* step 0 warms up, untimed */
    const int b = k % plan.nb;
    float loss = 0;
    st = attn_g2p_batch_gather(train, plan.order + plan.start[b], plan.start[b + 1] - plan.start[b], &bt);
    const int32_t dims[3] = {(int32_t)bt.B, (int32_t)bt.Ls, (int32_t)bt.Lt};
    if (!st && f &&
        !(write_i32(f, dims, 3) && write_i32(f, bt.src, bt.B * bt.Ls) &&
          write_i32(f, bt.src_len, bt.B) && write_i32(f, bt.tin, bt.B * bt.Lt) &&
          write_i32(f, bt.tout, bt.B * bt.Lt)))
      st = attn_set_error(ATTN_EIO, "cannot write '%s'", tmp);
    const double t0 = attn_train_now();
    if (!st) st = attn_g2p_train_step(m, opt, &sv, &bt, o, o->lr, k, &loss);
    if (k > 0) {
      *seconds += attn_train_now() - t0;
      *tokens += (double)bt.tokens;
    }
  }
  if (f && fclose(f) && !st) st = attn_set_error(ATTN_EIO, "cannot write '%s'", tmp);
  if (f && !st && rename(tmp, dump)) st = attn_set_error(ATTN_EIO, "cannot rename '%s'", tmp);
  if (f && st) remove(tmp);
  attn_batch_plan_free(&plan);
  attn_g2p_batch_free(&bt);
  attn_g2p_saved_free(&sv);
  return st;
}

attn_status attn_g2p_train_run(attn_g2p_model *m, attn_adam *opt, attn_g2p_train_state *s,
                               const attn_g2p_set *train, const attn_g2p_set *val,
                               const attn_g2p_train_opts *o, float *losses, int64_t nlosses) {
  if (train->n < 1) return attn_set_error(ATTN_EINVAL, "g2p train: no training examples");
  FILE *log = o->log ? o->log : stdout;
  attn_batch_plan plan = {0};
  attn_g2p_batch bt = {0};
  attn_g2p_saved sv = {0};
  attn_status st = attn_g2p_plan(train, o, 1, 0, &plan);
  int nb = plan.nb;
  attn_schedule sch;
  if (!st) st = attn_g2p_schedule(o, nb, &sch);
  attn_train_progress pg;
  attn_train_progress_init(&pg, o->progress);
  double t_run = attn_train_now();
  attn_train_eta_start(o->eta, s->step);
  int stopped = 0;
  for (; !st && !stopped && s->epoch < o->epochs;) {
    attn_batch_plan_free(&plan);
    st = attn_g2p_plan(train, o, 1, s->epoch, &plan);
    attn_train_progress_epoch(&pg);
    double t_epoch = pg.t_epoch;
    for (; !st && s->batch < nb;) {
      int b = s->batch, B = plan.start[b + 1] - plan.start[b];
      float loss = 0;
      st = attn_g2p_batch_gather(train, plan.order + plan.start[b], B, &bt);
      if (!st)
        st = attn_g2p_train_step(m, opt, &sv, &bt, o, attn_schedule_lr(&sch, s->step), s->step, &loss);
      if (st) break;
      if (losses && s->step < nlosses) losses[s->step] = loss;
      s->step++;
      s->batch++;
      s->loss_sum += loss;
      pg.tokens += (double)bt.tokens;
      pg.done++;
      attn_train_progress_show_eta(&pg, o->eta, s->step, s->epoch, o->epochs, s->batch, nb,
                                   s->loss_sum / s->batch, 0);
      if (o->stop_after > 0 && s->step >= o->stop_after) stopped = 1;
      if (o->out_dir && (stopped || (o->save_every > 0 && s->step % o->save_every == 0)))
        st = save(m, opt, s, o->out_dir, "last.safetensors");
      if (stopped) break;
    }
    if (st || stopped) break;
    if (pg.mode == 1)
      attn_train_progress_show_eta(&pg, o->eta, s->step, s->epoch, o->epochs, nb, nb,
                                   s->loss_sum / nb, 1);
    double vl = 0;
    if (val && val->n > 0) st = attn_g2p_eval_loss(m, val, 128, o->precision, &vl);
    if (st) break;
    double now = attn_train_now();
    fprintf(log, "Epoch %d/%d | Train Loss: %.4f | Val Loss: %.4f | %.0f s (total %.0f s)\n",
            s->epoch + 1, o->epochs, s->loss_sum / nb, vl, now - t_epoch, now - t_run);
    fflush(log);
    int best = s->best_epoch == 0 || vl < s->best_val;
    if (best) {
      s->best_val = vl;
      s->best_epoch = s->epoch + 1;
    }
    s->epoch++;
    s->batch = 0;
    s->loss_sum = 0;
    if (o->out_dir && best) st = save(m, NULL, NULL, o->out_dir, "best.safetensors");
    if (!st && o->out_dir && o->keep_epochs) {
      char name[64];
      snprintf(name, sizeof name, "epoch_%03d.safetensors", s->epoch);
      st = save(m, NULL, NULL, o->out_dir, name);
    }
    if (!st && o->out_dir) st = save(m, opt, s, o->out_dir, "last.safetensors");
  }
  attn_batch_plan_free(&plan);
  attn_g2p_batch_free(&bt);
  attn_g2p_saved_free(&sv);
  return st;
}
