/* A decode problem for the decode tests (test_decode.c, test_decode_cache.c):
 * a cache (attn_kvc) of a dtype and layout filled from seeded f32 rows in a
 * few appends per sequence, the queries, and the reference: attn_sdpa_forward
 * on the math path over the cache widened to f32 (attn_kvc_read) or over
 * the f32 rows before rounding, with key_lens = seq_lens, q_offsets[b] =
 * seq_lens[b] - Lq and the same modifiers. */
#ifndef ATTN_TEST_DECODE_CASE_H
#define ATTN_TEST_DECODE_CASE_H

#include <stdint.h>

#include "harness.h"

enum { DC_MAXB = 6 };

typedef struct {
  int dtype;
  int B, Hq, Hkv, Lq, D, Dv;
  int lens[DC_MAXB];
  int page_size; /* 0: contiguous */
  int causal;    /* 1 = causal (the default of attn_decode_desc_init) */
  int window;    /* -1: none */
  int alibi, sinks;
  float softcap;
  unsigned seed;
  int layout; /* attn_kvc_config.layout: 0 (the library's choice), ATTN_KV_ROWS, ATTN_KV_I8_TILED */
} dcase;

static inline dcase dcase_plain(int dtype, int Hq, int Hkv, int Lq, int D, int len) {
  dcase c = {.dtype = dtype,
             .B = 1,
             .Hq = Hq,
             .Hkv = Hkv,
             .Lq = Lq,
             .D = D,
             .Dv = D,
             .causal = 1,
             .window = -1,
             .seed = 1};
  c.lens[0] = len;
  return c;
}

typedef struct {
  dcase c;
  attn_kvc *kvc;
  attn_decode_desc d;
  int64_t Lk;            /* the longest sequence */
  float *k32, *v32;      /* the f32 rows appended [B, Hkv, Lk, D|Dv] */
  float *kw, *vw;        /* the cache widened back to f32, same layout */
  float *q, *out, *lse;  /* [B, Hq, Lq, D], [B, Hq, Lq, Dv], [B, Hq, Lq] */
  float *slopes, *sinks; /* [Hq] */
  int32_t kl[DC_MAXB];
  int64_t qo[DC_MAXB];
} dprob;

static inline int64_t dc_nout(const dprob *p) {
  return (int64_t)p->c.B * p->c.Hq * p->c.Lq * p->c.Dv;
}
static inline int64_t dc_nlse(const dprob *p) { return (int64_t)p->c.B * p->c.Hq * p->c.Lq; }

/* The cache and the queries; 0 on success. */
static inline int dprob_make(dprob *p, const dcase *c) {
  memset(p, 0, sizeof *p);
  p->c = *c;
  int64_t Lk = 1;
  for (int b = 0; b < c->B; b++)
    if (c->lens[b] > Lk) Lk = c->lens[b];
  p->Lk = Lk;
  attn_kvc_config cfg = {.dtype = c->dtype,
                         .B = c->B,
                         .Hkv = c->Hkv,
                         .D = c->D,
                         .Dv = c->Dv,
                         .max_len = Lk + 3,
                         .page_size = c->page_size,
                         .layout = c->layout};
  if (attn_kvc_create(&p->kvc, &cfg) != ATTN_OK) return 1;
  const int64_t nk = (int64_t)c->B * c->Hkv * Lk * c->D, nv = (int64_t)c->B * c->Hkv * Lk * c->Dv;
  p->k32 = calloc((size_t)nk, 4), p->v32 = calloc((size_t)nv, 4);
  p->kw = calloc((size_t)nk, 4), p->vw = calloc((size_t)nv, 4);
  p->q = malloc((size_t)c->B * c->Hq * c->Lq * c->D * 4);
  p->out = malloc((size_t)dc_nout(p) * 4), p->lse = malloc((size_t)dc_nlse(p) * 4);
  p->slopes = malloc((size_t)c->Hq * 4), p->sinks = malloc((size_t)c->Hq * 4);
  fill_uniform(p->k32, (long)nk, c->seed * 7 + 1, -1.0f, 1.0f);
  fill_uniform(p->v32, (long)nv, c->seed * 7 + 2, -1.0f, 1.0f);
  fill_uniform(p->q, (long)c->B * c->Hq * c->Lq * c->D, c->seed * 7 + 3, -1.5f, 1.5f);
  fill_uniform(p->slopes, c->Hq, c->seed * 7 + 4, 0.01f, 0.3f);
  fill_uniform(p->sinks, c->Hq, c->seed * 7 + 5, -1.0f, 2.0f);
  /* each sequence in pieces of 1, then up to 5, then the rest (ragged appends) */
  for (int b = 0; b < c->B; b++) {
    for (int t0 = 0, piece = 1; t0 < c->lens[b]; piece = piece < 5 ? piece + 4 : c->lens[b]) {
      const int n = c->lens[b] - t0 < piece ? c->lens[b] - t0 : piece;
      float *kn = malloc((size_t)c->Hkv * n * c->D * 4),
            *vn = malloc((size_t)c->Hkv * n * c->Dv * 4);
      for (int g = 0; g < c->Hkv; g++)
        for (int t = 0; t < n; t++) {
          memcpy(kn + ((int64_t)g * n + t) * c->D,
                 p->k32 + (((int64_t)b * c->Hkv + g) * Lk + t0 + t) * c->D, (size_t)c->D * 4);
          memcpy(vn + ((int64_t)g * n + t) * c->Dv,
                 p->v32 + (((int64_t)b * c->Hkv + g) * Lk + t0 + t) * c->Dv, (size_t)c->Dv * 4);
        }
      attn_status s = attn_kvc_append(p->kvc, b, kn, vn, n);
      free(kn), free(vn);
      if (s) return 1;
      t0 += n;
    }
    for (int g = 0; g < c->Hkv; g++)
      for (int t = 0; t < c->lens[b]; t++) {
        const int64_t row = ((int64_t)b * c->Hkv + g) * Lk + t;
        if (attn_kvc_read(p->kvc, b, g, t, p->kw + row * c->D, p->vw + row * c->Dv)) return 1;
      }
    p->kl[b] = c->lens[b];
    p->qo[b] = c->lens[b] - c->Lq;
  }
  attn_decode_desc_init(&p->d, c->B, c->Hq, c->Hkv, c->Lq, c->D, c->Dv, c->dtype);
  p->d.causal = c->causal;
  p->d.window_left = c->window;
  p->d.softcap = c->softcap;
  if (c->alibi) p->d.alibi_slopes = p->slopes;
  if (c->sinks) p->d.sinks = p->sinks;
  return 0;
}

static inline attn_status dprob_decode(dprob *p) {
  attn_kv_view v;
  attn_status s = attn_kvc_view(p->kvc, &v);
  return s ? s : attn_decode_forward(&p->d, &v, p->q, p->out, p->lse);
}

/* The math path over q, k, v ([B, Hkv, Lk, D|Dv] f32) into out, lse. */
static inline attn_status dprob_reference_q(const dprob *p, const float *q, const float *k,
                                            const float *v, float *out, float *lse) {
  const dcase *c = &p->c;
  attn_sdpa_desc d;
  attn_sdpa_desc_init(&d, c->B, c->Hq, c->Hkv, c->Lq, p->Lk, c->D, c->Dv);
  d.causal = c->causal;
  d.window_left = c->window;
  d.key_lens = p->kl;
  d.q_offsets = p->qo;
  d.softcap = c->softcap;
  if (c->alibi) d.alibi_slopes = p->slopes;
  if (c->sinks) d.sinks = p->sinks;
  attn_sdpa_args a = {
      .dtype = ATTN_F32, .path = ATTN_PATH_MATH, .q = q, .k = k, .v = v, .out = out, .lse = lse};
  return attn_sdpa_forward(&d, &a);
}

static inline attn_status dprob_reference(const dprob *p, const float *k, const float *v,
                                          float *out, float *lse) {
  return dprob_reference_q(p, p->q, k, v, out, lse);
}

/* The queries as a level with an int8 dot product sees them (decode.c's
 * quantize_rows: each row times the scale, quantised symmetric per row to
 * int8, rounded to nearest even), widened back and divided by the scale. */
static inline void dprob_quantized_q(const dprob *p, float *qq) {
  const dcase *c = &p->c;
  const float scale = p->d.has_scale ? p->d.scale : 1.0f / sqrtf((float)c->D);
  const int64_t rows = (int64_t)c->B * c->Hq * c->Lq;
  for (int64_t r = 0; r < rows; r++) {
    const float *x = p->q + r * c->D;
    float amax = 0.0f;
    for (int e = 0; e < c->D; e++)
      amax = fabsf(x[e] * scale) > amax ? fabsf(x[e] * scale) : amax;
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f, sc = amax / 127.0f;
    for (int e = 0; e < c->D; e++) {
      float v = nearbyintf(x[e] * scale * inv);
      v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
      qq[r * c->D + e] = v * sc / scale;
    }
  }
}

static inline void dprob_free(dprob *p) {
  attn_kvc_free(p->kvc);
  free(p->k32), free(p->v32), free(p->kw), free(p->vw);
  free(p->q), free(p->out), free(p->lse), free(p->slopes), free(p->sinks);
  memset(p, 0, sizeof *p);
}

/* max |got - want| <= tol * max |want| (norm-relative: the rounding of a
 * cache's values moves every output by about its relative precision
 * times the output's scale) */
static inline void check_normrel_at(const char *file, int line, const float *got, const float *want,
                                    int64_t n, double tol) {
  double e = 0, mx = 0;
  for (int64_t i = 0; i < n; i++) {
    if (isfinite(want[i]) && fabs(want[i]) > mx) mx = fabs(want[i]);
    if (isfinite(want[i]) && fabs((double)got[i] - want[i]) > e) e = fabs((double)got[i] - want[i]);
    if (!isfinite(want[i]) && !(got[i] == want[i] || (isnan(got[i]) && isnan(want[i]))))
      e = INFINITY;
  }
  if (!(e <= tol * mx)) {
    printf("  %s:%d: max error %.3g > %.3g x max |ref| %.3g\n", file, line, e, tol, mx);
    h_case_failed = 1;
  }
}
#define CHECK_NORMREL(got, want, n, tol) check_normrel_at(__FILE__, __LINE__, got, want, n, tol)

#endif
