/* The score-modifier stage (sdpa_stage.h): the calls every SDPA loop
 * makes. Nothing here knows a modifier by name: the units are those named
 * in the modifier table's rows (sdpa_modifiers.c), in its order, each with
 * its row's test of whether a descriptor sets it. */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "kernels/kern.h"
#include "kernels/sdpa/sdpa_modifiers.h"
#include "kernels/sdpa/sdpa_stage.h"

enum { MAXU = 16 };
typedef struct {
  int (*present)(const attn_sdpa_desc *d);
  const attn_score_unit *u;
} entry;
static entry units[MAXU];
static int nunits;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void collect(void) {
  for (int i = 0; i < attn_sdpa_modifier_count() && nunits < MAXU; i++) {
    const attn_sdpa_modifier *m = attn_sdpa_modifier_at(i);
    if (m->unit) units[nunits++] = (entry){m->present, m->unit};
  }
}

static int count(void) {
  pthread_once(&once, collect);
  return nunits;
}

int attn_stage_unit_count(void) { return count(); }

const attn_score_unit *attn_stage_unit_at(int i) {
  return i >= 0 && i < count() ? units[i].u : NULL;
}

const attn_score_unit *attn_stage_unit_named(const char *name) {
  for (int i = 0; i < count(); i++)
    if (strcmp(units[i].u->name, name) == 0) return units[i].u;
  return NULL;
}

/* the level below isa in the kernel tables' order (dispatch.c) */
static int below(attn_isa isa) {
  switch (isa) {
  case ATTN_ISA_AVX512: return ATTN_ISA_AVX2;
  case ATTN_ISA_AVX2:
  case ATTN_ISA_NEON: return ATTN_ISA_GENERIC;
  default: return -1;
  }
}

attn_score_vec_fn attn_stage_vec(const attn_score_unit *u, attn_isa isa) {
  for (int l = (int)isa; l >= 0; l = below((attn_isa)l))
    if (u->vec[l]) return u->vec[l];
  return NULL;
}

attn_status attn_stage_validate(const attn_sdpa_desc *d) {
  for (int i = 0, nu = count(); i < nu; i++) {
    if (!units[i].u->validate || !units[i].present(d)) continue;
    attn_status st = units[i].u->validate(d);
    if (st) return st;
  }
  return ATTN_OK;
}

int attn_stage_has_tile(const attn_sdpa_desc *d) {
  for (int i = 0, nu = count(); i < nu; i++)
    if (units[i].u->tile && units[i].present(d)) return 1;
  return 0;
}

int attn_stage_fusable(const attn_sdpa_desc *d) {
  for (int i = 0, nu = count(); i < nu; i++)
    if (units[i].u->tile && !units[i].u->fuse && units[i].present(d)) return 0;
  return 1;
}

int attn_stage_shift_invariant(const attn_sdpa_desc *d) {
  for (int i = 0, nu = count(); i < nu; i++)
    if (units[i].u->tile && !units[i].u->shift_invariant && units[i].present(d)) return 0;
  return 1;
}

static void fill_ones(int64_t R, int64_t n, float *g, int64_t ldg) {
  for (int64_t r = 0; r < R; r++)
    for (int64_t c = 0; c < n; c++)
      g[r * ldg + c] = 1.0f;
}

/* the second and later units of a chain: their derivative multiplied into
 * g, a row chunk at a time */
static void tile_chained(const attn_score_unit *u, const attn_sdpa_desc *d, int64_t h, int R, int n,
                         float *s, int64_t lds, float *g, int64_t ldg) {
  enum { CH = 256 };
  float t[CH];
  for (int r = 0; r < R; r++)
    for (int c0 = 0; c0 < n; c0 += CH) {
      const int m = n - c0 < CH ? n - c0 : CH;
      float *gr = g + r * ldg + c0;
      u->tile(d, h, attn_stage_vec(u, attn_kern_get()->isa), 1, m, s + r * lds + c0, 0, t, 0);
      for (int c = 0; c < m; c++)
        gr[c] *= t[c];
    }
}

void attn_stage_tile(const attn_sdpa_desc *d, int64_t h, int R, int n, float *s, int64_t lds,
                     float *g, int64_t ldg) {
  int first = 1;
  for (int i = 0, nu = count(); i < nu; i++) {
    const attn_score_unit *u = units[i].u;
    if (!u->tile || !units[i].present(d)) continue;
    if (first || !g)
      u->tile(d, h, attn_stage_vec(u, attn_kern_get()->isa), R, n, s, lds, g, ldg);
    else
      tile_chained(u, d, h, R, n, s, lds, g, ldg);
    first = 0;
  }
  if (first && g) fill_ones(R, n, g, ldg);
}

void attn_stage_row_exact(const attn_sdpa_desc *d, int64_t h, float *s, int64_t n, float *g) {
  int first = 1;
  for (int i = 0, nu = count(); i < nu; i++) {
    const attn_score_unit *u = units[i].u;
    if (!u->row_exact || !units[i].present(d)) continue;
    if (first || !g) {
      u->row_exact(d, h, s, n, g);
    } else {
      enum { CH = 256 };
      float t[CH];
      for (int64_t c0 = 0; c0 < n; c0 += CH) {
        const int64_t m = n - c0 < CH ? n - c0 : CH;
        u->row_exact(d, h, s + c0, m, t);
        for (int64_t c = 0; c < m; c++)
          g[c0 + c] *= t[c];
      }
    }
    first = 0;
  }
  if (first && g) fill_ones(1, n, g, n);
}

void attn_stage_grad_tile(int64_t R, int64_t n, float *ds, int64_t lds, const float *g,
                          int64_t ldg) {
  for (int64_t r = 0; r < R; r++)
    for (int64_t c = 0; c < n; c++)
      ds[r * lds + c] *= g[r * ldg + c];
}

void attn_stage_fuse(const attn_sdpa_desc *d, int64_t h, struct attn_flash_mod *mod) {
  for (int i = 0, nu = count(); i < nu; i++)
    if (units[i].u->fuse && units[i].present(d)) units[i].u->fuse(d, h, mod);
}

float attn_stage_row_logit(const attn_sdpa_desc *d, int64_t h) {
  float x = -INFINITY;
  for (int i = 0, nu = count(); i < nu; i++) {
    if (!units[i].u->row_logit || !units[i].present(d)) continue;
    const float y = units[i].u->row_logit(d, h);
    /* two row units: their logits' log-sum-exp (NaN stays NaN) */
    x = x == -INFINITY ? y : y == -INFINITY ? x : fmaxf(x, y) + log1pf(expf(-fabsf(x - y)));
    if (isnan(y)) x = y;
  }
  return x;
}

int attn_stage_row_finish(const attn_sdpa_desc *d, int64_t h, float m, float l, float *inv,
                          float *lse) {
  const float x = attn_stage_row_logit(d, h);
  if (x == -INFINITY) {
    if (l == 0.0f) {
      *lse = -INFINITY;
      return 0;
    }
    *inv = 1.0f / l;
    *lse = m + logf(l);
    return 1;
  }
  if (l == 0.0f) {
    *lse = x;
    return 0;
  }
  const float m2 = x > m ? x : m; /* a NaN logit does not win, but poisons l2 */
  const float a = expf(m - m2), l2 = l * a + expf(x - m2);
  *inv = a / l2;
  *lse = m2 + logf(l2);
  return 1;
}

void attn_stage_backward(const attn_sdpa_desc *d, const attn_sdpa_resolved *rs, const float *out,
                         const float *lse, const float *dout) {
  for (int i = 0, nu = count(); i < nu; i++)
    if (units[i].u->backward && units[i].present(d)) units[i].u->backward(d, rs, out, lse, dout);
}
