/* The user callbacks `attn bench sdpa --mod` times (bench_sdpa_mods.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "apps/tools/bench_sdpa_mods.h"

static const char *const names[] = {"none", "causal", "causal-noblock", "window", "alibi",
                                    "softcap"};
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
    if (!d->alibi_slopes) need = "--alibi";
    m->slopes = d->alibi_slopes;
    d->alibi_slopes = NULL;
    m->mods.score_mod = alibi_score, m->mods.score_mod_grad = one;
    break;
  case BENCH_MOD_SOFTCAP:
    if (!(d->softcap > 0)) need = "--softcap C";
    m->cap = d->softcap;
    d->softcap = 0.0f;
    m->mods.score_mod = softcap, m->mods.score_mod_grad = softcap_grad;
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
