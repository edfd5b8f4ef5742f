/* User modifiers (attn/sdpa_mods.h): validation, the block mask built from
 * mask_mod, and the tile operations of the backends' hook points
 * (kernels/sdpa/sdpa_usermod.h). One function-pointer call per pair and callback;
 * the block mask saves them where a tile is wholly EMPTY or FULL. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/sdpa/sdpa_usermod.h"
#include "kernels/sdpa/sdpa_usermod_row.h"
#include "kernels/util.h"

attn_status attn_usermod_validate(const attn_sdpa_desc *d) {
  const attn_sdpa_mods *m = d->mods;
  if (!m) return ATTN_OK;
  if (m->score_mod_param_grad && !m->score_mod)
    return attn_set_error(ATTN_EINVAL, "sdpa mods: score_mod_param_grad needs score_mod");
  if (m->score_mod && m->score_mod_row)
    return attn_set_error(ATTN_EINVAL, "sdpa mods: score_mod and score_mod_row are both set (one "
                                       "of them: per pair or per row)");
  if (m->score_mod_row && m->score_mod_grad)
    return attn_set_error(ATTN_EINVAL, "sdpa mods: score_mod_grad is the derivative of score_mod; "
                                       "score_mod_row's is score_mod_row_grad");
  if ((m->score_mod_row_grad || m->score_mod_row_param_grad) && !m->score_mod_row)
    return attn_set_error(ATTN_EINVAL, "sdpa mods: score_mod_row_grad / score_mod_row_param_grad "
                                       "need score_mod_row");
  if (attn_usermod_any_score(m) && d->shaw_k)
    return attn_set_error(ATTN_EUNSUPPORTED, "sdpa mods: %s with Shaw relative keys (shaw_k) is "
                                             "not supported",
                          m->score_mod ? "score_mod" : "score_mod_row");
  const attn_block_mask *bm = m->block_mask;
  if (!bm) return ATTN_OK;
  if (!m->mask_mod)
    return attn_set_error(ATTN_EINVAL, "sdpa mods: a block_mask needs the mask_mod it was built from");
  if (!bm->state || bm->q_block < 1 || bm->kv_block < 1 || bm->Lq != d->Lq || bm->Lk != d->Lk ||
      (bm->B != 1 && bm->B != d->B) || (bm->H != 1 && bm->H != d->Hq) ||
      bm->nq != attn_ceil_div(d->Lq, bm->q_block) || bm->nkv != attn_ceil_div(d->Lk, bm->kv_block))
    return attn_set_error(ATTN_EINVAL,
                          "sdpa mods: block_mask [B %lld, H %lld, Lq %lld, Lk %lld, blocks %lld x "
                          "%lld] does not fit the call (B %lld, Hq %lld, Lq %lld, Lk %lld)",
                          (long long)bm->B, (long long)bm->H, (long long)bm->Lq, (long long)bm->Lk,
                          (long long)bm->q_block, (long long)bm->kv_block, (long long)d->B,
                          (long long)d->Hq, (long long)d->Lq, (long long)d->Lk);
  return ATTN_OK;
}

attn_status attn_usermod_check_backward(const attn_sdpa_desc *d, const char *who) {
  if (d->mods && d->mods->score_mod && !d->mods->score_mod_grad)
    return attn_set_error(ATTN_EINVAL,
                          "%s: score_mod is set but score_mod_grad (its derivative) is NULL", who);
  if (d->mods && d->mods->score_mod_row && !d->mods->score_mod_row_grad)
    return attn_set_error(
        ATTN_EINVAL, "%s: score_mod_row is set but score_mod_row_grad (its derivative) is NULL", who);
  return ATTN_OK;
}

attn_status attn_usermod_refuse(const attn_sdpa_desc *d, const char *who) {
  if (!d->mods) return ATTN_OK;
  return attn_set_error(ATTN_EUNSUPPORTED,
                        "%s: user modifiers (score_mod / mask_mod) are not supported here (use "
                        "the f32 or fp16 flash, or math)",
                        who);
}

attn_status attn_block_mask_from_mask_mod(attn_mask_mod_fn mask_mod, void *user, int64_t B,
                                          int64_t H, int64_t Lq, int64_t Lk, int64_t q_block,
                                          int64_t kv_block, attn_block_mask *out) {
  if (!out) return attn_set_error(ATTN_EINVAL, "block mask: out is NULL");
  memset(out, 0, sizeof *out);
  if (!mask_mod) return attn_set_error(ATTN_EINVAL, "block mask: mask_mod is NULL");
  if (B < 1 || H < 1 || Lq < 0 || Lk < 0 || q_block < 1 || kv_block < 1)
    return attn_set_error(ATTN_EINVAL,
                          "block mask: B=%lld H=%lld Lq=%lld Lk=%lld blocks %lld x %lld (B, H, "
                          "block sizes >= 1, lengths >= 0)",
                          (long long)B, (long long)H, (long long)Lq, (long long)Lk,
                          (long long)q_block, (long long)kv_block);
  const int64_t nq = attn_ceil_div(Lq, q_block), nkv = attn_ceil_div(Lk, kv_block);
  int64_t n;
  if (attn_ck_mul(B, H, &n) || attn_ck_mul(n, nq, &n) || attn_ck_mul(n, nkv, &n) ||
      !(out->state = malloc(n ? (size_t)n : 1)))
    return attn_set_error(ATTN_ENOMEM, "block mask: cannot allocate %lld x %lld x %lld x %lld",
                          (long long)B, (long long)H, (long long)nq, (long long)nkv);
  out->B = B, out->H = H, out->Lq = Lq, out->Lk = Lk;
  out->q_block = q_block, out->kv_block = kv_block, out->nq = nq, out->nkv = nkv;
  const int64_t rows = B * H * nq; /* one task per block row: distinct entries */
  int nt = attn_kernel_threads((double)B * H * Lq * Lk * 16.0, rows);
  (void)nt; /* unused without OpenMP */
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1)
  for (int64_t t = 0; t < rows; t++) {
    const int64_t bh = t / nq, qb = t % nq, b = bh / H, h = bh % H;
    const int64_t i0 = qb * q_block, i1 = i0 + q_block < Lq ? i0 + q_block : Lq;
    for (int64_t kb = 0; kb < nkv; kb++) {
      const int64_t j0 = kb * kv_block, j1 = j0 + kv_block < Lk ? j0 + kv_block : Lk;
      int on = 0, off = 0;
      for (int64_t i = i0; i < i1 && !(on && off); i++)
        for (int64_t j = j0; j < j1 && !(on && off); j++) {
          if (mask_mod(b, h, i, j, user))
            on = 1;
          else
            off = 1;
        }
      out->state[t * nkv + kb] = on ? (off ? ATTN_BLOCK_PARTIAL : ATTN_BLOCK_FULL) : ATTN_BLOCK_EMPTY;
    }
  }
  return ATTN_OK;
}

void attn_block_mask_free(attn_block_mask *bm) {
  if (!bm) return;
  free(bm->state);
  memset(bm, 0, sizeof *bm);
}

/* The block mask's row of blocks for query row i of (b, h). */
static const uint8_t *bm_row(const attn_block_mask *bm, int64_t b, int64_t h, int64_t i) {
  const int64_t bb = bm->B > 1 ? b : 0, hh = bm->H > 1 ? h : 0;
  return bm->state + ((bb * bm->H + hh) * bm->nq + i / bm->q_block) * bm->nkv;
}

int attn_usermod_tile_state(const attn_sdpa_desc *d, int64_t b, int64_t h, int64_t i0, int64_t R,
                            int64_t j0, int64_t nk) {
  const attn_sdpa_mods *m = d->mods;
  if (!m) return 1;
  const attn_block_mask *bm = m->block_mask;
  if (!bm) return m->mask_mod || attn_usermod_any_score(m) ? 2 : 1;
  int on = 0, off = 0, partial = 0;
  for (int64_t i = i0; i < i0 + R; i += bm->q_block - i % bm->q_block) {
    const uint8_t *row = bm_row(bm, b, h, i);
    for (int64_t c = j0 / bm->kv_block; c <= (j0 + nk - 1) / bm->kv_block; c++) {
      on |= row[c] != ATTN_BLOCK_EMPTY;
      off |= row[c] != ATTN_BLOCK_FULL;
      partial |= row[c] == ATTN_BLOCK_PARTIAL;
    }
  }
  if (!on) return 0;
  return off || partial || attn_usermod_any_score(m) ? 2 : 1;
}

/* score_mod alone on a row of the tile, x[c] for keys j0 + c (c < nk): the
 * forward's hot loop, one call per allowed pair and nothing else (the
 * function and its argument in registers: the calls could change *m, so
 * the general loop reloads them); -inf stays. */
static void score_row(attn_score_mod_fn f, void *u, int64_t b, int64_t h, int64_t i, int64_t j0,
                      int64_t nk, float *x) {
  for (int64_t c = 0; c < nk; c++) {
    const float v = x[c];
    if (v != -INFINITY) x[c] = f(v, b, h, i, j0 + c, u);
  }
}

/* The tile op on s[r * rs + c * cs] (raw at the same offsets, or NULL); the
 * scores seen by the callbacks are s + shift[r] (shift NULL: 0), written back
 * less the shift. */
static void tile_strided(const attn_sdpa_desc *d, int64_t b, int64_t h, int64_t i0, int64_t R,
                         int64_t j0, int64_t nk, float *s, int64_t rs, int64_t cs,
                         const float *shift, float *raw) {
  const attn_sdpa_mods *m = d->mods;
  if (!m) return;
  const attn_block_mask *bm = m->block_mask;
  for (int64_t r = 0; r < R; r++) {
    const int64_t i = i0 + r;
    const float sh = shift ? shift[r] : 0.0f;
    const uint8_t *row = bm ? bm_row(bm, b, h, i) : NULL;
    if (m->score_mod && !m->mask_mod && cs == 1 && !shift && !raw) {
      score_row(m->score_mod, m->user, b, h, i, j0, nk, s + r * rs);
      continue;
    }
    if (m->score_mod_row && !m->mask_mod) {
      attn_usermod_row_scores(m, b, h, i, j0, nk, s + r * rs, cs, shift != NULL, sh,
                              raw ? raw + r * rs : NULL);
      continue;
    }
    for (int64_t c = 0; c < nk; c++) {
      float *x = s + r * rs + c * cs;
      if (raw) raw[r * rs + c * cs] = *x + sh;
      if (*x == -INFINITY) continue;
      const int64_t j = j0 + c;
      if (m->mask_mod) {
        const int st = row ? row[j / bm->kv_block] : ATTN_BLOCK_PARTIAL;
        if (st == ATTN_BLOCK_EMPTY ||
            (st == ATTN_BLOCK_PARTIAL && !m->mask_mod(b, h, i, j, m->user))) {
          *x = -INFINITY;
          continue;
        }
      }
      if (m->score_mod) *x = shift ? m->score_mod(*x + sh, b, h, i, j, m->user) - sh
                                   : m->score_mod(*x, b, h, i, j, m->user);
    }
    if (m->score_mod_row) /* after mask_mod */
      attn_usermod_row_scores(m, b, h, i, j0, nk, s + r * rs, cs, shift != NULL, sh,
                              raw ? raw + r * rs : NULL);
  }
}

void attn_usermod_tile(const attn_sdpa_desc *d, int64_t b, int64_t h, int64_t i0, int64_t R,
                       int64_t j0, int64_t nk, float *s, int64_t lds, float *raw, int64_t ldr) {
  if (raw && ldr != lds) { /* (the loops pass raw with the tile's stride) */
    for (int64_t r = 0; r < R; r++)
      tile_strided(d, b, h, i0 + r, 1, j0, nk, s + r * lds, 0, 1, NULL, raw + r * ldr);
    return;
  }
  tile_strided(d, b, h, i0, R, j0, nk, s, lds, 1, NULL, raw);
}

void attn_usermod_tile_t(const attn_sdpa_desc *d, int64_t b, int64_t h, int64_t i0, int64_t R,
                         int64_t j0, int64_t nk, float *st, int64_t ldst, const float *shift,
                         float *raw) {
  tile_strided(d, b, h, i0, R, j0, nk, st, 1, ldst, shift, raw);
}

void attn_usermod_dp_t(const attn_sdpa_desc *d, int64_t b, int64_t h, int64_t i0, int64_t R,
                       int64_t j0, int64_t nk, const float *raw, const float *st, int64_t ldst,
                       float *dpt, const float *lse, const float *di) {
  const attn_sdpa_mods *m = d->mods;
  if (m && m->score_mod_row)
    attn_usermod_row_dp_t(m, b, h, i0, R, j0, nk, raw, st, ldst, dpt, lse, di);
  if (!m || !m->score_mod) return;
  for (int64_t c = 0; c < nk; c++)
    for (int64_t r = 0; r < R; r++) {
      const int64_t e = c * ldst + r;
      if (st[e] == -INFINITY || lse[r] == -INFINITY) continue;
      const float g = expf(st[e] - lse[r]) * (dpt[e] - di[r]);
      if (g == 0.0f) continue; /* NaN passes */
      if (m->score_mod_param_grad)
        m->score_mod_param_grad(raw[e], g, b, h, i0 + r, j0 + c, m->user);
      dpt[e] = (dpt[e] - di[r]) * m->score_mod_grad(raw[e], b, h, i0 + r, j0 + c, m->user) + di[r];
    }
}

void attn_usermod_tile_grad(const attn_sdpa_desc *d, int64_t b, int64_t h, int64_t i0, int64_t R,
                            int64_t j0, int64_t nk, const float *raw, int64_t ldr, float *ds,
                            int64_t ldds) {
  const attn_sdpa_mods *m = d->mods;
  if (m && m->score_mod_row)
    for (int64_t r = 0; r < R; r++)
      attn_usermod_row_grad(m, b, h, i0 + r, j0, nk, raw + r * ldr, ds + r * ldds);
  if (!m || !m->score_mod) return;
  for (int64_t r = 0; r < R; r++) {
    const float *xr = raw + r * ldr;
    float *g = ds + r * ldds;
    for (int64_t c = 0; c < nk; c++) {
      if (g[c] == 0.0f) continue; /* NaN passes */
      if (m->score_mod_param_grad) m->score_mod_param_grad(xr[c], g[c], b, h, i0 + r, j0 + c, m->user);
      g[c] *= m->score_mod_grad(xr[c], b, h, i0 + r, j0 + c, m->user);
    }
  }
}
