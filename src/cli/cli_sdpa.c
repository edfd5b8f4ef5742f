/* attn sdpa IN.safetensors OUT.safetensors [--backend B] [--threads N]:
 * scaled dot-product attention (and its gradients) on tensors from a file. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "cli/cli_sdpa_align.h"
#include "cli/commands.h"
#include "core/checked.h"
#include "core/parse_bool.h"

static const char usage_text[] =
    "usage: attn sdpa IN.safetensors OUT.safetensors [--backend math|flash|auto] [--path P]\n"
    "                 [--threads N]\n"
    "\n"
    "Scaled dot-product attention softmax(q kT * scale + mask) v, forward and backward.\n"
    "IN holds (F32, F16 or BF16 unless said otherwise; F16 / BF16 q, k, v of one dtype run\n"
    "the fp16 / bf16 flash kernels with --backend flash|auto and no position variant,\n"
    "else every F16 / BF16 tensor is widened to F32 exactly; outputs are always F32):\n"
    "  q [B,Hq,Lq,D]  k [B,Hkv,Lk,D]  v [B,Hkv,Lk,Dv]   (Hq a multiple of Hkv)\n"
    "  mask      optional, BOOL (true = may attend) or F32 (added to the logits; -inf\n"
    "            disallows), broadcastable to [B,Hq,Lq,Lk] with numpy rules\n"
    "  key_lens  optional, I32 or I64 [B]: keys j >= key_lens[b] are padding\n"
    "  prefix_lens optional, I32 or I64 [B], with causal: keys j < prefix_lens[b] are seen by\n"
    "            every query of batch b (prefix-LM: the prefix bidirectional, the rest causal)\n"
    "  dout      optional, [B,Hq,Lq,Dv]: also compute the gradients\n"
    "IN's __metadata__ may hold causal (or is_causal, PyTorch 2's name), window_left, "
    "window_right\n"
    "(or window_size \"(left, right)\", FlashAttention's name; -1 = unbounded:\n"
    "key j is allowed for query i iff i-left <= j <= i+right) and scale (default 1/sqrt(D));\n"
    "any other key but format and the variant keys below is an error. Booleans are\n"
    "true/false (any case: PyTorch's True/False), 1/0, yes/no or on/off.\n"
    "OUT gets out [B,Hq,Lq,Dv] and lse [B,Hq,Lq]; with dout also dq, dk, dv.\n"
    "A query row with no allowed key gets out 0, lse -inf and zero gradient.\n"
    "Softcap and sinks: metadata softcap (or logit_softcap, ggml's name; > 0: logit =\n"
    "softcap*tanh(scale q.k/softcap), then\n"
    "masks and ALiBi); tensor sinks F32 [Hq] (a per-head logit in every row's softmax\n"
    "denominator); with dout OUT also gets dsinks [Hq].\n"
    "Variants (docs/VARIANTS.md): tensors alibi_slopes [Hq] or [B,Hq], rel_bias [Hq,buckets] "
    "(T5),\n"
    "shaw_k [2M-1,D], shaw_v [2M-1,Dv], block_mask BOOL/U8 [ceil((q_offset+Lq)/bs),ceil(Lk/bs)],\n"
    "q_offsets I32/I64 [B] (batch b's queries at i + q_offsets[b]; overrides q_offset);\n"
    "metadata q_offset (any sign: Lk-Lq = bottom-right), alibi (true = standard slopes),\n"
    "rel_max_distance, rel_bidirectional, block_size, rope (interleaved|half: q and k rotated),\n"
    "rope_theta (default 10000), rope_dim (partial rotary: only the first rope_dim dims of each\n"
    "head; default D).\n"
    "With dout OUT also gets dalibi_slopes, drel_bias, dshaw_k, dshaw_v for the tables given.\n"
    "Packed variable-length input (FlashAttention's varlen layout): q [total_q,Hq,D],\n"
    "k [total_k,Hkv,D], v [total_k,Hkv,Dv], cu_seqlens_q, cu_seqlens_k I32/I64 [B+1]; each\n"
    "sequence aligned bottom-right (or q_offsets [B]); alibi_slopes, sinks and softcap as above;\n"
    "OUT: out [total_q,Hq,Dv], lse [Hq,total_q] (and the gradients with dout);\n"
    "F16 / BF16 q, k, v run the varlen fp16 / bf16 flash kernels as above.\n"
    "  --backend  math (reference), flash (fused) or auto (flash where it can; default)\n"
    "  --path     the same, or a low-precision kernel's path for F16 / BF16 q, k, v:\n"
    "             portable, simd, amx or f32 (bf16 widened per block; an error where the\n"
    "             CPU lacks it or the file has a variant that kernel lacks)\n"
    "  --threads  number of threads (default: all cores)\n";

static const char *const tensor_names[] = {"q",
                                           "k",
                                           "v",
                                           "mask",
                                           "key_lens",
                                           "dout",
                                           "alibi_slopes",
                                           "rel_bias",
                                           "shaw_k",
                                           "shaw_v",
                                           "block_mask",
                                           "sinks",
                                           "q_offsets",
                                           "cu_seqlens_q",
                                           "cu_seqlens_k",
                                           "prefix_lens"};
/* "format" is what safetensors tooling writes ("pt"); it is accepted and ignored */
static const char *const meta_keys[] = {
    "causal",     "is_causal", "window_left",      "window_right",      "scale",      "format",
    "q_offset",   "alibi",     "rel_max_distance", "rel_bidirectional", "block_size", "rope",
    "rope_theta", "rope_dim",  "softcap",          "logit_softcap",     "window_size"};

static int in_list(const char *s, const char *const *list, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(s, list[i])) return 1;
  return 0;
}

/* A boolean metadata key (absent: *out unchanged). */
static attn_status meta_bool(const attn_st *in, const char *path, const char *key, int *out) {
  const char *s = attn_st_meta(in, key);
  if (s && !attn_parse_bool(s, out))
    return attn_set_error(ATTN_EINVAL, "%s: metadata %s = '%.100s', expected a boolean (%s)", path,
                          key, s, ATTN_BOOL_SPELLINGS);
  return ATTN_OK;
}

/* Reads the metadata of in into d. Unknown keys and bad values are errors. */
attn_status cli_sdpa_read_metadata(const attn_st *in, const char *path, attn_sdpa_desc *d) {
  for (int i = 0; i < attn_st_meta_count(in); i++) {
    const char *key = attn_st_meta_key(in, i);
    if (!in_list(key, meta_keys, sizeof meta_keys / sizeof meta_keys[0]))
      return attn_set_error(ATTN_EINVAL,
                            "%s: unknown metadata key '%.100s' (expected causal, window_left, "
                            "window_right, scale, or a variant key of docs/VARIANTS.md)",
                            path, key);
  }
  const char *s, *c = attn_st_meta(in, "causal"), *ic = attn_st_meta(in, "is_causal");
  int causal = 0, is_causal = 0;
  attn_status st;
  if ((st = meta_bool(in, path, "causal", &causal)) || (st = meta_bool(in, path, "is_causal", &is_causal)))
    return st;
  if (c && ic && causal != is_causal)
    return attn_set_error(ATTN_EINVAL, "%s: metadata causal = '%.100s' and is_causal = '%.100s' disagree",
                          path, c, ic);
  if (c || ic) d->causal = causal || is_causal;
  const char *wkeys[2] = {"window_left", "window_right"};
  int64_t *wvals[2] = {&d->window_left, &d->window_right};
  for (int w = 0; w < 2; w++)
    if ((s = attn_st_meta(in, wkeys[w])) && (!cli_parse_i64(s, wvals[w]) || *wvals[w] < -1))
      return attn_set_error(
          ATTN_EINVAL, "%s: metadata %s = '%.100s', expected an integer >= -1 (-1 = unbounded)",
          path, wkeys[w], s);
  if ((s = attn_st_meta(in, "window_size"))) { /* FlashAttention's (left, right) */
    if (attn_st_meta(in, "window_left") || attn_st_meta(in, "window_right"))
      return attn_set_error(ATTN_EINVAL,
                            "%s: metadata window_size and window_left/window_right "
                            "both given (one spelling of the window)",
                            path);
    if (cli_parse_window_size(s, &d->window_left, &d->window_right))
      return attn_set_error(ATTN_EINVAL,
                            "%s: metadata window_size = '%.100s', expected (left, right): two "
                            "integers >= -1 (-1 = unbounded)",
                            path, s);
  }
  if ((s = attn_st_meta(in, "scale"))) {
    char *end;
    double x = strtod(s, &end);
    if (end == s || *end || !isfinite(x) || !isfinite((float)x))
      return attn_set_error(ATTN_EINVAL, "%s: metadata scale = '%.100s', expected a finite number",
                            path, s);
    d->has_scale = 1;
    d->scale = (float)x;
  }
  return ATTN_OK;
}

static void shape_str(char *buf, size_t n, int ndim, const int64_t *shape) {
  size_t used = (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < ndim && used < n; i++)
    used += (size_t)snprintf(buf + used, n - used, "%s%lld", i ? ", " : "", (long long)shape[i]);
  if (used < n) snprintf(buf + used, n - used, "]");
}

/* Strides (b, h, i, j) of mask m broadcast with numpy rules to full [B,Hq,Lq,Lk]. */
static attn_status mask_strides(const attn_tensor *m, const int64_t full[4], int64_t st[4]) {
  char a[128], b[128];
  shape_str(a, sizeof a, m->ndim, m->shape);
  shape_str(b, sizeof b, 4, full);
  if (m->ndim > 4)
    return attn_set_error(ATTN_EINVAL,
                          "tensor 'mask' has shape %s: rank > 4, cannot broadcast to %s", a, b);
  /* an empty mask (some dim 0) has no elements to step over: its strides stay
   * 0; otherwise every partial product is at most its element count */
  int64_t n, inner = 1;
  if (attn_ck_numel(m->ndim, m->shape, &n))
    return attn_set_error(ATTN_EINVAL, "tensor 'mask' has shape %s: too many elements", a);
  for (int x = 3; x >= 0; x--) {
    const int sd = x - (4 - m->ndim); /* right-aligned source dim */
    st[x] = 0;
    if (sd < 0) continue;
    if (m->shape[sd] != 1 && m->shape[sd] != full[x])
      return attn_set_error(ATTN_EINVAL, "tensor 'mask' has shape %s, not broadcastable to %s", a,
                            b);
    if (n == 0) continue;
    if (m->shape[sd] != 1) st[x] = inner;
    inner *= m->shape[sd];
  }
  return ATTN_OK;
}

/* key_lens or prefix_lens (I32 or I64 [B]) as int32 values in [0, Lk]; *out malloc'ed */
attn_status cli_sdpa_read_lens(const attn_tensor *t, const char *name, int64_t B, int64_t Lk,
                               int32_t **out) {
  *out = NULL;
  if ((t->dtype != ATTN_I32 && t->dtype != ATTN_I64) || t->ndim != 1 || t->shape[0] != B) {
    char a[128];
    shape_str(a, sizeof a, t->ndim, t->shape);
    return attn_set_error(ATTN_EINVAL, "tensor '%s' is %s %s, expected I32 or I64 [%lld]", name,
                          attn_dtype_name(t->dtype), a, (long long)B);
  }
  int32_t *kl = malloc((size_t)B * sizeof *kl);
  if (!kl) return attn_set_error(ATTN_ENOMEM, "%s: out of memory", name);
  for (int64_t b = 0; b < B; b++) {
    int64_t x =
        t->dtype == ATTN_I32 ? ((const int32_t *)t->data)[b] : ((const int64_t *)t->data)[b];
    if (x < 0 || x > Lk) {
      free(kl);
      return attn_set_error(ATTN_EINVAL, "tensor '%s'[%lld] = %lld is outside [0, Lk=%lld]", name,
                            (long long)b, (long long)x, (long long)Lk);
    }
    kl[b] = (int32_t)x;
  }
  *out = kl;
  return ATTN_OK;
}

/* a zeroed f32 buffer of a*b*c*d elements, or NULL with an error set */
static float *alloc4(int64_t a, int64_t b, int64_t c, int64_t d, const char *name) {
  const int64_t dims[4] = {a, b, c, d};
  int64_t n;
  size_t bytes;
  if (attn_ck_numel(4, dims, &n) || attn_ck_bytes(n, sizeof(float), &bytes)) {
    attn_set_error(ATTN_ENOMEM, "%s [%lld,%lld,%lld,%lld] is too large", name, (long long)a,
                   (long long)b, (long long)c, (long long)d);
    return NULL;
  }
  float *p = calloc((size_t)(n > 0 ? n : 1), sizeof(float));
  if (!p) attn_set_error(ATTN_ENOMEM, "%s: cannot allocate %lld floats", name, (long long)n);
  return p;
}

typedef struct {
  float *out, *lse, *dq, *dk, *dv;
  int32_t *key_lens, *prefix_lens;
  attn_st *in, *res;
  float *alibi, *qr, *kr;    /* standard slopes; RoPE-rotated q and k */
  float *dsinks;                    /* [Hq] */
  float *drel, *dshk, *dshv, *dsl; /* table gradients */
  int64_t *q_offsets;               /* per-batch alignment */
  int rope;                  /* q and k rotated */
  attn_rope_layout rope_layout;
  float rope_theta;
  int64_t rope_dim; /* rotated dims of each head (partial rotary); D when absent */
} sdpa_job;

static void job_free(sdpa_job *j) {
  free(j->out), free(j->lse), free(j->dq), free(j->dk), free(j->dv), free(j->key_lens);
  free(j->prefix_lens);
  free(j->alibi), free(j->qr), free(j->kr), free(j->drel), free(j->dshk), free(j->dshv);
  free(j->dsinks);
  free(j->dsl), free(j->q_offsets);
  attn_st_free(j->in);
  attn_st_free(j->res);
}

/* integer metadata key (absent: *out unchanged); below lo is an error */
static attn_status meta_i64(const attn_st *in, const char *path, const char *key, int64_t lo,
                            int64_t *out) {
  const char *s = attn_st_meta(in, key);
  if (s && (!cli_parse_i64(s, out) || *out < lo))
    return attn_set_error(ATTN_EINVAL, "%s: metadata %s = '%.100s', expected an integer >= %lld",
                          path, key, s, (long long)lo);
  return ATTN_OK;
}

/* Metadata softcap and tensor sinks [Hq] into d (cli_sdpa_align.h). */
attn_status cli_sdpa_read_capsink(const attn_st *in, const char *path, attn_sdpa_desc *d) {
  const char *s = attn_st_meta(in, "softcap"), *ls = attn_st_meta(in, "logit_softcap");
  if (s && ls && strcmp(s, ls))
    return attn_set_error(ATTN_EINVAL,
                          "%s: metadata softcap = '%.100s' and logit_softcap = '%.100s' (ggml's "
                          "name) disagree",
                          path, s, ls);
  if (!s) s = ls;
  if (s) {
    char *end;
    double x = strtod(s, &end);
    if (end == s || *end || !(x > 0.0) || !isfinite((float)x))
      return attn_set_error(ATTN_EINVAL,
                            "%s: metadata softcap = '%.100s', expected a finite number > 0", path, s);
    d->softcap = (float)x;
  }
  const attn_tensor *t;
  const int64_t sh[1] = {d->Hq};
  attn_status st = attn_st_expect(in, "sinks", ATTN_F32, 1, sh, 0, &t);
  if (!st && t) d->sinks = t->data;
  return st;
}

/* The variant tensors and metadata of docs/VARIANTS.md into d (and j). */
static attn_status read_variants(const attn_st *in, const char *path, sdpa_job *j,
                                 attn_sdpa_desc *d) {
  attn_status st;
  int alibi = 0, bidir = 0;
  if ((st = meta_i64(in, path, "q_offset", -(INT64_MAX / 8), &d->q_offset)) ||
      (st = meta_bool(in, path, "alibi", &alibi)) ||
      (st = meta_i64(in, path, "rel_max_distance", 1, &d->rel_max_distance)) ||
      (st = meta_bool(in, path, "rel_bidirectional", &bidir)) ||
      (st = meta_i64(in, path, "block_size", 1, &d->block_size)))
    return st;
  d->rel_bidirectional = bidir;
  if ((st = cli_sdpa_read_capsink(in, path, d))) return st;
  const attn_tensor *t;
  const int64_t sl[2] = {d->B, d->Hq};
  t = attn_st_get(in, "alibi_slopes");
  const int per_batch = t && t->ndim == 2; /* [B, Hq]: one row per batch element */
  if ((st = attn_st_expect(in, "alibi_slopes", ATTN_F32, per_batch ? 2 : 1, sl + !per_batch, 0,
                           &t)))
    return st;
  d->alibi_slopes_bstride = per_batch ? d->Hq : 0;
  if (t && alibi)
    return attn_set_error(ATTN_EINVAL, "%s: both tensor 'alibi_slopes' and metadata alibi", path);
  if (t) d->alibi_slopes = t->data;
  if (alibi) {
    if (!(j->alibi = malloc((size_t)d->Hq * sizeof(float))))
      return attn_set_error(ATTN_ENOMEM, "alibi slopes: out of memory");
    if ((st = attn_alibi_slopes(d->Hq, j->alibi))) return st;
    d->alibi_slopes = j->alibi;
  }
  const int64_t rb[2] = {d->Hq, -1};
  if ((st = attn_st_expect(in, "rel_bias", ATTN_F32, 2, rb, 0, &t))) return st;
  if (t) {
    if (!attn_st_meta(in, "rel_max_distance"))
      return attn_set_error(ATTN_EINVAL, "%s: tensor 'rel_bias' needs metadata rel_max_distance",
                            path);
    d->rel_bias = t->data;
    d->rel_buckets = t->shape[1];
  }
  const attn_tensor *sk, *sv;
  const int64_t skshape[2] = {-1, d->D}, svshape[2] = {-1, d->Dv};
  if ((st = attn_st_expect(in, "shaw_k", ATTN_F32, 2, skshape, 0, &sk)) ||
      (st = attn_st_expect(in, "shaw_v", ATTN_F32, 2, svshape, 0, &sv)))
    return st;
  if (sk && sv && sk->shape[0] != sv->shape[0])
    return attn_set_error(ATTN_EINVAL, "%s: shaw_k has %lld rows, shaw_v %lld", path,
                          (long long)sk->shape[0], (long long)sv->shape[0]);
  const attn_tensor *sh = sk ? sk : sv;
  if (sh) {
    if (sh->shape[0] % 2 == 0)
      return attn_set_error(ATTN_EINVAL, "tensor '%s' has %lld rows, expected an odd 2M-1",
                            sk ? "shaw_k" : "shaw_v", (long long)sh->shape[0]);
    d->shaw_max = (sh->shape[0] + 1) / 2;
    d->shaw_k = sk ? sk->data : NULL;
    d->shaw_v = sv ? sv->data : NULL;
  }
  if ((t = attn_st_get(in, "block_mask"))) {
    if (!attn_st_meta(in, "block_size"))
      return attn_set_error(ATTN_EINVAL, "%s: tensor 'block_mask' needs metadata block_size", path);
    const int64_t bs = d->block_size;
    int64_t qend, qo = d->q_offset;
    for (int64_t b = 0; d->q_offsets && b < d->B; b++)
      qo = b == 0 || d->q_offsets[b] > qo ? d->q_offsets[b] : qo;
    if (qo < 0)
      return attn_set_error(ATTN_EINVAL, "%s: block_mask needs query positions >= 0 (q_offset%s "
                            "= %lld)", path, d->q_offsets ? "s" : "", (long long)qo);
    if (attn_ck_add(qo, d->Lq, &qend))
      return attn_set_error(ATTN_EINVAL, "%s: metadata q_offset = %lld plus Lq = %lld is too large",
                            path, (long long)d->q_offset, (long long)d->Lq);
    const int64_t rows = attn_ceil_div(qend, bs), cols = attn_ceil_div(d->Lk, bs);
    if ((t->dtype != ATTN_BOOL && t->dtype != ATTN_U8) || t->ndim != 2 || t->shape[0] != rows ||
        t->shape[1] != cols) {
      char a[128];
      shape_str(a, sizeof a, t->ndim, t->shape);
      return attn_set_error(ATTN_EINVAL,
                            "tensor 'block_mask' is %s %s, expected BOOL or U8 "
                            "[%lld, %lld]",
                            attn_dtype_name(t->dtype), a, (long long)rows, (long long)cols);
    }
    d->block_mask = t->data;
  }
  const char *r = attn_st_meta(in, "rope");
  j->rope_theta = 10000.0f;
  if (r) {
    if ((st = attn_rope_layout_from_name(r, &j->rope_layout))) return st;
    j->rope = 1;
  }
  j->rope_dim = d->D;
  if ((st = meta_i64(in, path, "rope_dim", 2, &j->rope_dim))) return st;
  if (attn_st_meta(in, "rope_dim") && (!j->rope || j->rope_dim % 2 || j->rope_dim > d->D))
    return attn_set_error(ATTN_EINVAL, "%s: metadata rope_dim = %lld: needs rope, even, <= D = %lld",
                          path, (long long)j->rope_dim, (long long)d->D);
  if ((r = attn_st_meta(in, "rope_theta"))) {
    char *end;
    double x = strtod(r, &end);
    if (end == r || *end || !(x > 1.0) || !isfinite((float)x))
      return attn_set_error(ATTN_EINVAL, "%s: metadata rope_theta = '%.100s', expected > 1", path,
                            r);
    j->rope_theta = (float)x;
  }
  return ATTN_OK;
}

/* An empty tensor (a dim 0) may carry huge other dims. Every size the command
 * forms ([B,Hq,Lq,Lk] masks, [B,Hq,Lq,D|Dv] outputs and query gradients,
 * [B,Hkv,Lk,D|Dv] key gradients, and their partial products) must fit in int64
 * as if each dim were at least 1. */
static attn_status check_sizes(const char *path, int64_t B, int64_t Hq, int64_t Hkv, int64_t Lq,
                               int64_t Lk, int64_t D, int64_t Dv) {
  const int64_t Dm = D > Dv ? D : Dv;
  const int64_t shapes[3][4] = {{B, Hq, Lq, Lk}, {B, Hq, Lq, Dm}, {B, Hkv, Lk, Dm}};
  for (int s = 0; s < 3; s++) {
    int64_t n = 1;
    for (int i = 0; i < 4; i++)
      if (attn_ck_mul(n, shapes[s][i] > 1 ? shapes[s][i] : 1, &n))
        return attn_set_error(ATTN_EINVAL,
                              "%s: sizes B=%lld Hq=%lld Hkv=%lld Lq=%lld Lk=%lld D=%lld Dv=%lld "
                              "are too large (B*Hq*Lq*Lk and each tensor's element count must "
                              "fit in 64 bits)",
                              path, (long long)B, (long long)Hq, (long long)Hkv, (long long)Lq,
                              (long long)Lk, (long long)D, (long long)Dv);
  }
  return ATTN_OK;
}

/* The dtype q, k and v share when it is F16 or BF16 and the fp16 / bf16
 * flash kernels serve the file (flash or auto backend, no position variant
 * or block layout; padded [B,H,L,D] or packed [total,H,D] with cu_seqlens), else F32: then every F16 / BF16 tensor is widened to
 * F32 (exact) and the f32 backends run on the same values. */
static attn_dtype lowp_kernel_dtype(const attn_st *in, attn_sdpa_path path) {
  const attn_tensor *q = attn_st_get(in, "q"), *k = attn_st_get(in, "k"), *v = attn_st_get(in, "v");
  if (!q || !k || !v || q->dtype != k->dtype || q->dtype != v->dtype || path == ATTN_PATH_MATH ||
      (q->dtype != ATTN_F16 && q->dtype != ATTN_BF16))
    return ATTN_F32;
  if (path > ATTN_PATH_FLASH)
    return q->dtype; /* a kernel path asked for: that kernel or an error */
  const int nd = attn_st_get(in, "cu_seqlens_q") ? 3 : 4; /* packed: [total, H, D] */
  if (q->ndim != nd || v->ndim != nd) return ATTN_F32;
  if (q->dtype == ATTN_BF16 && (q->shape[nd - 1] > 256 || v->shape[nd - 1] > 256))
    return ATTN_F32; /* the bf16 kernel's head-dim limit (sdpa_bf16.h) */
  static const char *const variants[] = {"alibi_slopes", "rel_bias", "shaw_k", "shaw_v",
                                         "block_mask", "sinks"};
  for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++)
    if (attn_st_get(in, variants[i])) return ATTN_F32;
  int alibi = 0;
  const char *a = attn_st_meta(in, "alibi");
  if (attn_st_meta(in, "rope") || attn_st_meta(in, "softcap") ||
      attn_st_meta(in, "logit_softcap") || (a && attn_parse_bool(a, &alibi) && alibi))
    return ATTN_F32;
  return q->dtype;
}

/* Everything between reading IN and writing OUT (j->res). */
static attn_status run_sdpa(sdpa_job *j, const char *in_path, attn_sdpa_path path) {
  attn_st *file = NULL;
  attn_status st = attn_st_load(in_path, &file);
  if (st) return st;
  const attn_dtype qkv = lowp_kernel_dtype(file, path);
  static const char *const keep_qkv[] = {"q", "k", "v", NULL};
  st = attn_st_widen(file, qkv == ATTN_F32 ? NULL : keep_qkv, &j->in);
  attn_st_free(file);
  if (st) return st;
  const attn_st *in = j->in;
  for (int i = 0; i < attn_st_count(in); i++)
    if (!in_list(attn_st_name(in, i), tensor_names, sizeof tensor_names / sizeof tensor_names[0]))
      return attn_set_error(ATTN_EINVAL,
                            "%s: unknown tensor '%.100s' (expected q, k, v, mask, key_lens, dout "
                            "or a variant tensor of docs/VARIANTS.md)",
                            in_path, attn_st_name(in, i));
  if (attn_st_get(in, "cu_seqlens_q")) return cli_sdpa_varlen(in, in_path, path, qkv, &j->res);
  const attn_tensor *q, *k, *v, *mask, *kl, *dout;
  if ((st = attn_st_expect(in, "q", qkv, 4, NULL, 1, &q))) return st;
  const int64_t B = q->shape[0], Hq = q->shape[1], Lq = q->shape[2], D = q->shape[3];
  const int64_t kshape[4] = {B, -1, -1, D};
  if ((st = attn_st_expect(in, "k", qkv, 4, kshape, 1, &k))) return st;
  const int64_t Hkv = k->shape[1], Lk = k->shape[2];
  const int64_t vshape[4] = {B, Hkv, Lk, -1};
  if ((st = attn_st_expect(in, "v", qkv, 4, vshape, 1, &v))) return st;
  const int64_t Dv = v->shape[3];
  if (Hkv < 1 || Hq % Hkv != 0)
    return attn_set_error(ATTN_EINVAL, "tensor 'q' has %lld heads, not a multiple of k's %lld",
                          (long long)Hq, (long long)Hkv);
  const int64_t oshape[4] = {B, Hq, Lq, Dv};
  if ((st = attn_st_expect(in, "dout", ATTN_F32, 4, oshape, 0, &dout))) return st;
  if ((st = check_sizes(in_path, B, Hq, Hkv, Lq, Lk, D, Dv))) return st;

  attn_sdpa_desc d;
  attn_sdpa_desc_init(&d, B, Hq, Hkv, Lq, Lk, D, Dv);
  if ((st = cli_sdpa_read_metadata(in, in_path, &d))) return st;
  if ((kl = attn_st_get(in, "key_lens"))) {
    if ((st = cli_sdpa_read_lens(kl, "key_lens", B, Lk, &j->key_lens))) return st;
    d.key_lens = j->key_lens;
  }
  if ((kl = attn_st_get(in, "prefix_lens"))) { /* prefix-LM (with causal) */
    if ((st = cli_sdpa_read_lens(kl, "prefix_lens", B, Lk, &j->prefix_lens))) return st;
    d.prefix_lens = j->prefix_lens;
  }
  if ((mask = attn_st_get(in, "mask"))) {
    const int64_t full[4] = {B, Hq, Lq, Lk};
    if (mask->dtype == ATTN_BOOL) {
      d.bool_mask = mask->data;
      st = mask_strides(mask, full, d.bool_mask_stride);
    } else if (mask->dtype == ATTN_F32) {
      d.add_mask = mask->data;
      st = mask_strides(mask, full, d.add_mask_stride);
    } else {
      st = attn_set_error(ATTN_EINVAL, "tensor 'mask' has dtype %s, expected BOOL, F32, F16 or BF16",
                          attn_dtype_name(mask->dtype));
    }
    if (st) return st;
  }

  if ((st = cli_sdpa_read_q_offsets(in, B, &j->q_offsets))) return st;
  d.q_offsets = j->q_offsets;
  if ((st = read_variants(in, in_path, j, &d))) return st;
  if (j->rope && d.q_offsets)
    return attn_set_error(ATTN_EINVAL, "%s: rope with q_offsets is not supported", in_path);
  if (j->rope && qkv != ATTN_F32) /* only with a low-precision --path: q, k stay 16-bit */
    return attn_set_error(ATTN_EUNSUPPORTED,
                          "%s: rope rotates f32 q and k: not with --path %s (a low-precision "
                          "kernel's path)",
                          in_path, attn_sdpa_path_name(path));
  const void *qd = q->data, *kd = k->data; /* rotated copies with RoPE */
  if (j->rope) {
    if (!(j->qr = alloc4(B, Hq, Lq, D, "q")) || !(j->kr = alloc4(B, Hkv, Lk, D, "k")))
      return ATTN_ENOMEM;
    if ((st = attn_rope_partial_f32(qd, j->qr, B * Hq, Lq, 1, D, j->rope_dim, j->rope_theta,
                                    d.q_offset, j->rope_layout)) ||
        (st = attn_rope_partial_f32(kd, j->kr, B * Hkv, Lk, 1, D, j->rope_dim, j->rope_theta, 0,
                                    j->rope_layout)))
      return st;
    qd = j->qr;
    kd = j->kr;
  }

  if (!(j->out = alloc4(B, Hq, Lq, Dv, "out")) || !(j->lse = alloc4(B, Hq, Lq, 1, "lse")))
    return ATTN_ENOMEM;
  /* q, k, v in their dtype (lowp_kernel_dtype): F16 / BF16 on that kernel, else f32 (qd, kd:
   * the file's, or their rotated copies, f32 only) */
  attn_sdpa_args a = {
      .dtype = qkv, .path = path, .q = qd, .k = kd, .v = v->data, .out = j->out, .lse = j->lse};
  st = attn_sdpa_forward(&d, &a);
  if (st) return st;
  if ((st = attn_st_new(&j->res))) return st;
  const int64_t lshape[3] = {B, Hq, Lq};
  if ((st = attn_st_add_f32(j->res, "out", 4, oshape, j->out)) ||
      (st = attn_st_add_f32(j->res, "lse", 3, lshape, j->lse)))
    return st;
  if (dout) {
    if (!(j->dq = alloc4(B, Hq, Lq, D, "dq")) || !(j->dk = alloc4(B, Hkv, Lk, D, "dk")) ||
        !(j->dv = alloc4(B, Hkv, Lk, Dv, "dv")))
      return ATTN_ENOMEM;
    const int64_t R = 2 * d.shaw_max - 1;
    if ((d.rel_bias && !(j->drel = alloc4(Hq, d.rel_buckets, 1, 1, "drel_bias"))) ||
        (d.shaw_k && !(j->dshk = alloc4(R, D, 1, 1, "dshaw_k"))) ||
        (d.shaw_v && !(j->dshv = alloc4(R, Dv, 1, 1, "dshaw_v"))) ||
        (d.sinks && !(j->dsinks = alloc4(Hq, 1, 1, 1, "dsinks"))))
      return ATTN_ENOMEM;
    d.sinks_grad = j->dsinks;
    const attn_tensor *slt = attn_st_get(in, "alibi_slopes"); /* learnable: its gradient */
    if (slt && !(j->dsl = alloc4(slt->ndim == 2 ? B : 1, Hq, 1, 1, "dalibi_slopes")))
      return ATTN_ENOMEM;
    d.alibi_slopes_grad = j->dsl;
    d.rel_bias_grad = j->drel;
    d.shaw_k_grad = j->dshk;
    d.shaw_v_grad = j->dshv;
    a.dout = dout->data, a.dq = j->dq, a.dk = j->dk, a.dv = j->dv;
    st = attn_sdpa_backward(&d, &a);
    if (st) return st;
    if (j->rope && /* gradients w.r.t. the unrotated q and k */
        ((st = attn_rope_partial_backward_f32(j->dq, j->dq, B * Hq, Lq, 1, D, j->rope_dim,
                                              j->rope_theta, d.q_offset, j->rope_layout)) ||
         (st = attn_rope_partial_backward_f32(j->dk, j->dk, B * Hkv, Lk, 1, D, j->rope_dim,
                                              j->rope_theta, 0, j->rope_layout))))
      return st;
    if ((st = attn_st_add_f32(j->res, "dq", 4, q->shape, j->dq)) ||
        (st = attn_st_add_f32(j->res, "dk", 4, k->shape, j->dk)) ||
        (st = attn_st_add_f32(j->res, "dv", 4, v->shape, j->dv)))
      return st;
    const int64_t rshape[2] = {Hq, d.rel_buckets}, kshape2[2] = {R, D}, vshape2[2] = {R, Dv};
    if ((j->dsl && (st = attn_st_add_f32(j->res, "dalibi_slopes", slt->ndim, slt->shape, j->dsl))) ||
        (j->drel && (st = attn_st_add_f32(j->res, "drel_bias", 2, rshape, j->drel))) ||
        (j->dshk && (st = attn_st_add_f32(j->res, "dshaw_k", 2, kshape2, j->dshk))) ||
        (j->dshv && (st = attn_st_add_f32(j->res, "dshaw_v", 2, vshape2, j->dshv))) ||
        (j->dsinks && (st = attn_st_add_f32(j->res, "dsinks", 1, &Hq, j->dsinks))))
      return st;
  }
  return ATTN_OK;
}

attn_status cli_sdpa_run(const char *in_path, const char *out_path, attn_backend backend) {
  sdpa_job job = {0};
  attn_status st = run_sdpa(&job, in_path, (attn_sdpa_path)backend);
  if (!st) st = attn_st_save(job.res, out_path); /* atomic: no partial OUT */
  job_free(&job);
  return st;
}

int attn_cmd_sdpa(int argc, char **argv) {
  static const cli_opt opts[] = {
      {"--backend", CLI_VALUE}, {"--path", CLI_VALUE}, {"--threads", CLI_VALUE}, {NULL, 0}};
  const char *paths[2] = {NULL, NULL};
  int npaths = 0, r, chosen = 0;
  attn_sdpa_path path = ATTN_PATH_AUTO;
  cli_args a;
  cli_args_init(&a, argc, argv, 1, opts);
  while ((r = cli_args_next(&a)) > 0) {
    if (r == CLI_ARG) {
      if (npaths == 2) return cli_usage("unexpected argument '%s' (see attn sdpa --help)", a.val);
      paths[npaths++] = a.val;
    } else if (!strcmp(a.opt, "--backend") || !strcmp(a.opt, "--path")) {
      /* --backend: the f32 words (auto, math, flash); --path: any path */
      attn_backend b;
      attn_status st = !strcmp(a.opt, "--backend") && !attn_backend_from_name(a.val, &b)
                           ? (path = (attn_sdpa_path)b, ATTN_OK)
                           : attn_sdpa_path_from_name(a.val, &path);
      if (st || (!strcmp(a.opt, "--backend") && path > ATTN_PATH_FLASH))
        return cli_usage("%s '%s': expected %s", a.opt, a.val,
                         !strcmp(a.opt, "--backend")
                             ? "auto, math or flash"
                             : "auto, math, flash, portable, simd, amx or f32"),
               CLI_USAGE;
      if (chosen++) return cli_usage("--backend and --path: give one (the same choice)"), CLI_USAGE;
    } else {
      int64_t n;
      if (!cli_parse_i64(a.val, &n) || n < 1 || n > 4096)
        return cli_usage("--threads '%s': expected an integer in [1, 4096]", a.val);
      attn_set_num_threads((int)n);
    }
  }
  if (r == CLI_HELP) fputs(usage_text, stdout);
  if (r < 0) return cli_args_exit(r);
  if (npaths != 2) {
    cli_usage("expected IN.safetensors and OUT.safetensors");
    fputs(usage_text, stderr);
    return CLI_USAGE;
  }
  sdpa_job job = {0};
  int rc = run_sdpa(&job, paths[0], path)    ? cli_fail(paths[0])
           : attn_st_save(job.res, paths[1]) ? cli_fail(paths[1]) /* atomic: no partial OUT */
                                             : CLI_OK;
  job_free(&job);
  return rc;
}
