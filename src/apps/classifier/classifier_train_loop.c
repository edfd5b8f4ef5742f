/* The training loop: steps, progress (a bar on a terminal, plain lines
 * otherwise), per-epoch validation, best/last checkpoints, stop and resume. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "apps/classifier/classifier_train.h"
#include "apps/train/train_plan.h"
#include "apps/train/train_progress.h"

void attn_train_opts_default(attn_train_opts *o) {
  memset(o, 0, sizeof *o);
  o->epochs = 5;
  o->batch = 32;
  o->eval_batch = 64;
  o->chunk_batches = 50;
  o->lr = 1e-3;
  o->min_lr = 1e-5;
  o->weight_decay = 0.01;
  o->warmup_frac = 0.05;
  o->clip = 1.0;
  o->seed = 1;
  o->backend = ATTN_BACKEND_AUTO;
  o->progress = -1;
  o->members = 1;
}

#define now_s attn_train_now

/* The step line: the epoch's figures, and the whole run's ETA (every member
 * and epoch) when known. */
static void progress_show(attn_train_progress *pg, const attn_train_opts *o, int epoch, int b,
                          int nb, double avg_loss, int64_t step, int final) {
  attn_train_progress_show_eta(pg, o->eta, o->eta ? o->eta->steps_before + step : 0, epoch,
                               o->epochs, b, nb, avg_loss, final);
}

static attn_status save_last(const attn_train_opts *o, const attn_clf *m, const attn_adam *opt,
                             const attn_train_state *s, const attn_st *meta) {
  if (!o->out_dir || attn_dist_rank(o->dist) != 0) return ATTN_OK;  // rank 0 writes
  char path[4096];
  snprintf(path, sizeof path, "%s/last.safetensors", o->out_dir);
  return attn_clf_save(path, m, opt, s, meta);
}

static attn_status save_best(const attn_train_opts *o, const attn_clf *m, const attn_st *meta) {
  if (!o->out_dir || attn_dist_rank(o->dist) != 0) return ATTN_OK;
  char path[4096];
  snprintf(path, sizeof path, "%s/best.safetensors", o->out_dir);
  return attn_clf_save(path, m, NULL, NULL, meta);
}

/* Validation loss and accuracy; with QAT of the fake-quantized model (the
 * one the int8 export will be). */
static attn_status validate(const attn_clf *m, const attn_train_opts *o, attn_qat *qat,
                            const attn_tok_set *val, double *loss, double *acc) {
  attn_nn_ctx ctx = {.training = 0, .qat = qat};
  return attn_clf_evaluate_ctx(m, qat ? &ctx : NULL, val, o->eval_batch, loss, acc, NULL, NULL);
}

/* Validation of the weight average (swapped in, then back); with the raw
 * weights' figures in raw_loss / raw_acc. Without an average: the model. */
static attn_status validate_avg(attn_clf *m, const attn_train_opts *o, attn_qat *qat,
                                attn_ema *ema, const attn_tok_set *val, double *loss, double *acc,
                                double *raw_loss, double *raw_acc) {
  attn_status st = validate(m, o, qat, val, raw_loss, raw_acc);
  if (st || !ema->avg) {
    *loss = *raw_loss;
    *acc = *raw_acc;
    return st;
  }
  st = attn_ema_swap(ema, &m->p);
  if (st) return st;
  st = validate(m, o, qat, val, loss, acc);
  attn_status st2 = attn_ema_swap(ema, &m->p);
  return st ? st : st2;
}

/* best.safetensors of the average (swapped in, then back) or of the model. */
static attn_status save_best_avg(const attn_train_opts *o, attn_clf *m, attn_ema *ema,
                                 const attn_st *meta) {
  if (!ema->avg) return save_best(o, m, meta);
  attn_status st = attn_ema_swap(ema, &m->p);
  if (st) return st;
  st = save_best(o, m, meta);
  attn_status st2 = attn_ema_swap(ema, &m->p);
  return st ? st : st2;
}

/* Mixed precision / QAT state of a run. */
typedef struct {
  attn_loss_scaler *scaler; /* the state's (enabled for fp16; saved in checkpoints) */
  attn_qat *qat;            /* --qat */
} amp_state;

static attn_status dist_ready(void *d, int64_t lo) { return attn_dist_grad_ready(d, lo); }

/* The gradient of rows [lo, lo + rows) of a batch of B (ids [rows, L]) into
 * m->p.grad (zeroed first); the loss and dlogits are normalised by B, so the
 * shards' gradients add up to the batch's. *loss: the shard's part. */
static attn_status shard_grad(attn_clf *m, const attn_train_opts *o, attn_nn_ctx ctx,
                              attn_clf_acts *acts, const int32_t *ids, const int32_t *lens,
                              const int32_t *tg, int64_t lo, int64_t rows, int64_t B, int64_t L,
                              float *dlogits, float *loss, amp_state *amp) {
  attn_params_zero_grad(&m->p);
  *loss = 0;
  if (rows == 0) return ATTN_OK;  // the last batch of an epoch, smaller than the shards: nothing
  if (rows < B) {  // dropout draws what it would for these rows of the whole batch
    ctx.shard_row0 = lo;
    ctx.shard_rows = rows;
  }
  attn_status st = attn_clf_forward(m, &ctx, o->ckpt_acts, acts, ids, lens, rows, L, NULL);
  if (!st)
    st = attn_cross_entropy_norm_f32(acts->logits, tg, rows, m->c.classes, -1, o->label_smoothing,
                                     B, loss, dlogits);
  if (!st) st = attn_loss_scaler_scale_f32(amp->scaler, dlogits, rows * m->c.classes);
  if (!st)
    st = attn_clf_backward_ready(m, acts, dlogits, o->dist ? dist_ready : NULL, o->dist);
  return st;
}

/* One optimizer step on a batch; *loss receives its loss. With o->dist the
 * batch's shards (this process's) each get their gradient, summed over all
 * shards in shard order (apps/train/dist.h) before the step. */
static attn_status train_step(attn_clf *m, attn_adam *opt, const attn_train_opts *o,
                              const attn_schedule *sched, attn_clf_acts *acts, int64_t step,
                              const int32_t *ids, const int32_t *lens, const int *labels,
                              int64_t B, int64_t L, float *dlogits, float *loss, amp_state *amp) {
  attn_nn_ctx ctx = {.backend = o->backend, .training = 1, .seed = o->seed, .step = (uint64_t)step,
                     .precision = o->precision, .qat = amp->qat};
  int32_t tg[4096];
  if (B > 4096) return attn_set_error(ATTN_EINVAL, "train: batch %lld > 4096", (long long)B);
  for (int64_t i = 0; i < B; i++) tg[i] = labels[i];
  attn_dist *d = o->dist;
  int S = attn_dist_shards(d), first = attn_dist_first_shard(d);
  attn_status st = d ? attn_dist_step_begin(d, m->p.grad, m->p.numel) : ATTN_OK;
  for (int k = 0; !st && k < attn_dist_local_shards(d); k++) {
    int64_t lo, hi;
    attn_dist_shard_rows(B, S, first + k, &lo, &hi);
    st = shard_grad(m, o, ctx, acts, ids + lo * L, lens + lo, tg + lo, lo, hi - lo, B, L,
                    dlogits, loss, amp);
    if (!st && d) st = attn_dist_shard_done(d, *loss);
  }
  if (!st && d) {
    double sum = 0;
    st = attn_dist_step_end(d, &sum);
    *loss = (float)sum;
  }
  if (st) return st;
  if (amp->scaler->enabled) {  // fp16: unscale, skip the step on inf/NaN, update the scale
    int found_inf = 0;
    st = attn_loss_scaler_unscale(amp->scaler, &m->p, &found_inf);
    if (!st) attn_loss_scaler_update(amp->scaler, found_inf);
    if (st || found_inf) return st;
  }
  double norm = 0;
  st = o->clip > 0 ? attn_clip_grad_norm(&m->p, o->clip, &norm) : attn_grads_check_finite(&m->p);
  if (st == ATTN_ENUMERIC) {  // skip this update, keep going
    fprintf(stderr, "attn train: step %lld skipped: %s\n", (long long)step, attn_last_error());
    return ATTN_OK;
  }
  if (!st) st = attn_adam_step(opt, &m->p, attn_schedule_lr(sched, opt->step));
  return st;
}

/* Data parallelism: what it cannot do, and a resumed run's shard count. */
static attn_status dist_check(const attn_train_opts *o, const attn_train_state *s) {
  int S = attn_dist_shards(o->dist);
  if (S > 1 && o->qat)
    return attn_set_error(ATTN_EUNSUPPORTED, "--qat with %d shards/processes: the QAT observers "
                          "would each see one shard's activations; train QAT in one process", S);
  if (S > o->batch)
    return attn_set_error(ATTN_EINVAL, "--batch %d over %d shards/processes: every one needs at "
                          "least one example of a full batch", o->batch, S);
  if (s->step > 0 && s->shards != S && attn_dist_rank(o->dist) == 0)
    fprintf(stderr, "attn train: the checkpoint was trained with %d shard%s (processes) per "
            "batch, this run has %d: the same batches and sample order, but the gradients add up "
            "in another order, so the numbers follow neither run to the bit (float rounding)\n",
            s->shards, s->shards > 1 ? "s" : "", S);
  return ATTN_OK;
}

attn_status attn_train_run(attn_clf *m, attn_adam *opt, const attn_train_opts *o,
                           const attn_tok_set *train, const attn_tok_set *val,
                           attn_train_state *s, const attn_st *meta, float *losses,
                           int64_t losses_cap) {
  if (!m || !opt || !o || !train || !s || train->n <= 0 || o->batch <= 0 || o->epochs <= 0)
    return attn_set_error(ATTN_EINVAL, "train: NULL argument, empty training set, batch or epochs <= 0");
  FILE *log = o->log ? o->log : stdout;
  int nb = (train->n + o->batch - 1) / o->batch;
  attn_schedule sched = {ATTN_SCHED_WARMUP_COSINE, o->lr, o->min_lr, 0, (int64_t)o->epochs * nb};
  sched.warmup_steps = (int64_t)(o->warmup_frac * (double)sched.total_steps);
  if (sched.min_lr > sched.base_lr) sched.min_lr = sched.base_lr;
  if (sched.warmup_steps >= sched.total_steps) sched.warmup_steps = sched.total_steps - 1;
  attn_status st = attn_schedule_check(&sched);
  if (st) return st;
  if (!(st = dist_check(o, s))) s->shards = attn_dist_shards(o->dist);
  if (st) return st;
  m->varlen = o->varlen;
  int64_t cap = (int64_t)o->batch * m->c.max_len;
  int32_t *ids = malloc((size_t)cap * sizeof(int32_t));
  int32_t *lens = malloc((size_t)o->batch * sizeof(int32_t));
  int *labels = malloc((size_t)o->batch * sizeof(int));
  float *dlogits = malloc((size_t)(o->batch * m->c.classes) * sizeof(float));
  attn_clf_acts acts;
  memset(&acts, 0, sizeof acts);
  amp_state amp = {&s->scaler, NULL};
  if (o->precision != ATTN_PREC_F16) {
    attn_loss_scaler_init(&s->scaler, 0);
  } else if (!s->scaler.enabled) {  // a fresh fp16 run (a resumed one goes on with its scaler)
    st = attn_loss_scaler_config(&s->scaler, o->loss_scale > 0 ? o->loss_scale : 65536.0f, 2.0f,
                                 0.5f, o->loss_scale_interval > 0 ? o->loss_scale_interval : 2000);
  } else {
    s->scaler.growth_interval = o->loss_scale_interval > 0 ? o->loss_scale_interval : 2000;
    if (s->scaler.growth_tracker >= s->scaler.growth_interval)
      s->scaler.growth_tracker = s->scaler.growth_interval - 1;
  }
  if (!st && o->qat) st = attn_qat_new(&amp.qat, 0);
  if (!st && amp.qat) st = attn_qat_set_activation(amp.qat, o->qat_act);
  if (!ids || !lens || !labels || !dlogits) st = attn_set_error(ATTN_ENOMEM, "train: out of memory");
  if (!st && o->ema > 0 && !s->ema.avg) {  // a fresh average (or one added on resume)
    if (s->step > 0)
      fprintf(stderr, "attn train: the weight average starts at step %lld (the checkpoint has "
              "none)\n", (long long)s->step);
    st = attn_ema_init(&s->ema, &m->p, o->ema);
  } else if (!st && o->ema > 0 && s->ema.decay != o->ema) {
    fprintf(stderr, "attn train: the weight average goes on with decay %g (checkpoint: %g)\n",
            o->ema, s->ema.decay);
    s->ema.decay = o->ema;
  }
  if (o->eta)  // from the run's first member trained in this process
    attn_train_eta_start(o->eta, o->eta->steps_before + s->step);
  attn_train_progress pg;
  attn_train_progress_init(&pg, o->progress);
  int stopped = 0, mem_told = 0;
  if (!st && o->eval_start && val && val->n > 0 && s->step == 0 && s->best_epoch == -1) {
    double vloss = 0, vacc = 0;  // the starting model (e.g. --init) competes for best
    st = validate(m, o, amp.qat, val, &vloss, &vacc);
    if (!st) {
      fprintf(log, "Start     | Val Loss: %.4f | Val Acc: %.2f%% | best\n", vloss, 100.0 * vacc);
      fflush(log);
      s->best = o->select_by_acc ? -vacc : vloss;
      s->best_epoch = ATTN_TRAIN_BEST_START;
      st = save_best(o, m, meta);
    }
  }
  int end_at = o->epochs;  // o->epoch_end may end the run earlier
  double val_tokens = 0;
  for (int i = 0; val && i < val->n; i++)
    val_tokens += val->lens[i];
  for (; !st && !stopped && s->epoch < end_at;) {
    attn_batch_plan plan;
    st = attn_batch_plan_make(train->lens, train->n, o->batch, o->chunk_batches, 1, o->seed,
                              s->epoch, &plan);
    if (st) break;
    attn_train_progress_epoch(&pg);
    double t0 = now_s(), t_ep = t0;
    double epoch_start = s->seconds; /* resumed mid-epoch: this process's part */
    for (; !st && s->batch < nb; ) {
      int64_t B, L;
      attn_batch_gather(train, &plan, s->batch, ids, lens, labels, &B, &L);
      float loss = 0;
      if (o->token_dropout > 0)
        st = attn_token_dropout(ids, lens, B, &L, o->token_dropout, o->seed, s->step);
      if (!st) st = train_step(m, opt, o, &sched, &acts, s->step, ids, lens, labels, B, L, dlogits, &loss,
                      &amp);
      if (!st && s->ema.avg) st = attn_ema_update(&s->ema, &m->p);
      if (st) break;
      if (!mem_told && pg.mode != 2) {
        char packed[64] = "";
        if (acts.cu) snprintf(packed, sizeof packed, ", packed: %lld real", (long long)acts.T);
        fprintf(stderr, "  activations held for backward: %.1f MB (batch %lld x %lld tokens%s%s)\n",
                (double)acts.saved_bytes / 1e6, (long long)B, (long long)L, packed,
                o->ckpt_acts ? ", checkpointing" : "");
        mem_told = 1;
      }
      if (losses && s->step < losses_cap) losses[s->step] = loss;
      s->loss_sum += loss;
      s->step++;
      s->batch++;
      for (int64_t i = 0; i < B; i++) pg.tokens += lens[i];
      pg.done++;
      progress_show(&pg, o, s->epoch, s->batch, nb, s->loss_sum / s->batch, s->step, 0);
      int stop = o->stop_after > 0 && s->step >= o->stop_after;
      if (stop || (o->save_every > 0 && s->step % o->save_every == 0)) {
        s->seconds += now_s() - t0;
        t0 = now_s();
        st = save_last(o, m, opt, s, meta);
      }
      if (stop) stopped = 1;
      if (stopped) break;
    }
    attn_batch_plan_free(&plan);
    if (st || stopped) break;
    if (pg.mode == 1) progress_show(&pg, o, s->epoch, s->batch, nb, s->loss_sum / nb, s->step, 1);
    double vloss = 0, vacc = 0, rloss = 0, racc = 0, t_val = now_s();
    attn_train_epoch_info info = {0, pg.tokens, t_val - t_ep, 0, 0};
    if (val && val->n > 0)
      st = validate_avg(m, o, amp.qat, &s->ema, val, &vloss, &vacc, &rloss, &racc);
    if (st) break;
    if (val && val->n > 0) info.val_tokens = val_tokens, info.val_seconds = now_s() - t_val;
    s->seconds += now_s() - t0;  // the epoch's training and validation
    double metric = o->select_by_acc ? -vacc : vloss;
    int best = val && val->n > 0 && (s->best_epoch == -1 || metric < s->best);
    char raw[96] = "";
    if (s->ema.avg && val && val->n > 0)
      snprintf(raw, sizeof raw, " | raw weights: %.4f, %.2f%%", rloss, 100.0 * racc);
    fprintf(log, "Epoch %d/%d | Train Loss: %.4f | Val Loss: %.4f | Val Acc: %.2f%% | %.0f s "
            "(total %.0f s)%s%s\n", s->epoch + 1, o->epochs, s->loss_sum / nb, vloss, 100.0 * vacc,
            s->seconds - epoch_start, s->seconds, raw, best ? " | best" : "");
    fflush(log);
    s->epoch++;
    s->batch = 0;
    s->loss_sum = 0;
    if (best) {
      s->best = metric;
      s->best_epoch = s->epoch - 1;
      st = save_best_avg(o, m, &s->ema, meta);
    }
    if (!st) st = save_last(o, m, opt, s, meta);
    if (!st && o->epoch_end) {
      info.epochs_done = s->epoch;
      int e = o->epoch_end(o->epoch_end_user, &info);
      end_at = e < o->epochs ? (e > s->epoch ? e : s->epoch) : o->epochs;
    }
  }
  if (s->scaler.enabled)
    fprintf(log, "fp16 loss scaling: %lld of %lld steps skipped (overflow), final scale %g\n",
            (long long)s->scaler.skipped, (long long)s->scaler.steps, (double)s->scaler.scale);
  attn_qat_free(amp.qat);
  attn_clf_acts_free(&acts);
  free(ids);
  free(lens);
  free(labels);
  free(dlogits);
  return st;
}
