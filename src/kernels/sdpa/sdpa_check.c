/* SDPA: descriptor defaults, backend names, and the argument validation
 * shared by every backend (the entry, sdpa_entry.c, routes the calls). */
#include <math.h>
#include <string.h>

#include "core/checked.h"
#include "kernels/sdpa/sdpa_dropout.h"
#include "kernels/sdpa/sdpa_internal.h"
#include "kernels/sdpa/sdpa_stage.h"
#include "kernels/sdpa/sdpa_usermod.h"

void attn_sdpa_desc_init(attn_sdpa_desc *d, int64_t B, int64_t Hq, int64_t Hkv, int64_t Lq,
                         int64_t Lk, int64_t D, int64_t Dv) {
  if (!d) return;
  memset(d, 0, sizeof *d);
  d->B = B;
  d->Hq = Hq;
  d->Hkv = Hkv;
  d->Lq = Lq;
  d->Lk = Lk;
  d->D = D;
  d->Dv = Dv;
  d->window_left = -1;
  d->window_right = -1;
}

attn_status attn_backend_from_name(const char *name, attn_backend *out) {
  if (!name || !out) return attn_set_error(ATTN_EINVAL, "sdpa backend: NULL argument");
  if (!strcmp(name, "auto"))
    *out = ATTN_BACKEND_AUTO;
  else if (!strcmp(name, "math"))
    *out = ATTN_BACKEND_MATH;
  else if (!strcmp(name, "flash"))
    *out = ATTN_BACKEND_FLASH;
  else
    return attn_set_error(ATTN_EINVAL, "sdpa backend '%s' unknown (auto, math or flash)", name);
  return ATTN_OK;
}

const char *attn_backend_name(attn_backend b) {
  switch (b) {
  case ATTN_BACKEND_AUTO: return "auto";
  case ATTN_BACKEND_MATH: return "math";
  case ATTN_BACKEND_FLASH: return "flash";
  }
  return "unknown";
}

/* Resolves one tensor's (b, h, l) strides for shape [B, H, L, last] and checks
 * that the layout has no two elements at the same place (outputs are written
 * through these strides) and that its extent fits in int64. */
static attn_status resolve_strides(const char *name, const int64_t given[3], int64_t B, int64_t H,
                                   int64_t L, int64_t last, int64_t out[3]) {
  if (given[0] == 0 && given[1] == 0 && given[2] == 0) {
    out[2] = last;
    if (__builtin_mul_overflow(L, last, &out[1]) || __builtin_mul_overflow(H, out[1], &out[0]))
      return attn_set_error(ATTN_EINVAL, "sdpa: %s is too large", name);
  } else {
    for (int i = 0; i < 3; i++) {
      if (given[i] < 0)
        return attn_set_error(ATTN_EINVAL, "sdpa: %s stride[%d] = %lld is negative", name, i,
                              (long long)given[i]);
      out[i] = given[i];
    }
  }
  if (B == 0 || H == 0 || L == 0 || last == 0) return ATTN_OK; /* no elements */
  /* dims of size > 1 sorted by stride must each step over all inner ones */
  int64_t size[4] = {B, H, L, last}, stride[4] = {out[0], out[1], out[2], 1};
  int order[4] = {3, 2, 1, 0};
  for (int a = 1; a < 4; a++) /* insertion sort by stride */
    for (int c = a; c > 0 && stride[order[c]] < stride[order[c - 1]]; c--) {
      int t = order[c];
      order[c] = order[c - 1];
      order[c - 1] = t;
    }
  int64_t span = 1; /* max offset + 1 of the dims seen so far */
  for (int a = 0; a < 4; a++) {
    int x = order[a];
    if (size[x] <= 1) continue;
    if (stride[x] < span)
      return attn_set_error(ATTN_EINVAL,
                            "sdpa: %s strides (%lld, %lld, %lld) overlap for shape "
                            "[%lld, %lld, %lld, %lld]",
                            name, (long long)out[0], (long long)out[1], (long long)out[2],
                            (long long)B, (long long)H, (long long)L, (long long)last);
    int64_t ext;
    if (__builtin_mul_overflow(size[x] - 1, stride[x], &ext) ||
        __builtin_add_overflow(span, ext, &span))
      return attn_set_error(ATTN_EINVAL, "sdpa: %s is too large", name);
  }
  return ATTN_OK;
}

/* ---- per-batch alignment and ALiBi slopes (the split calls: sdpa_batched.c) ---- */

/* Positions beyond this (either sign) are refused: i + offset and the
 * distances p_i - j must not overflow. */
#define OFFSET_MAX (INT64_MAX / 8)

static attn_status check_offset(const attn_sdpa_desc *d, const char *what, int64_t b, int64_t off) {
  if (off < -OFFSET_MAX || off > OFFSET_MAX || d->Lq > OFFSET_MAX)
    return attn_set_error(ATTN_EINVAL, "sdpa: %s%s%lld%s = %lld is too large in magnitude", what,
                          b >= 0 ? "[" : "", (long long)(b >= 0 ? b : 0), b >= 0 ? "]" : "",
                          (long long)off);
  if (d->block_mask && off < 0)
    return attn_set_error(ATTN_EINVAL,
                          "sdpa: %s%s%lld%s = %lld is negative: a block-sparse layout needs "
                          "query positions >= 0",
                          what, b >= 0 ? "[" : "", (long long)(b >= 0 ? b : 0), b >= 0 ? "]" : "",
                          (long long)off);
  return ATTN_OK;
}

attn_status attn_sdpa_validate_alignment(const attn_sdpa_desc *d) {
  attn_status st;
  if (d->q_offsets) {
    for (int64_t b = 0; b < d->B; b++)
      if ((st = check_offset(d, "q_offsets", b, d->q_offsets[b]))) return st;
  } else if ((st = check_offset(d, "q_offset", -1, d->q_offset))) {
    return st;
  }
  if (d->alibi_slopes_bstride != 0 && d->alibi_slopes_bstride != d->Hq)
    return attn_set_error(ATTN_EINVAL,
                          "sdpa: alibi_slopes_bstride = %lld must be 0 (slopes [Hq]) or Hq = %lld "
                          "(slopes [B, Hq])",
                          (long long)d->alibi_slopes_bstride, (long long)d->Hq);
  if (d->alibi_slopes_bstride && !d->alibi_slopes)
    return attn_set_error(ATTN_EINVAL, "sdpa: alibi_slopes_bstride set without alibi_slopes");
  if (d->alibi_slopes_grad && !d->alibi_slopes)
    return attn_set_error(ATTN_EINVAL, "sdpa: alibi_slopes_grad given without alibi_slopes");
  return ATTN_OK;
}

/* The variant fields (see sdpa_internal.h for the rules). */
static attn_status validate_variants(const attn_sdpa_desc *d) {
  attn_status st = attn_sdpa_validate_alignment(d);
  if (st) return st;
  if (d->rel_bias) {
    const int64_t nb = d->rel_bidirectional ? d->rel_buckets / 2 : d->rel_buckets;
    if (nb < 2 || d->rel_max_distance <= nb / 2)
      return attn_set_error(ATTN_EINVAL,
                            "sdpa: rel_bias with rel_buckets = %lld (bidirectional %d) and "
                            "rel_max_distance = %lld: need %s buckets and max_distance > %lld",
                            (long long)d->rel_buckets, d->rel_bidirectional,
                            (long long)d->rel_max_distance, d->rel_bidirectional ? ">= 4" : ">= 2",
                            (long long)(nb / 2));
  }
  int64_t nr;
  if ((d->shaw_k || d->shaw_v) &&
      (d->shaw_max < 1 || d->shaw_max > (INT64_MAX / 4) ||
       __builtin_mul_overflow(d->Lq, 2 * d->shaw_max - 1, &nr) || nr > INT64_MAX / 8))
    return attn_set_error(ATTN_EINVAL,
                          "sdpa: shaw_k/shaw_v with shaw_max = %lld (must be >= 1, and "
                          "Lq*(2*shaw_max-1) not huge)",
                          (long long)d->shaw_max);
  if (d->block_mask &&
      (d->block_size < 1 || d->block_cols < 0 ||
       (d->block_cols > 0 && d->block_cols < attn_ceil_div(d->Lk, d->block_size))))
    return attn_set_error(ATTN_EINVAL,
                          "sdpa: block_mask with block_size = %lld, block_cols = %lld (size >= 1; "
                          "cols 0 or >= ceil(Lk/size))",
                          (long long)d->block_size, (long long)d->block_cols);
  return attn_usermod_validate(d);
}

attn_status attn_sdpa_check_backward_ptrs(const attn_sdpa_desc *d, const char *who, const void *out,
                                          const void *lse, const void *dout, const void *dq,
                                          const void *dk, const void *dv) {
  if (attn_usermod_check_backward(d, who)) return ATTN_EINVAL;
  if (d->Lq > 0 && (!out || !lse || !dout || !dq))
    return attn_set_error(ATTN_EINVAL, "%s: %s is NULL", who,
                          !out    ? "out"
                          : !lse  ? "lse"
                          : !dout ? "dout"
                                  : "dq");
  if (d->Lk > 0 && (!dk || !dv))
    return attn_set_error(ATTN_EINVAL, "%s: %s is NULL", who, !dk ? "dk" : "dv");
  return ATTN_OK;
}

attn_status attn_sdpa_validate(const attn_sdpa_desc *d, const float *q, const float *k,
                               const float *v, attn_sdpa_resolved *r) {
  if (!d || !r) return attn_set_error(ATTN_EINVAL, "sdpa: NULL descriptor");
  if (d->B < 1 || d->Hq < 1 || d->Hkv < 1 || d->D < 1 || d->Dv < 1 || d->Lq < 0 || d->Lk < 0)
    return attn_set_error(ATTN_EINVAL,
                          "sdpa: bad sizes B=%lld Hq=%lld Hkv=%lld Lq=%lld Lk=%lld D=%lld "
                          "Dv=%lld (B, H, D, Dv must be >= 1, Lq, Lk >= 0)",
                          (long long)d->B, (long long)d->Hq, (long long)d->Hkv, (long long)d->Lq,
                          (long long)d->Lk, (long long)d->D, (long long)d->Dv);
  int64_t heads;
  if (attn_ck_mul(d->B, d->Hq, &heads))
    return attn_set_error(ATTN_EINVAL, "sdpa: B=%lld times Hq=%lld is too large", (long long)d->B,
                          (long long)d->Hq);
  if (d->Hq % d->Hkv != 0)
    return attn_set_error(ATTN_EINVAL, "sdpa: Hq=%lld is not a multiple of Hkv=%lld",
                          (long long)d->Hq, (long long)d->Hkv);
  if ((!q && d->Lq > 0) || (!k && d->Lk > 0) || (!v && d->Lk > 0))
    return attn_set_error(ATTN_EINVAL, "sdpa: %s is NULL", !q && d->Lq > 0 ? "q" : !k ? "k" : "v");
  if (d->window_left < -1 || d->window_right < -1)
    return attn_set_error(ATTN_EINVAL, "sdpa: window (%lld, %lld): each must be >= -1",
                          (long long)d->window_left, (long long)d->window_right);
  if (d->has_scale && !isfinite(d->scale))
    return attn_set_error(ATTN_EINVAL, "sdpa: scale %g is not finite", (double)d->scale);
  int64_t scores;
  if (__builtin_mul_overflow(d->Lq, d->Lk, &scores) || scores > INT64_MAX / 8)
    return attn_set_error(ATTN_EINVAL, "sdpa: Lq*Lk too large");
  attn_status st;
  if ((st = resolve_strides("q", d->q_stride, d->B, d->Hq, d->Lq, d->D, r->q)) ||
      (st = resolve_strides("k", d->k_stride, d->B, d->Hkv, d->Lk, d->D, r->k)) ||
      (st = resolve_strides("v", d->v_stride, d->B, d->Hkv, d->Lk, d->Dv, r->v)) ||
      (st = resolve_strides("out", d->o_stride, d->B, d->Hq, d->Lq, d->Dv, r->o)))
    return st;
  for (int i = 0; i < 4; i++)
    if ((d->bool_mask && d->bool_mask_stride[i] < 0) || (d->add_mask && d->add_mask_stride[i] < 0))
      return attn_set_error(ATTN_EINVAL, "sdpa: %s mask stride[%d] is negative",
                            d->bool_mask && d->bool_mask_stride[i] < 0 ? "bool" : "additive", i);
  if (d->key_lens)
    for (int64_t b = 0; b < d->B; b++)
      if (d->key_lens[b] < 0 || d->key_lens[b] > d->Lk)
        return attn_set_error(ATTN_EINVAL, "sdpa: key_lens[%lld] = %d is outside [0, Lk=%lld]",
                              (long long)b, (int)d->key_lens[b], (long long)d->Lk);
  if (d->prefix_lens) {
    if (!d->causal)
      return attn_set_error(ATTN_EINVAL, "sdpa: prefix_lens (prefix-LM) needs causal: the prefix "
                                         "is seen by every query, the rest causally");
    for (int64_t b = 0; b < d->B; b++)
      if (d->prefix_lens[b] < 0 || d->prefix_lens[b] > d->Lk)
        return attn_set_error(ATTN_EINVAL, "sdpa: prefix_lens[%lld] = %d is outside [0, Lk=%lld]",
                              (long long)b, (int)d->prefix_lens[b], (long long)d->Lk);
  }
  if ((st = validate_variants(d)) || (st = attn_stage_validate(d)) ||
      (st = attn_sdpa_dropout_validate(d)))
    return st;
  r->scale = d->has_scale ? d->scale : (float)(1.0 / sqrt((double)d->D));
  r->group = d->Hq / d->Hkv;
  return ATTN_OK;
}
