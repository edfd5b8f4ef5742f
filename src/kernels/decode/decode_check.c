/* attn_decode_forward's checks (attn/decode.h): the descriptor, the view
 * and its page table, each refusal naming the field, before any cache row
 * is read. Every page a sequence's tokens need is checked against the
 * pool, and every size product against overflow, so that the loop's
 * addresses (decode.c) stay inside the view's memory. */
#include <math.h>

#include "attn/tensor.h"
#include "kernels/decode/decode_internal.h"
#include "kernels/sdpa/sdpa_stage.h"

static int is_cache_dtype(int t) {
  return t == ATTN_F32 || t == ATTN_F16 || t == ATTN_BF16 || t == ATTN_I8;
}

static const char *dname(int t) {
  const char *n = (unsigned)t < ATTN_DTYPE_COUNT ? attn_dtype_name((attn_dtype)t) : NULL;
  return n ? n : "?";
}

static attn_status check_desc(const attn_decode_desc *d) {
  if (d->B < 1 || d->Hq < 1 || d->Hkv < 1 || d->D < 1 || d->Dv < 1 || d->Lq < 1)
    return attn_set_error(ATTN_EINVAL,
                          "decode: sizes B %lld, Hq %lld, Hkv %lld, Lq %lld, D %lld, Dv %lld "
                          "must be >= 1",
                          (long long)d->B, (long long)d->Hq, (long long)d->Hkv, (long long)d->Lq,
                          (long long)d->D, (long long)d->Dv);
  int64_t n;
  if (attn_ck_mul(d->B, d->Hq, &n) || attn_ck_mul(n, d->Lq, &n) ||
      attn_ck_mul(n, d->D > d->Dv ? d->D : d->Dv, &n) || attn_ck_mul(n, 4, &n))
    return attn_set_error(ATTN_EINVAL, "decode: B %lld x Hq %lld x Lq %lld x D overflows",
                          (long long)d->B, (long long)d->Hq, (long long)d->Lq);
  if (d->Hq % d->Hkv)
    return attn_set_error(ATTN_EINVAL, "decode: Hq %lld is not a multiple of Hkv %lld",
                          (long long)d->Hq, (long long)d->Hkv);
  if (d->Lq > ATTN_DECODE_MAX_LQ)
    return attn_set_error(ATTN_EUNSUPPORTED,
                          "decode: Lq %lld new queries (at most %d; longer prompts: "
                          "attn_sdpa_forward)",
                          (long long)d->Lq, ATTN_DECODE_MAX_LQ);
  if (!is_cache_dtype(d->kv_dtype))
    return attn_set_error(ATTN_EINVAL,
                          "decode: kv_dtype %d (%s) is no cache type (F32, F16, "
                          "BF16, I8)",
                          d->kv_dtype, dname(d->kv_dtype));
  if (d->has_scale && !isfinite(d->scale))
    return attn_set_error(ATTN_EINVAL, "decode: scale %g is not finite", (double)d->scale);
  if (d->window_left < -1)
    return attn_set_error(ATTN_EINVAL, "decode: window_left %lld (-1 = unbounded, or >= 0)",
                          (long long)d->window_left);
  attn_sdpa_desc mods; /* the score modifiers: the SDPA stage's units check them */
  attn_stage_decode_mods(d, &mods);
  return attn_stage_validate(&mods);
}

/* elements of one cache tensor: n_blocks x Hkv x rows x w, and its scales'
 * count n_blocks x Hkv x rows; 1 on overflow */
static int tensor_fits(int64_t n_blocks, int64_t Hkv, int64_t rows, int64_t w, int elt) {
  int64_t x;
  return !(attn_ck_mul(n_blocks, Hkv, &x) || attn_ck_mul(x, rows, &x) || attn_ck_mul(x, w, &x) ||
           attn_ck_mul(x, elt, &x));
}

static attn_status check_lens_contiguous(const attn_kv_view *kv) {
  if (kv->capacity < 1)
    return attn_set_error(ATTN_EINVAL,
                          "kv view: capacity %lld (contiguous, page_size 0) must "
                          "be >= 1",
                          (long long)kv->capacity);
  const int elt = (int)attn_dtype_size((attn_dtype)kv->dtype);
  if (!tensor_fits(kv->B, kv->Hkv, kv->capacity, kv->D > kv->Dv ? kv->D : kv->Dv, elt))
    return attn_set_error(ATTN_EINVAL, "kv view: B %lld x Hkv %lld x capacity %lld rows overflow",
                          (long long)kv->B, (long long)kv->Hkv, (long long)kv->capacity);
  for (int64_t b = 0; b < kv->B; b++)
    if (kv->seq_lens[b] < 0 || kv->seq_lens[b] > kv->capacity)
      return attn_set_error(ATTN_EINVAL, "kv view: seq_lens[%lld] = %d outside 0..capacity %lld",
                            (long long)b, kv->seq_lens[b], (long long)kv->capacity);
  return ATTN_OK;
}

static attn_status check_pages(const attn_kv_view *kv) {
  if (kv->page_size < 0)
    return attn_set_error(ATTN_EINVAL, "kv view: page_size %lld (0 = contiguous, or >= 1)",
                          (long long)kv->page_size);
  if (kv->num_pages < 1)
    return attn_set_error(ATTN_EINVAL, "kv view: num_pages %lld (paged) must be >= 1",
                          (long long)kv->num_pages);
  if (!kv->block_table)
    return attn_set_error(ATTN_EINVAL, "kv view: block_table is NULL (paged, page_size %lld)",
                          (long long)kv->page_size);
  if (kv->block_table_stride < 1)
    return attn_set_error(ATTN_EINVAL, "kv view: block_table_stride %lld must be >= 1",
                          (long long)kv->block_table_stride);
  const int elt = (int)attn_dtype_size((attn_dtype)kv->dtype);
  int64_t room, bt;
  if (!tensor_fits(kv->num_pages, kv->Hkv, kv->page_size, kv->D > kv->Dv ? kv->D : kv->Dv, elt) ||
      attn_ck_mul(kv->block_table_stride, kv->page_size, &room) ||
      attn_ck_mul(kv->B, kv->block_table_stride, &bt))
    return attn_set_error(ATTN_EINVAL,
                          "kv view: num_pages %lld x page_size %lld (or the "
                          "block table) overflow",
                          (long long)kv->num_pages, (long long)kv->page_size);
  for (int64_t b = 0; b < kv->B; b++) {
    const int64_t len = kv->seq_lens[b];
    if (len < 0)
      return attn_set_error(ATTN_EINVAL, "kv view: seq_lens[%lld] = %lld is negative", (long long)b,
                            (long long)len);
    if (len > room)
      return attn_set_error(ATTN_EINVAL,
                            "kv view: seq_lens[%lld] = %lld is longer than its pages "
                            "(block_table_stride %lld x page_size %lld = %lld tokens)",
                            (long long)b, (long long)len, (long long)kv->block_table_stride,
                            (long long)kv->page_size, (long long)room);
    const int32_t *row = kv->block_table + b * kv->block_table_stride;
    for (int64_t p = 0; p < attn_ceil_div(len, kv->page_size); p++)
      if (row[p] < 0 || row[p] >= kv->num_pages)
        return attn_set_error(ATTN_EINVAL,
                              "kv view: block_table[%lld][%lld] = %d is outside the pool of "
                              "num_pages %lld (sequence %lld needs it for its %lld tokens)",
                              (long long)b, (long long)p, row[p], (long long)kv->num_pages,
                              (long long)b, (long long)len);
  }
  return ATTN_OK;
}

attn_status attn_decode_check(const attn_decode_desc *d, const attn_kv_view *kv, const float *q,
                              const float *out) {
  if (!d || !kv || !q || !out)
    return attn_set_error(ATTN_EINVAL, "decode: %s is NULL",
                          !d    ? "desc"
                          : !kv ? "kv view"
                          : !q  ? "q"
                                : "out");
  attn_status s = check_desc(d);
  if (s) return s;
  if (!is_cache_dtype(kv->dtype))
    return attn_set_error(ATTN_EINVAL,
                          "kv view: dtype %d (%s) is no cache type (F32, F16, BF16, "
                          "I8)",
                          kv->dtype, dname(kv->dtype));
  if (kv->dtype != d->kv_dtype)
    return attn_set_error(ATTN_EINVAL, "kv view: dtype %s, but the call says kv_dtype %s",
                          dname(kv->dtype), dname(d->kv_dtype));
  if (kv->B != d->B || kv->Hkv != d->Hkv || kv->D != d->D || kv->Dv != d->Dv)
    return attn_set_error(ATTN_EINVAL,
                          "kv view: B %lld, Hkv %lld, D %lld, Dv %lld, but the call says B %lld, "
                          "Hkv %lld, D %lld, Dv %lld",
                          (long long)kv->B, (long long)kv->Hkv, (long long)kv->D, (long long)kv->Dv,
                          (long long)d->B, (long long)d->Hkv, (long long)d->D, (long long)d->Dv);
  if (!kv->k || !kv->v || !kv->seq_lens)
    return attn_set_error(ATTN_EINVAL, "kv view: %s is NULL",
                          !kv->k   ? "k"
                          : !kv->v ? "v"
                                   : "seq_lens");
  if (kv->dtype == ATTN_I8 && (!kv->k_scale || !kv->v_scale))
    return attn_set_error(ATTN_EINVAL,
                          "kv view: an I8 cache without %s (one scale per token "
                          "and head)",
                          !kv->k_scale ? "k_scale" : "v_scale");
  if (kv->layout != 0 && kv->layout != ATTN_KV_ROWS && kv->layout != ATTN_KV_I8_TILED &&
      kv->layout != ATTN_KV_K_TILED)
    return attn_set_error(ATTN_EINVAL,
                          "kv view: layout %d (0 or ATTN_KV_ROWS %d, ATTN_KV_I8_TILED %d, "
                          "ATTN_KV_K_TILED %d)",
                          kv->layout, ATTN_KV_ROWS, ATTN_KV_I8_TILED, ATTN_KV_K_TILED);
  if (kv->layout == ATTN_KV_K_TILED) {
    const int64_t P = kv->page_size ? kv->page_size : kv->capacity;
    if ((kv->dtype != ATTN_F16 && kv->dtype != ATTN_BF16) || P % 16)
      return attn_set_error(ATTN_EINVAL,
                            "kv view: the K-tiled layout needs dtype F16 or BF16 and %s %% 16 == "
                            "0 (dtype %s, %s %lld)",
                            kv->page_size ? "page_size" : "capacity", dname(kv->dtype),
                            kv->page_size ? "page_size" : "capacity", (long long)P);
  }
  if (kv->layout == ATTN_KV_I8_TILED) {
    const int64_t P = kv->page_size ? kv->page_size : kv->capacity;
    if (kv->dtype != ATTN_I8 || kv->D % 4 || kv->Dv % 16 || P % 16)
      return attn_set_error(ATTN_EINVAL,
                            "kv view: the int8 tiled layout needs dtype I8, D %% 4 == 0, Dv %% 16 "
                            "== 0 and %s %% 16 == 0 (dtype %s, D %lld, Dv %lld, %s %lld)",
                            kv->page_size ? "page_size" : "capacity", dname(kv->dtype),
                            (long long)kv->D, (long long)kv->Dv,
                            kv->page_size ? "page_size" : "capacity", (long long)P);
  }
  return kv->page_size == 0 ? check_lens_contiguous(kv) : check_pages(kv);
}
