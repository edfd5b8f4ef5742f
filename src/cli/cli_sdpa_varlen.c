/* `attn sdpa` on packed variable-length files (tensors cu_seqlens_q,
 * cu_seqlens_k; docs/VARIANTS.md): FlashAttention's flash_attn_varlen_func
 * layout in, out and lse [Hq, total_q] (FA's softmax_lse) out. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli_sdpa_align.h"

/* cu_seqlens (I32 or I64 [B+1], B >= 1) as int32 (*out malloc'ed). */
static attn_status read_cu(const attn_st *in, const char *name, int64_t n, int32_t **out) {
  *out = NULL;
  const attn_tensor *t = attn_st_get(in, name);
  if (!t || (t->dtype != ATTN_I32 && t->dtype != ATTN_I64) || t->ndim != 1 || t->shape[0] < 2 ||
      (n > 0 && t->shape[0] != n))
    return attn_set_error(ATTN_EINVAL, "tensor '%s' is %s, expected I32 or I64 [B+1]%s", name,
                          t ? attn_dtype_name(t->dtype) : "missing",
                          n > 0 ? " like cu_seqlens_q" : " with B >= 1");
  int32_t *x = malloc((size_t)t->shape[0] * sizeof *x);
  if (!x) return attn_set_error(ATTN_ENOMEM, "%s: out of memory", name);
  for (int64_t i = 0; i < t->shape[0]; i++) {
    int64_t v = t->dtype == ATTN_I32 ? ((const int32_t *)t->data)[i] : ((const int64_t *)t->data)[i];
    if (v < INT32_MIN || v > INT32_MAX) {
      free(x);
      return attn_set_error(ATTN_EINVAL, "tensor '%s'[%lld] = %lld does not fit in int32", name,
                            (long long)i, (long long)v);
    }
    x[i] = (int32_t)v;
  }
  *out = x;
  return ATTN_OK;
}

static int64_t max_len(const int32_t *cu, int64_t B) {
  int64_t m = 0;
  for (int64_t s = 0; s < B; s++)
    if ((int64_t)cu[s + 1] - cu[s] > m) m = (int64_t)cu[s + 1] - cu[s];
  return m;
}

static float *falloc(int64_t n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(float)); }

attn_status cli_sdpa_varlen(const attn_st *in, const char *path, attn_sdpa_path be, attn_dtype qkv,
                            attn_st **res) {
  static const char *const refused[] = {"mask", "key_lens", "rel_bias", "shaw_k", "shaw_v",
                                        "block_mask", "q_offset", "alibi", "rope", "block_size"};
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
    if (attn_st_get(in, refused[i]) || attn_st_meta(in, refused[i]))
      return attn_set_error(ATTN_EINVAL, "%s: '%s' is not supported with cu_seqlens (packed "
                            "variable-length input)", path, refused[i]);
  const attn_tensor *q, *k, *v, *dout, *sl;
  attn_status st;
  if ((st = attn_st_expect(in, "q", qkv, 3, NULL, 1, &q))) return st;
  const int64_t tq = q->shape[0], Hq = q->shape[1], D = q->shape[2];
  const int64_t ks[3] = {-1, -1, D};
  if ((st = attn_st_expect(in, "k", qkv, 3, ks, 1, &k))) return st;
  const int64_t tk = k->shape[0], Hkv = k->shape[1], vs[3] = {tk, Hkv, -1};
  if ((st = attn_st_expect(in, "v", qkv, 3, vs, 1, &v))) return st;
  const int64_t Dv = v->shape[2], os[3] = {tq, Hq, Dv};
  if ((st = attn_st_expect(in, "dout", ATTN_F32, 3, os, 0, &dout))) return st;
  int32_t *cq = NULL, *ck = NULL;
  int64_t *qo = NULL;
  int32_t *plens = NULL;
  float *out = NULL, *lse = NULL, *lfa = NULL, *dq = NULL, *dk = NULL, *dv = NULL, *dsl = NULL;
  float *dsk = NULL;
  if ((st = read_cu(in, "cu_seqlens_q", 0, &cq)) ||
      (st = read_cu(in, "cu_seqlens_k", attn_st_get(in, "cu_seqlens_q")->shape[0], &ck)))
    goto done;
  const int64_t B = attn_st_get(in, "cu_seqlens_q")->shape[0] - 1;
  attn_sdpa_desc d;
  attn_sdpa_desc_init(&d, B, Hq, Hkv, max_len(cq, B), max_len(ck, B), D, Dv);
  if ((st = cli_sdpa_read_metadata(in, path, &d)) || (st = cli_sdpa_read_capsink(in, path, &d)) ||
      (st = cli_sdpa_read_q_offsets(in, B, &qo)))
    goto done;
  d.q_offsets = qo;
  const attn_tensor *pl = attn_st_get(in, "prefix_lens"); /* prefix-LM, per sequence */
  if (pl && (st = cli_sdpa_read_lens(pl, "prefix_lens", B, d.Lk, &plens))) goto done;
  d.prefix_lens = plens;
  sl = attn_st_get(in, "alibi_slopes");
  const int64_t sls[2] = {B, Hq};
  const int per_batch = sl && sl->ndim == 2;
  if ((st = attn_st_expect(in, "alibi_slopes", ATTN_F32, per_batch ? 2 : 1, sls + !per_batch, 0,
                           &sl)))
    goto done;
  d.alibi_slopes = sl ? sl->data : NULL;
  d.alibi_slopes_bstride = per_batch ? Hq : 0;
  const attn_sdpa_varlen vl = {cq, ck, tq, tk};
  if (!(out = falloc(tq * Hq * Dv)) || !(lse = falloc(tq * Hq)) || !(lfa = falloc(tq * Hq))) {
    st = attn_set_error(ATTN_ENOMEM, "%s: out of memory", path);
    goto done;
  }
  /* q, k, v of dtype qkv on path be (F32: auto, math or flash; F16 / BF16: that kernel) */
  attn_sdpa_args a = {.dtype = qkv,
                      .path = be,
                      .varlen = &vl,
                      .q = q->data,
                      .k = k->data,
                      .v = v->data,
                      .out = out,
                      .lse = lse};
  if ((st = attn_sdpa_forward(&d, &a))) goto done;
  for (int64_t s = 0; s < B; s++) { /* per-sequence [Hq, len] blocks -> [Hq, total_q] */
    const int64_t len = cq[s + 1] - cq[s];
    for (int64_t h = 0; h < Hq; h++)
      for (int64_t i = 0; i < len; i++)
        lfa[h * tq + cq[s] + i] = lse[Hq * cq[s] + h * len + i];
  }
  const int64_t ls[2] = {Hq, tq};
  if ((st = attn_st_new(res)) || (st = attn_st_add_f32(*res, "out", 3, os, out)) ||
      (st = attn_st_add_f32(*res, "lse", 2, ls, lfa)))
    goto done;
  if (dout) {
    if (!(dq = falloc(tq * Hq * D)) || !(dk = falloc(tk * Hkv * D)) ||
        !(dv = falloc(tk * Hkv * Dv)) || (sl && !(dsl = falloc(per_batch ? B * Hq : Hq))) ||
        (d.sinks && !(dsk = falloc(Hq)))) {
      st = attn_set_error(ATTN_ENOMEM, "%s: out of memory", path);
      goto done;
    }
    d.alibi_slopes_grad = dsl;
    d.sinks_grad = dsk;
    a.dout = dout->data, a.dq = dq, a.dk = dk, a.dv = dv;
    if ((st = attn_sdpa_backward(&d, &a)) || (st = attn_st_add_f32(*res, "dq", 3, q->shape, dq)) ||
        (st = attn_st_add_f32(*res, "dk", 3, k->shape, dk)) ||
        (st = attn_st_add_f32(*res, "dv", 3, v->shape, dv)) ||
        (dsl && (st = attn_st_add_f32(*res, "dalibi_slopes", sl->ndim, sl->shape, dsl))) ||
        (dsk && (st = attn_st_add_f32(*res, "dsinks", 1, &Hq, dsk))))
      goto done;
  }
done:
  free(cq), free(ck), free(qo), free(out), free(lse), free(lfa), free(dq), free(dk), free(dv);
  free(dsl), free(dsk), free(plens);
  return st;
}
