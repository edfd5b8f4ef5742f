/* The user callbacks `attn bench sdpa --mod` times (bench_sdpa_mods.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "apps/tools/bench_sdpa_mods.h"

static const char *const names[] = {"none",   "causal",  "causal-noblock", "window",
                                    "alibi",  "softcap", "alibi-row",      "softcap-row",
                                    "identity", "softcap-fast"};
enum { NKINDS = sizeof names / sizeof names[0] };

int attn_bench_mod_parse(const char *name) {
  for (int k = 1; k < NKINDS; k++)
    if (!strcmp(name, names[k])) return k;
  return -1;
}

const char *attn_bench_mod_name(int kind) {
  return kind >= 0 && kind < NKINDS ? names[kind] : "?";
}

static int causal_mask(int64_t b, int64_t h, int64_t q, int64_t kv, void *u) {
  (void)b, (void)h, (void)u;
  return kv <= q;
}

static int window_mask(int64_t b, int64_t h, int64_t q, int64_t kv, void *u) {
  const attn_bench_mod *m = u;
  (void)b, (void)h;
  return (m->wl < 0 || kv >= q - m->wl) && (m->wr < 0 || kv <= q + m->wr);
}

static float alibi_score(float s, int64_t b, int64_t h, int64_t q, int64_t kv, void *u) {
  (void)b;
  return s - ((const attn_bench_mod *)u)->slopes[h] * (float)(q > kv ? q - kv : kv - q);
}

static float one(float s, int64_t b, int64_t h, int64_t q, int64_t kv, void *u) {
  (void)s, (void)b, (void)h, (void)q, (void)kv, (void)u;
  return 1.0f;
}

static float identity(float s, int64_t b, int64_t h, int64_t q, int64_t kv, void *u) {
  (void)b, (void)h, (void)q, (void)kv, (void)u;
  return s;
}

static float softcap(float s, int64_t b, int64_t h, int64_t q, int64_t kv, void *u) {
  (void)b, (void)h, (void)q, (void)kv;
  const float cap = ((const attn_bench_mod *)u)->cap;
  return cap * tanhf(s / cap);
}

static float softcap_grad(float s, int64_t b, int64_t h, int64_t q, int64_t kv, void *u) {
  (void)b, (void)h, (void)q, (void)kv;
  const float t = tanhf(s / ((const attn_bench_mod *)u)->cap);
  return 1.0f - t * t;
}

/* The row variants (attn/sdpa_mods.h "Row variants"): plain loops over the
 * row that the compiler vectorises (#pragma omp simd: with -fopenmp or
 * -fopenmp-simd, at any -O level and cost model). */
static void alibi_row(float *s, int64_t n, int64_t b, int64_t h, int64_t q, int64_t kv0, void *u) {
  (void)b;
  const float slope = ((const attn_bench_mod *)u)->slopes[h], dq = (float)(q - kv0);
#pragma omp simd
  for (int c = 0; c < (int)n; c++) /* n <= 256; |q - kv| exact in f32 below 2^24 */
    s[c] -= slope * fabsf(dq - (float)c);
}

static void one_row(const float *s, float *g, int64_t n, int64_t b, int64_t h, int64_t q,
                    int64_t kv0, void *u) {
  (void)s, (void)g, (void)n, (void)b, (void)h, (void)q, (void)kv0, (void)u;
}

/* The fast tanh below in an AVX2 clone too where the compiler makes
 * function clones (x86-64 ifunc; not under the sanitizers, whose runtime
 * starts after ifunc resolvers run): the tool runs at any x86-64 level. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(ATTN_NO_CLONES)
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ATTN_NO_CLONES
#endif
#endif
#ifndef ATTN_NO_CLONES
#define VECTOR_CLONES __attribute__((target_clones("arch=haswell", "default")))
#endif
#endif
#ifndef VECTOR_CLONES
#define VECTOR_CLONES
#endif

/* Eigen's rational (13, 6) approximation of tanh on [-7.9053, 7.9053]
 * (beyond, tanh is 1 in f32): error <= 3.5e-7 absolute. The clamp works on
 * the bits (integer compares: a float compare under the default
 * -ftrapping-math is not if-converted, so a loop of it would not
 * vectorise); a NaN passes. */
static inline __attribute__((always_inline)) float tanh_fast(float x) {
  const float a1 = 4.89352455891786e-03f, a3 = 6.37261928875436e-04f, a5 = 1.48572235717979e-05f,
              a7 = 5.12229709037114e-08f, a9 = -8.60467152213735e-11f,
              a11 = 2.00018790482477e-13f, a13 = -2.76076847742355e-16f;
  const float b0 = 4.89352518554385e-03f, b2 = 2.26843463243900e-03f, b4 = 1.18534705686654e-04f,
              b6 = 1.19825839466702e-06f;
  const uint32_t clamp = 0x40fcf84fu, inf = 0x7f800000u; /* 7.90531110763549805f */
  uint32_t u, a;
  memcpy(&u, &x, sizeof u);
  a = u & 0x7fffffffu;
  a = a > clamp && a <= inf ? clamp : a;
  u = (u & 0x80000000u) | a;
  float v;
  memcpy(&v, &u, sizeof v);
  const float v2 = v * v;
  const float p = ((((((a13 * v2 + a11) * v2 + a9) * v2 + a7) * v2 + a5) * v2 + a3) * v2 + a1) * v;
  const float r = ((b6 * v2 + b4) * v2 + b2) * v2 + b0;
  return p / r;
}

VECTOR_CLONES void attn_bench_tanh_row(const float *x, float *t, int64_t n) {
#pragma omp simd
  for (int64_t c = 0; c < n; c++)
    t[c] = tanh_fast(x[c]);
}

/* softcap per pair with the fast tanh above (scalar): the per-pair
 * dispatch with a body of the built-in's kind of cost, where "softcap"
 * calls libm's tanhf (correctly rounded to 1 ulp, ~18 ns a call here). */
static float softcap_fast(float s, int64_t b, int64_t h, int64_t q, int64_t kv, void *u) {
  (void)b, (void)h, (void)q, (void)kv;
  const float cap = ((const attn_bench_mod *)u)->cap;
  return cap * tanh_fast(s / cap);
}

static float softcap_fast_grad(float s, int64_t b, int64_t h, int64_t q, int64_t kv, void *u) {
  (void)b, (void)h, (void)q, (void)kv;
  const float t = tanh_fast(s / ((const attn_bench_mod *)u)->cap);
  return 1.0f - t * t;
}

static void softcap_row(float *s, int64_t n, int64_t b, int64_t h, int64_t q, int64_t kv0,
                        void *u) {
  (void)b, (void)h, (void)q, (void)kv0;
  const float cap = ((const attn_bench_mod *)u)->cap, inv = 1.0f / cap;
#pragma omp simd
  for (int64_t c = 0; c < n; c++)
    s[c] *= inv;
  attn_bench_tanh_row(s, s, n);
#pragma omp simd
  for (int64_t c = 0; c < n; c++)
    s[c] *= cap;
}

static void softcap_row_grad(const float *s, float *g, int64_t n, int64_t b, int64_t h, int64_t q,
                             int64_t kv0, void *u) {
  (void)b, (void)h, (void)q, (void)kv0;
  const float inv = 1.0f / ((const attn_bench_mod *)u)->cap;
  float t[256]; /* the library's runs: at most 256 keys */
  for (int64_t c0 = 0; c0 < n; c0 += 256) {
    const int64_t nn = n - c0 < 256 ? n - c0 : 256;
#pragma omp simd
    for (int64_t c = 0; c < nn; c++)
      t[c] = s[c0 + c] * inv;
    attn_bench_tanh_row(t, t, nn);
#pragma omp simd
    for (int64_t c = 0; c < nn; c++)
      g[c0 + c] *= 1.0f - t[c] * t[c];
  }
}

int attn_bench_mod_setup(int kind, attn_sdpa_desc *d, attn_sdpa_desc *builtin, attn_bench_mod *m) {
  memset(m, 0, sizeof *m);
  *builtin = *d;
  m->mods.user = m;
  const char *need = NULL;
  switch (kind) {
  case BENCH_MOD_CAUSAL:
  case BENCH_MOD_CAUSAL_NOBLOCK:
    if (!d->causal || d->window_left >= 0 || d->window_right >= 0) need = "--causal (no --window)";
    d->causal = 0;
    m->mods.mask_mod = causal_mask;
    break;
  case BENCH_MOD_WINDOW:
    if (d->window_left < 0 && d->window_right < 0) need = "--window W";
    m->wl = d->window_left, m->wr = d->causal ? 0 : d->window_right;
    d->causal = 0, d->window_left = d->window_right = -1;
    m->mods.mask_mod = window_mask;
    break;
  case BENCH_MOD_ALIBI:
  case BENCH_MOD_ALIBI_ROW:
    if (!d->alibi_slopes) need = "--alibi";
    m->slopes = d->alibi_slopes;
    d->alibi_slopes = NULL;
    if (kind == BENCH_MOD_ALIBI_ROW)
      m->mods.score_mod_row = alibi_row, m->mods.score_mod_row_grad = one_row;
    else
      m->mods.score_mod = alibi_score, m->mods.score_mod_grad = one;
    break;
  case BENCH_MOD_SOFTCAP:
  case BENCH_MOD_SOFTCAP_ROW:
  case BENCH_MOD_SOFTCAP_FAST:
    if (!(d->softcap > 0)) need = "--softcap C";
    m->cap = d->softcap;
    d->softcap = 0.0f;
    if (kind == BENCH_MOD_SOFTCAP_ROW)
      m->mods.score_mod_row = softcap_row, m->mods.score_mod_row_grad = softcap_row_grad;
    else if (kind == BENCH_MOD_SOFTCAP_FAST)
      m->mods.score_mod = softcap_fast, m->mods.score_mod_grad = softcap_fast_grad;
    else
      m->mods.score_mod = softcap, m->mods.score_mod_grad = softcap_grad;
    break;
  case BENCH_MOD_IDENTITY: /* the built-in: the same case without a callback */
    m->mods.score_mod = identity, m->mods.score_mod_grad = one;
    break;
  default: return 0;
  }
  if (need) {
    fprintf(stderr, "attn bench sdpa: --mod %s replaces a built-in: it needs %s\n",
            attn_bench_mod_name(kind), need);
    return 1;
  }
  if (m->mods.mask_mod && kind != BENCH_MOD_CAUSAL_NOBLOCK) {
    if (attn_block_mask_from_mask_mod(m->mods.mask_mod, m, 1, 1, d->Lq, d->Lk, 64, 64, &m->bm)) {
      fprintf(stderr, "attn bench sdpa: block mask: %s\n", attn_last_error());
      return 1;
    }
    m->mods.block_mask = &m->bm;
  }
  d->mods = &m->mods;
  return 0;
}

void attn_bench_mod_free(attn_bench_mod *m) { attn_block_mask_free(&m->bm); }
