/* The SDPA modifiers and the kernels that run them (sdpa_modifiers.h). A new
 * modifier: its descriptor field (attn/sdpa.h), its row here, its rule where
 * its kind is applied (sdpa_modifiers.h) — for an element-wise or row-end
 * one, a unit of the score-modifier stage (mod_<name>.c, named in its row:
 * the stage finds its units here) — and its tests. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels/kern.h"

#include "kernels/sdpa/sdpa_modifiers.h"
#include "kernels/sdpa/sdpa_stage.h"

/* the score-modifier stage's units (mod_<name>.c) */
extern const attn_score_unit attn_unit_softcap, attn_unit_sinks;

static int has_causal(const attn_sdpa_desc *d) { return d->causal != 0; }
static int has_prefix(const attn_sdpa_desc *d) { return d->prefix_lens != NULL; }
static int has_window(const attn_sdpa_desc *d) {
  return d->window_left >= 0 || d->window_right >= 0;
}
static int has_key_lens(const attn_sdpa_desc *d) { return d->key_lens != NULL; }
static int has_q_offset(const attn_sdpa_desc *d) { return d->q_offset != 0; }
static int has_q_offsets(const attn_sdpa_desc *d) { return d->q_offsets != NULL; }
static int has_bool_mask(const attn_sdpa_desc *d) { return d->bool_mask != NULL; }
static int has_add_mask(const attn_sdpa_desc *d) { return d->add_mask != NULL; }
static int has_alibi(const attn_sdpa_desc *d) { return d->alibi_slopes != NULL; }
static int has_rel_bias(const attn_sdpa_desc *d) { return d->rel_bias != NULL; }
static int has_shaw(const attn_sdpa_desc *d) { return d->shaw_k || d->shaw_v; }
static int has_block_mask(const attn_sdpa_desc *d) { return d->block_mask != NULL; }
static int has_softcap(const attn_sdpa_desc *d) { return d->softcap != 0.0f; }
static int has_sinks(const attn_sdpa_desc *d) { return d->sinks != NULL; }
static int has_dropout(const attn_sdpa_desc *d) { return d->dropout_p != 0.0f; }
static int has_mods(const attn_sdpa_desc *d) { return d->mods != NULL; }

#define ALL ATTN_SK_ALL
#define DENSE (ATTN_SK_ALL & ~ATTN_SK_VARLEN)
#define F32_LOOPS (ATTN_SK_MATH | ATTN_SK_FLASH | ATTN_SK_VARLEN)

static const attn_sdpa_modifier table[] = {
    /* masks: the key interval of each query row (attn_sdpa_key_range) */
    {"causal", "causal mask", has_causal, ALL, 0, NULL},
    {"prefix_lens", "prefix-LM", has_prefix, ALL, 0, NULL},
    {"window_left/window_right", "local window", has_window, ALL, 0, NULL},
    {"key_lens", "key padding", has_key_lens, DENSE, 1, NULL},
    {"q_offset", "query alignment", has_q_offset, DENSE, 1, NULL},
    {"q_offsets", "per-batch query alignment", has_q_offsets, ALL, 0, NULL},
    /* element masks */
    {"bool_mask", "boolean mask", has_bool_mask, DENSE, 1, NULL},
    {"add_mask", "additive mask", has_add_mask, DENSE, 1, NULL},
    {"block_mask", "block-sparse layout", has_block_mask, F32_LOOPS, 0, NULL},
    {"mods", "user score_mod / mask_mod", has_mods, ALL, 0, NULL},
    /* score modifiers */
    {"softcap", "logit softcap", has_softcap, ALL, 0, &attn_unit_softcap},
    {"alibi_slopes", "ALiBi", has_alibi, F32_LOOPS, 0, NULL},
    {"rel_bias", "T5 relative bias", has_rel_bias, F32_LOOPS, 0, NULL},
    {"shaw_k/shaw_v", "Shaw relative positions", has_shaw, F32_LOOPS, 0, NULL},
    /* the row's end and the probabilities */
    {"sinks", "attention sinks", has_sinks, ALL, 0, &attn_unit_sinks},
    {"dropout_p", "attention dropout", has_dropout, ATTN_SK_MATH | ATTN_SK_FLASH | ATTN_SK_F16, 0,
     NULL},
};

int attn_sdpa_modifier_count(void) { return (int)(sizeof table / sizeof table[0]); }

const attn_sdpa_modifier *attn_sdpa_modifier_at(int i) {
  return i >= 0 && i < attn_sdpa_modifier_count() ? &table[i] : NULL;
}

const char *attn_sdpa_kernel_names(unsigned k, char *buf, size_t n) {
  static const char *const names[] = {"math",       "f32 flash",  "bf16 flash",
                                      "fp16 flash", "int8 flash", "varlen"};
  size_t used = 0;
  buf[0] = 0;
  for (int i = 0; i < 6; i++)
    if (k & (1u << i) && used < n)
      used += (size_t)snprintf(buf + used, n - used, "%s%s", used ? ", " : "", names[i]);
  if (!used) snprintf(buf, n, "none");
  return buf;
}

attn_status attn_sdpa_modifiers_check(const attn_sdpa_desc *d, unsigned need, int any,
                                      const char *kernel) {
  for (int i = 0; i < attn_sdpa_modifier_count(); i++) {
    const attn_sdpa_modifier *m = &table[i];
    if (!m->present(d)) continue;
    const unsigned have = m->kernels & need;
    if (any ? have != 0 : have == need) continue;
    char where[128];
    if (m->dense_only && need == ATTN_SK_VARLEN)
      return attn_set_error(ATTN_EINVAL,
                            "sdpa varlen: %s (%s) has no meaning in the packed layout (lengths and "
                            "alignment come from cu_seqlens; q_offsets overrides the alignment)",
                            m->field, m->what);
    return attn_set_error(ATTN_EUNSUPPORTED,
                          "sdpa: %s (%s) is not supported by %s (it runs in: %s)", m->field,
                          m->what, kernel, attn_sdpa_kernel_names(m->kernels, where, sizeof where));
  }
  return ATTN_OK;
}

/* ---- the score-modifier stage (sdpa_stage.h): the rows with a unit, in
 * the table's order, each with its row's test of whether d sets it ---- */
enum { NROWS = (int)(sizeof table / sizeof table[0]) };

int attn_stage_unit_count(void) {
  int n = 0;
  for (int i = 0; i < NROWS; i++)
    n += table[i].unit != NULL;
  return n;
}

const attn_score_unit *attn_stage_unit_at(int i) {
  for (int r = 0; r < NROWS; r++)
    if (table[r].unit && i-- == 0) return table[r].unit;
  return NULL;
}

const attn_score_unit *attn_stage_unit_named(const char *name) {
  for (int r = 0; r < NROWS; r++)
    if (table[r].unit && strcmp(table[r].unit->name, name) == 0) return table[r].unit;
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

void attn_stage_decode_mods(const attn_decode_desc *dd, attn_sdpa_desc *sd) {
  memset(sd, 0, sizeof *sd);
  sd->B = dd->B, sd->Hq = dd->Hq, sd->Hkv = dd->Hkv, sd->Lq = dd->Lq;
  sd->D = dd->D, sd->Dv = dd->Dv;
  sd->window_left = sd->window_right = -1;
  sd->softcap = dd->softcap;
  sd->sinks = dd->sinks;
}

attn_status attn_stage_validate(const attn_sdpa_desc *d) {
  for (int i = 0; i < NROWS; i++) {
    if (!table[i].unit || !table[i].unit->validate || !table[i].present(d)) continue;
    attn_status st = table[i].unit->validate(d);
    if (st) return st;
  }
  return ATTN_OK;
}

int attn_stage_has_tile(const attn_sdpa_desc *d) {
  for (int i = 0; i < NROWS; i++)
    if (table[i].unit && table[i].unit->tile && table[i].present(d)) return 1;
  return 0;
}

int attn_stage_fusable(const attn_sdpa_desc *d) {
  for (int i = 0; i < NROWS; i++)
    if (table[i].unit && table[i].unit->tile && !table[i].unit->fuse && table[i].present(d))
      return 0;
  return 1;
}

int attn_stage_shift_invariant(const attn_sdpa_desc *d) {
  for (int i = 0; i < NROWS; i++)
    if (table[i].unit && table[i].unit->tile && !table[i].unit->shift_invariant &&
        table[i].present(d))
      return 0;
  return 1;
}

static void fill_ones(int64_t R, int64_t n, float *g, int64_t ldg) {
  for (int64_t r = 0; r < R; r++)
    for (int64_t c = 0; c < n; c++)
      g[r * ldg + c] = 1.0f;
}

/* unit u on s [R, n]: the active level's vector form row by row where it
 * has one, else the unit's portable loop */
static void unit_tile(const attn_score_unit *u, const attn_sdpa_desc *d, int64_t h, int R, int n,
                      float *s, int64_t lds, float *g, int64_t ldg) {
  const attn_score_vec_fn vec = attn_stage_vec(u, attn_kern_get()->isa);
  if (!vec) {
    u->tile(d, h, R, n, s, lds, g, ldg);
    return;
  }
  const float param = u->param(d, h);
  for (int r = 0; r < R; r++)
    vec(param, s + r * lds, g ? g + r * ldg : NULL, n);
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
      unit_tile(u, d, h, 1, m, s + r * lds + c0, 0, t, 0);
      for (int c = 0; c < m; c++)
        gr[c] *= t[c];
    }
}

void attn_stage_tile(const attn_sdpa_desc *d, int64_t h, int R, int n, float *s, int64_t lds,
                     float *g, int64_t ldg) {
  int first = 1;
  for (int i = 0; i < NROWS; i++) {
    const attn_score_unit *u = table[i].unit;
    if (!u || !u->tile || !table[i].present(d)) continue;
    if (first || !g)
      unit_tile(u, d, h, R, n, s, lds, g, ldg);
    else
      tile_chained(u, d, h, R, n, s, lds, g, ldg);
    first = 0;
  }
  if (first && g) fill_ones(R, n, g, ldg);
}

void attn_stage_row_exact(const attn_sdpa_desc *d, int64_t h, float *s, int64_t n, float *g) {
  int first = 1;
  for (int i = 0; i < NROWS; i++) {
    const attn_score_unit *u = table[i].unit;
    if (!u || !u->row_exact || !table[i].present(d)) continue;
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
  for (int i = 0; i < NROWS; i++)
    if (table[i].unit && table[i].unit->fuse && table[i].present(d)) table[i].unit->fuse(d, h, mod);
}

void attn_stage_head_init(const attn_sdpa_desc *d, int64_t h, attn_stage_head *st,
                          struct attn_flash_mod *mod) {
  st->tile = attn_stage_has_tile(d);
  st->fusable = attn_stage_fusable(d);
  st->row_logit = attn_stage_row_logit(d, h);
  if (mod && st->tile) attn_stage_fuse(d, h, mod);
}

float attn_stage_row_logit(const attn_sdpa_desc *d, int64_t h) {
  float x = -INFINITY;
  for (int i = 0; i < NROWS; i++) {
    if (!table[i].unit || !table[i].unit->row_logit || !table[i].present(d)) continue;
    const float y = table[i].unit->row_logit(d, h);
    /* two row units: their logits' log-sum-exp (NaN stays NaN) */
    x = x == -INFINITY ? y : y == -INFINITY ? x : fmaxf(x, y) + log1pf(expf(-fabsf(x - y)));
    if (isnan(y)) x = y;
  }
  return x;
}

void attn_stage_backward(const attn_sdpa_desc *d, const attn_sdpa_resolved *rs, const float *out,
                         const float *lse, const float *dout) {
  for (int i = 0; i < NROWS; i++)
    if (table[i].unit && table[i].unit->backward && table[i].present(d))
      table[i].unit->backward(d, rs, out, lse, dout);
}
