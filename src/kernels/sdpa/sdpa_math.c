/* The reference ("math") SDPA, the one every fast path is tested against.
 *
 * Forward, per (batch b, query head h), with g = h / (Hq/Hkv) its K/V head:
 *   S [Lq, Lk] = scale * Q Kᵀ                      (attn_gemm_f32)
 *   P = softmax over the allowed keys of each row of S + add_mask
 *       (max-subtracted; exp and the row sum in double, P stored as f32)
 *   out [Lq, Dv] = P V                             (attn_gemm_f32)
 *   lse_i = m_i + log(sum_j exp(s_ij - m_i))       (-inf when no key allowed)
 * Backward, per (batch b, K/V head g), over its query heads in order (so the
 * sums into dk/dv never depend on the thread count):
 *   P = exp(S + add_mask - lse)   dv (+)= Pᵀ dout   dP = dout Vᵀ
 *   D_i = rowsum(dout * out)      dS = P * (dP - D_i)   (0 where P = 0)
 *   dq = scale * dS K             dk (+)= scale * dSᵀ Q
 * A row with no allowed key gets out 0, lse -inf and zero gradient; NaN in
 * q/k/v/masks/dout is not an error and propagates to the rows it touches.
 * Variants (sdpa_positions.h): ALiBi and T5 add a per-(h, i, j) bias to the
 * logit; Shaw adds scale * QR[i, r(i,j)] with QR = Q shaw_kᵀ [Lq, 2M-1] (one
 * GEMM, no Lq x Lk x D work) and out += PR shaw_v with PR[i, r] = sum of
 * P_ij over the keys j at table row r; the block-sparse layout disallows.
 * Their backward: d rel_bias[h, bucket] += dS_ij; DQR[i, r] = sum dS_ij,
 * dq += scale DQR shaw_k, d shaw_k += scale DQRᵀ Q; dP_ij += (dO shaw_vᵀ)[i, r],
 * d shaw_v += PRᵀ dO. Table gradients are summed per (b, K/V head) task into
 * its own partial buffer, then added in task order (thread-count independent).
 * Attention dropout (sdpa_dropout.h): the forward drops P (kept entries
 * scaled by 1/(1-p)) before P V, so probs are the dropped ones; the backward
 * takes dv from drop(P) (a copy), masks and scales dP before dS = P (dP - D_i)
 * with the undropped P.
 * Scratch: one [Lq, Lk] (forward) or two (backward; three with dropout) f32
 * buffers per thread, plus [Lq, 2M-1] ones with Shaw, allocated once per call. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/kernels.h"
#include "kernels/sdpa/sdpa_batched.h"
#include "kernels/sdpa/sdpa_dropout.h"
#include "kernels/sdpa/sdpa_internal.h"
#include "kernels/sdpa/sdpa_positions.h"
#include "kernels/sdpa/sdpa_stage.h"
#include "kernels/sdpa/sdpa_usermod.h"
#include "kernels/util.h"


/* GEMM leading dimension of a [rows, cols] view whose row stride is `stride`
 * (any value is fine for a single row; the GEMM wants >= cols). */
static int64_t ld_of(int64_t stride, int64_t rows, int64_t cols) {
  return rows > 1 ? stride : cols;
}

/* x [rows, cols] with row stride ld := 0 */
static void zero_rows(float *x, int64_t rows, int64_t ld, int64_t cols) {
  for (int64_t i = 0; i < rows; i++)
    memset(x + i * ld, 0, (size_t)cols * sizeof(float));
}

/* Threads for `tasks` independent tasks of `macs` multiply-adds in all (at
 * least ~1M per thread: small calls run on one, results never depend on it),
 * and their scratch of `per` floats each. */
static attn_status scratch_alloc(int64_t tasks, double macs, int64_t per, int *nt, float **buf) {
  int n = attn_kernel_threads(macs, tasks);
  *nt = n;
  *buf = NULL;
  size_t bytes;
  if (__builtin_mul_overflow((size_t)n, (size_t)per, &bytes) ||
      __builtin_mul_overflow(bytes, sizeof(float), &bytes))
    return attn_set_error(ATTN_ENOMEM, "sdpa: scratch of %d x %lld floats is too large", n,
                          (long long)per);
  if (bytes == 0) return ATTN_OK;
  *buf = malloc(bytes);
  if (!*buf)
    return attn_set_error(ATTN_ENOMEM, "sdpa: cannot allocate %zu bytes of scratch", bytes);
  return ATTN_OK;
}

/* Row i of (b, h): s [Lk] := its logits from scale*q·k: -inf where not
 * allowed (key range, bool mask, additive -inf, block layout), plus the
 * additive mask and the position terms (qr = scale * q_i·shaw_kᵀ or NULL);
 * user mods first (sdpa_usermod.h; raw: NULL or the scores before them). */
static void logits_row(const attn_sdpa_desc *d, int64_t b, int64_t h, int64_t i, float *s,
                       const float *qr, float *raw) {
  int64_t lo, hi;
  attn_sdpa_key_range(d, b, i, &lo, &hi);
  if (d->mods && hi > lo)
    attn_usermod_tile(d, b, h, i, 1, lo, hi - lo, s + lo, 0, raw ? raw + lo : NULL, 0);
  for (int64_t j = 0; j < d->Lk; j++)
    s[j] = j >= lo && j < hi && attn_sdpa_bool_allows(d, b, h, i, j)
               ? s[j] + attn_sdpa_add_mask_at(d, b, h, i, j)
               : -INFINITY;
  if (attn_sdpa_has_positions(d)) attn_pos_tile_logits(d, h, i, 1, 0, d->Lk, s, d->Lk, qr, 0);
}

/* Row i of (b, h): s [Lk] holds scale*q·k on entry, the probabilities on
 * exit (0 for keys not allowed); extra: the row units' logit joining the
 * denominator (attn_stage_row_logit, once per head; -inf: none). Returns the
 * log-sum-exp, -inf (and an all zero row) when no key is allowed. */
static float softmax_row(const attn_sdpa_desc *d, int64_t b, int64_t h, int64_t i, float *s,
                         const float *qr, float extra) {
  int64_t allowed = 0;
  logits_row(d, b, h, i, s, qr, NULL);
  float m = -INFINITY;
  for (int64_t j = 0; j < d->Lk; j++)
    if (s[j] != -INFINITY) {
      allowed++;
      if (s[j] > m) m = s[j]; /* NaN never wins here but still poisons the sum */
    }
  if (allowed == 0) {
    if (d->Lk > 0) memset(s, 0, (size_t)d->Lk * sizeof(float)); /* s is NULL when Lk = 0 */
    return -INFINITY; /* the caller sets lse = the row units' logit, if any */
  }
  if (extra > m) m = extra;
  double sum = exp((double)extra - m);
  for (int64_t j = 0; j < d->Lk; j++)
    if (s[j] != -INFINITY) sum += exp((double)s[j] - m);
  for (int64_t j = 0; j < d->Lk; j++)
    s[j] = s[j] == -INFINITY ? 0.0f : (float)(exp((double)s[j] - m) / sum);
  return (float)((double)m + log(sum));
}

/* Row i of (b, h) in the backward: s [Lk] holds scale*q·k on entry and
 * P = exp(logit - lse) on exit (0 for keys not allowed). */
static void probs_row(const attn_sdpa_desc *d, int64_t b, int64_t h, int64_t i, float lse, float *s,
                      const float *qr, float *raw) {
  if (lse == -INFINITY) {
    if (d->Lk > 0) memset(s, 0, (size_t)d->Lk * sizeof(float)); /* s is NULL when Lk = 0 */
    return;
  }
  logits_row(d, b, h, i, s, qr, raw);
  for (int64_t j = 0; j < d->Lk; j++)
    s[j] = s[j] == -INFINITY ? 0.0f : (float)exp((double)s[j] - lse);
}

/* xr [Lq, R] := sum over j of x [Lq, Lk] at Shaw row r(i, j) */
static void shaw_scatter(const attn_sdpa_desc *d, const float *x, int64_t Lq, int64_t R,
                         float *xr) {
  memset(xr, 0, (size_t)(Lq * R) * sizeof(float));
  attn_pos_shaw_scatter(d, 0, Lq, 0, d->Lk, x, d->Lk, xr, R);
}

static attn_status forward_piece(const attn_sdpa_desc *d, const attn_sdpa_io *x, void *user) {
  return attn_sdpa_forward_math(d, x->q, x->k, x->v, x->out, x->lse, x->probs);
}

static attn_status backward_piece(const attn_sdpa_desc *d, const attn_sdpa_io *x, void *user) {
  return attn_sdpa_backward_math(d, x->q, x->k, x->v, x->out_in, x->lse_in, x->dout, x->dq, x->dk,
                                 x->dv);
}

attn_status attn_sdpa_forward_math(const attn_sdpa_desc *d, const float *q, const float *k,
                                   const float *v, float *out, float *lse, float *probs) {
  attn_sdpa_resolved r;
  attn_status st = attn_sdpa_validate(d, q, k, v, &r);
  if (st) return st;
  if (attn_sdpa_batched_needed(d)) { /* per-batch alignment or slopes with positions */
    const attn_sdpa_io io = {.q = q, .k = k, .v = v, .out = out, .lse = lse, .probs = probs};
    return attn_sdpa_run_batched(d, 0, &io, forward_piece, NULL);
  }
  const int64_t B = d->B, Hq = d->Hq, Lq = d->Lq, Lk = d->Lk, D = d->D, Dv = d->Dv;
  if (Lq == 0) return ATTN_OK;
  if (!out || !lse) return attn_set_error(ATTN_EINVAL, "sdpa: %s is NULL", !out ? "out" : "lse");
  const int64_t nsc = Lq * Lk, tasks = B * Hq; /* tasks: (b, h) pairs */
  const int64_t R = attn_pos_shaw_rows(d), nr = Lq * R;
  int64_t nprobs;
  if (probs && __builtin_mul_overflow(tasks, nsc, &nprobs))
    return attn_set_error(ATTN_EINVAL, "sdpa: probs [B,Hq,Lq,Lk] is too large");
  int nt;
  float *scratch;
  const int64_t per = (probs ? 0 : nsc) + 2 * nr; /* S, QR, PR */
  const double macs = (double)tasks * (double)nsc * (double)(D + Dv + R);
  if ((st = scratch_alloc(tasks, macs, per, &nt, &scratch))) return st;

  const int64_t ldq = ld_of(r.q[2], Lq, D), ldk = ld_of(r.k[2], Lk, D);
  const int64_t ldv = ld_of(r.v[2], Lk, Dv), ldo = ld_of(r.o[2], Lq, Dv);
  const int staged = attn_stage_has_tile(d); /* the score-modifier stage's tile units */
  int bad = ATTN_OK; /* worst GEMM status; the GEMMs only fail on bad arguments */
#pragma omp parallel for num_threads(nt) schedule(static) reduction(max : bad)
  for (int64_t t = 0; t < tasks; t++) {
    const int64_t b = t / Hq, h = t % Hq, g = h / r.group;
    const float *Q = q + b * r.q[0] + h * r.q[1]; /* [Lq, D] */
    const float *K = k + b * r.k[0] + g * r.k[1]; /* [Lk, D] */
    const float *V = v + b * r.v[0] + g * r.v[1]; /* [Lk, Dv] */
    float *O = out + b * r.o[0] + h * r.o[1];     /* [Lq, Dv] */
    float *L = lse + t * Lq;                      /* [Lq] */
    float *mine = scratch ? scratch + (int64_t)attn_thread_id() * per : NULL;
    float *S = probs ? probs + t * nsc : mine;          /* [Lq, Lk] */
    float *QR = mine ? mine + (probs ? 0 : nsc) : NULL; /* [Lq, R] */
    float *PR = QR ? QR + nr : NULL;                    /* [Lq, R] */
    const float extra = attn_stage_row_logit(d, h);     /* the row units' (sinks'); -inf: none */
    int s[4] = {0};
    if (Lk > 0) s[0] = attn_gemm_f32(0, 1, Lq, Lk, D, r.scale, Q, ldq, K, ldk, 0.0f, S, Lk);
    if (Lk > 0 && staged) attn_stage_row_exact(d, h, S, nsc, NULL);
    if (Lk > 0 && d->shaw_k)
      s[1] = attn_gemm_f32(0, 1, Lq, R, D, r.scale, Q, ldq, d->shaw_k, D, 0.0f, QR, R);
    for (int64_t i = 0; i < Lq; i++)
      L[i] =
          softmax_row(d, b, h, i, Lk > 0 ? S + i * Lk : NULL, d->shaw_k ? QR + i * R : NULL, extra);
    if (Lk > 0 && d->dropout_p != 0.0f) attn_sdpa_dropout_tile(d, b, h, 0, Lq, 0, Lk, S, Lk);
    if (Lk > 0) s[2] = attn_gemm_f32(0, 0, Lq, Dv, Lk, 1.0f, S, Lk, V, ldv, 0.0f, O, ldo);
    if (Lk > 0 && d->shaw_v) {
      shaw_scatter(d, S, Lq, R, PR);
      s[3] = attn_gemm_f32(0, 0, Lq, Dv, R, 1.0f, PR, R, d->shaw_v, Dv, 1.0f, O, ldo);
    }
    for (int64_t i = 0; i < Lq; i++) /* exact zeros even if V holds inf/NaN */
      if (L[i] == -INFINITY) {
        memset(O + i * r.o[2], 0, (size_t)Dv * sizeof(float));
        L[i] = extra; /* no allowed key: lse = the row units' logit (or -inf) */
      }
    for (int x = 0; x < 4; x++)
      if (s[x] > bad) bad = s[x];
  }
  free(scratch);
  if (bad) return attn_set_error((attn_status)bad, "sdpa: math forward: GEMM failed");
  return ATTN_OK;
}

/* Per (b, K/V head) task partial sums of the table gradients. */
typedef struct {
  int64_t nt5, nsk, nsv, nal, per; /* floats of each part, and per task */
  float *buf;                 /* [tasks, per] */
} table_grads;

static attn_status table_grads_alloc(const attn_sdpa_desc *d, int64_t tasks, table_grads *g) {
  const int64_t R = attn_pos_shaw_rows(d);
  memset(g, 0, sizeof *g);
  g->nt5 = d->rel_bias && d->rel_bias_grad ? d->Hq * d->rel_buckets : 0;
  g->nsk = d->shaw_k && d->shaw_k_grad ? R * d->D : 0;
  g->nsv = d->shaw_v && d->shaw_v_grad ? R * d->Dv : 0;
  g->nal = d->alibi_slopes && d->alibi_slopes_grad ? d->Hq : 0;
  g->per = g->nt5 + g->nsk + g->nsv + g->nal;
  if (g->per == 0) return ATTN_OK;
  size_t n;
  if (__builtin_mul_overflow((size_t)tasks, (size_t)g->per, &n) ||
      !(g->buf = calloc(n ? n : 1, sizeof(float))))
    return attn_set_error(ATTN_ENOMEM, "sdpa backward: cannot allocate table gradients");
  return ATTN_OK;
}

/* Overwrites the requested table gradients with the task partials summed in
 * task order. */
static void table_grads_finish(const attn_sdpa_desc *d, int64_t tasks, table_grads *g) {
  float *dst[4] = {g->nt5 ? d->rel_bias_grad : NULL, g->nsk ? d->shaw_k_grad : NULL,
                   g->nsv ? d->shaw_v_grad : NULL, g->nal ? d->alibi_slopes_grad : NULL};
  const int64_t n[4] = {g->nt5, g->nsk, g->nsv, g->nal};
  for (int part = 0, off = 0; part < 4; off += (int)n[part], part++) {
    if (!dst[part]) continue;
    for (int64_t e = 0; e < n[part]; e++) {
      double acc = 0.0;
      for (int64_t t = 0; t < tasks; t++)
        acc += g->buf[t * g->per + off + e];
      dst[part][e] = (float)acc;
    }
  }
  free(g->buf);
  g->buf = NULL;
}

/* Table gradients of a call that computes nothing (Lq or Lk = 0): zeros. */
static void table_grads_zero(const attn_sdpa_desc *d) {
  const int64_t R = attn_pos_shaw_rows(d);
  if (d->rel_bias && d->rel_bias_grad)
    memset(d->rel_bias_grad, 0, (size_t)(d->Hq * d->rel_buckets) * sizeof(float));
  if (d->shaw_k && d->shaw_k_grad) memset(d->shaw_k_grad, 0, (size_t)(R * d->D) * sizeof(float));
  if (d->shaw_v && d->shaw_v_grad) memset(d->shaw_v_grad, 0, (size_t)(R * d->Dv) * sizeof(float));
  attn_pos_alibi_grad_zero(d);
}

attn_status attn_sdpa_backward_math(const attn_sdpa_desc *d, const float *q, const float *k,
                                    const float *v, const float *out, const float *lse,
                                    const float *dout, float *dq, float *dk, float *dv) {
  attn_sdpa_resolved r;
  attn_status st = attn_sdpa_validate(d, q, k, v, &r);
  if (st) return st;
  const int64_t B = d->B, Hq = d->Hq, Hkv = d->Hkv, Lq = d->Lq, Lk = d->Lk, D = d->D, Dv = d->Dv;
  if ((st = attn_sdpa_check_backward_ptrs(d, "sdpa backward", out, lse, dout, dq, dk, dv))) return st;
  if (attn_sdpa_batched_needed(d)) {
    const attn_sdpa_io io = {.q = q, .k = k, .v = v, .out_in = out, .lse_in = lse, .dout = dout,
                             .dq = dq, .dk = dk, .dv = dv};
    return attn_sdpa_run_batched(d, 1, &io, backward_piece, NULL);
  }
  const int64_t nsc = Lq * Lk, tasks = B * Hkv; /* tasks: (b, g) pairs */
  const int64_t R = attn_pos_shaw_rows(d), nr = Lq * R;
  int nt;
  float *scratch;
  const int64_t nraw = attn_usermod_has_grad(d) ? nsc : 0;
  const int64_t ncap = attn_stage_has_tile(d) ? nsc : 0;
  const int64_t ndrop = d->dropout_p != 0.0f ? nsc : 0;
  const int64_t per = 2 * nsc + 2 * nr + nraw + ncap + ndrop; /* P, dS, XR, PR, RAW, GC, PD */
  const double macs = 2.0 * (double)B * Hq * (double)nsc * (double)(D + Dv + R);
  if ((st = scratch_alloc(tasks, macs, per, &nt, &scratch))) return st;
  table_grads tg;
  if ((st = table_grads_alloc(d, tasks, &tg))) {
    free(scratch);
    return st;
  }

  const int64_t ldq = ld_of(r.q[2], Lq, D), ldk = ld_of(r.k[2], Lk, D);
  const int64_t ldv = ld_of(r.v[2], Lk, Dv), ldo = ld_of(r.o[2], Lq, Dv);
  int bad = ATTN_OK;
#pragma omp parallel for num_threads(nt) schedule(static) reduction(max : bad)
  for (int64_t t = 0; t < tasks; t++) {
    const int64_t b = t / Hkv, g = t % Hkv;
    const float *K = k + b * r.k[0] + g * r.k[1]; /* [Lk, D] */
    const float *V = v + b * r.v[0] + g * r.v[1]; /* [Lk, Dv] */
    float *dK = dk ? dk + b * r.k[0] + g * r.k[1] : NULL;
    float *dV = dv ? dv + b * r.v[0] + g * r.v[1] : NULL;
    /* no scratch (NULL) when Lq or Lk is 0 */
    float *P = scratch ? scratch + (int64_t)attn_thread_id() * per : NULL; /* [Lq, Lk] */
    float *dS = P ? P + nsc : NULL;  /* [Lq, Lk]: dP, then dS */
    float *XR = dS ? dS + nsc : NULL; /* [Lq, R]: QR, then DOR, then DQR */
    float *PR = XR ? XR + nr : NULL;  /* [Lq, R] */
    float *RAW = nraw && PR ? PR + nr : NULL; /* [Lq, Lk]: scores before score_mod */
    float *GC = ncap && PR ? PR + nr + nraw : NULL;         /* [Lq, Lk]: the stage's derivative */
    float *PD = ndrop && PR ? PR + nr + nraw + ncap : NULL; /* [Lq, Lk]: drop(P) */
    float *gt5 = tg.nt5 ? tg.buf + t * tg.per : NULL;          /* [Hq, buckets] */
    float *gsk = tg.nsk ? tg.buf + t * tg.per + tg.nt5 : NULL; /* [R, D] */
    float *gsv = tg.nsv ? tg.buf + t * tg.per + tg.nt5 + tg.nsk : NULL; /* [R, Dv] */
    float *gal = tg.nal ? tg.buf + t * tg.per + tg.nt5 + tg.nsk + tg.nsv : NULL; /* [Hq] */
    if (Lq == 0) { /* no query reads this head: its gradients are 0 */
      zero_rows(dK, Lk, r.k[2], D);
      zero_rows(dV, Lk, r.v[2], Dv);
    }
    for (int64_t hh = 0; hh < r.group && Lq > 0; hh++) {
      const int64_t h = g * r.group + hh;
      const float *Q = q + b * r.q[0] + h * r.q[1];     /* [Lq, D] */
      const float *O = out + b * r.o[0] + h * r.o[1];   /* [Lq, Dv] */
      const float *dO = dout + b * r.o[0] + h * r.o[1]; /* [Lq, Dv] */
      const float *L = lse + (b * Hq + h) * Lq;         /* [Lq] */
      float *dQ = dq + b * r.q[0] + h * r.q[1];         /* [Lq, D] */
      const float beta = hh == 0 ? 0.0f : 1.0f;         /* first head overwrites dk, dv */
      if (Lk == 0) {
        zero_rows(dQ, Lq, r.q[2], D);
        continue;
      }
      int s[10] = {0};
      s[0] = attn_gemm_f32(0, 1, Lq, Lk, D, r.scale, Q, ldq, K, ldk, 0.0f, P, Lk);
      if (GC) attn_stage_row_exact(d, h, P, nsc, GC);
      if (d->shaw_k)
        s[5] = attn_gemm_f32(0, 1, Lq, R, D, r.scale, Q, ldq, d->shaw_k, D, 0.0f, XR, R);
      for (int64_t i = 0; i < Lq; i++)
        probs_row(d, b, h, i, L[i], P + i * Lk, d->shaw_k ? XR + i * R : NULL,
                  RAW ? RAW + i * Lk : NULL);
      if (PD) { /* dv from drop(P); dP of drop(P) masked and scaled below */
        memcpy(PD, P, (size_t)nsc * sizeof(float));
        attn_sdpa_dropout_tile(d, b, h, 0, Lq, 0, Lk, PD, Lk);
      }
      s[1] = attn_gemm_f32(1, 0, Lk, Dv, Lq, 1.0f, PD ? PD : P, Lk, dO, ldo, beta, dV, ldv);
      s[2] = attn_gemm_f32(0, 1, Lq, Lk, Dv, 1.0f, dO, ldo, V, ldv, 0.0f, dS, Lk);
      if (PD) attn_sdpa_dropout_tile(d, b, h, 0, Lq, 0, Lk, dS, Lk);
      if (d->shaw_v) { /* dP_ij += dO_i · shaw_v[r(i,j)]; d shaw_v += PRᵀ dO */
        s[6] = attn_gemm_f32(0, 1, Lq, R, Dv, 1.0f, dO, ldo, d->shaw_v, Dv, 0.0f, XR, R);
        attn_pos_shaw_gather(d, 0, Lq, 0, Lk, XR, R, dS, Lk);
        if (gsv) {
          shaw_scatter(d, P, Lq, R, PR);
          s[7] = attn_gemm_f32(1, 0, R, Dv, Lq, 1.0f, PR, R, dO, ldo, 1.0f, gsv, Dv);
        }
      }
      for (int64_t i = 0; i < Lq; i++) {
        const float *oi = O + i * r.o[2], *doi = dO + i * r.o[2];
        double Di = 0.0; /* rowsum(dout * out) */
        for (int64_t c = 0; c < Dv; c++)
          Di += (double)doi[c] * oi[c];
        float *pi = P + i * Lk, *si = dS + i * Lk;
        for (int64_t j = 0; j < Lk; j++)
          si[j] = pi[j] == 0.0f ? 0.0f : (float)(pi[j] * ((double)si[j] - Di));
      }
      if (gt5) attn_pos_t5_grad(d, 0, Lq, 0, Lk, dS, Lk, gt5 + h * d->rel_buckets);
      if (gal) gal[h] += (float)attn_pos_alibi_grad(d, 0, Lq, 0, Lk, dS, Lk);
      if (RAW) attn_usermod_tile_grad(d, b, h, 0, Lq, 0, Lk, RAW, Lk, dS, Lk);
      if (GC) attn_stage_grad_tile(1, nsc, dS, nsc, GC, nsc);
      s[3] = attn_gemm_f32(0, 0, Lq, D, Lk, r.scale, dS, Lk, K, ldk, 0.0f, dQ, ldq);
      s[4] = attn_gemm_f32(1, 0, Lk, D, Lq, r.scale, dS, Lk, Q, ldq, beta, dK, ldk);
      if (d->shaw_k) { /* DQR = dS gathered by table row */
        shaw_scatter(d, dS, Lq, R, XR);
        s[8] = attn_gemm_f32(0, 0, Lq, D, R, r.scale, XR, R, d->shaw_k, D, 1.0f, dQ, ldq);
        if (gsk) s[9] = attn_gemm_f32(1, 0, R, D, Lq, r.scale, XR, R, Q, ldq, 1.0f, gsk, D);
      }
      for (int x = 0; x < 10; x++)
        if (s[x] > bad) bad = s[x];
    }
  }
  free(scratch);
  if (tg.per == 0 || Lq == 0 || Lk == 0) {
    free(tg.buf);
    table_grads_zero(d);
  } else {
    table_grads_finish(d, tasks, &tg);
  }
  attn_stage_backward(d, &r, out, lse, dout);
  if (bad) return attn_set_error((attn_status)bad, "sdpa: math backward: GEMM failed");
  return ATTN_OK;
}
