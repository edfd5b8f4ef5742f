/* Projected attention for the variants (include/attn/nn_variants.h): the
 * seed's SparseAttention and CrossModalAttention, LLaMA-style GQA/MQA, and a
 * KV-cache decoding step. Heads are never transposed: the projections
 * [B, L, H*hd] are read by the SDPA through (b, h, l) strides. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/nn_variants.h"
#include "nn/nn_internal.h"

void attn_vattn_config_default(attn_vattn_config *c, int64_t embed_dim, int64_t num_heads) {
  if (!c) return;
  memset(c, 0, sizeof *c);
  c->embed_dim = embed_dim;
  c->num_heads = num_heads;
  c->bias = 1;
  c->window_left = -1;
  c->window_right = -1;
  c->rope_layout = ATTN_ROPE_HALF;
}

void attn_sparse_attention_config(attn_vattn_config *c, int64_t embed_dim, int64_t num_heads,
                                  int64_t window_size) {
  attn_vattn_config_default(c, embed_dim, num_heads);
  if (!c) return;
  c->window_left = window_size / 2; /* the seed's mask: i - w//2 <= j < i + w//2 + 1 */
  c->window_right = window_size / 2;
}

void attn_cross_attention_config(attn_vattn_config *c, int64_t embed_dim, int64_t kv_dim,
                                 int64_t num_heads) {
  attn_vattn_config_default(c, embed_dim, num_heads);
  if (c) c->kv_dim = kv_dim;
}

void attn_gqa_attention_config(attn_vattn_config *c, int64_t embed_dim, int64_t num_heads,
                               int64_t num_kv_heads, float rope_theta) {
  attn_vattn_config_default(c, embed_dim, num_heads);
  if (!c) return;
  c->num_kv_heads = num_kv_heads;
  c->bias = 0;
  c->causal = 1;
  c->rope = 1;
  c->rope_layout = ATTN_ROPE_HALF;
  c->rope_theta = rope_theta;
  c->q_name = "q_proj";
  c->k_name = "k_proj";
  c->v_name = "v_proj";
  c->o_name = "o_proj";
}

void attn_vattn_saved_free(attn_vattn_saved *s) {
  if (!s) return;
  attn_nn_arena_release(&s->arena);
  memset(s, 0, sizeof *s);
}

attn_status attn_vattn_declare(attn_vattn *m, attn_params *p, const char *prefix,
                               const attn_vattn_config *c) {
  if (!m || !p || !prefix || !c) return attn_set_error(ATTN_EINVAL, "vattn_declare: NULL argument");
  memset(m, 0, sizeof *m);
  m->c = *c;
  m->Hq = c->num_heads;
  m->Hkv = c->num_kv_heads ? c->num_kv_heads : c->num_heads;
  m->kvd = c->kv_dim ? c->kv_dim : c->embed_dim;
  m->hd = c->head_dim ? c->head_dim : (c->num_heads > 0 ? c->embed_dim / c->num_heads : 0);
  if (c->embed_dim < 1 || m->Hq < 1 || m->Hkv < 1 || m->Hq % m->Hkv || m->hd < 1 || m->kvd < 1 ||
      (!c->head_dim && m->hd * m->Hq != c->embed_dim) || c->window_left < -1 ||
      c->window_right < -1 || (c->rope && m->hd % 2 && !c->rope_dim))
    return attn_set_error(ATTN_EINVAL,
                          "attention '%s': embed_dim %lld, kv_dim %lld, heads %lld, kv heads "
                          "%lld, head_dim %lld, window (%lld, %lld), rope %d: need heads | "
                          "embed_dim (or head_dim), kv heads | heads, even head_dim with rope",
                          prefix, (long long)c->embed_dim, (long long)m->kvd, (long long)m->Hq,
                          (long long)m->Hkv, (long long)m->hd, (long long)c->window_left,
                          (long long)c->window_right, c->rope);
  if ((c->rope_dim && !c->rope) ||
      (c->rope && c->rope_dim && (c->rope_dim < 2 || c->rope_dim % 2 || c->rope_dim > m->hd)))
    return attn_set_error(ATTN_EINVAL,
                          "attention '%s': rope_dim %lld: the rotated dims must be even, in [2, "
                          "head_dim %lld], and need rope",
                          prefix, (long long)c->rope_dim, (long long)m->hd);
  const char *names[4] = {c->q_name ? c->q_name : "query", c->k_name ? c->k_name : "key",
                          c->v_name ? c->v_name : "value", c->o_name ? c->o_name : "fc_out"};
  attn_linear *lin[4] = {&m->q, &m->k, &m->v, &m->o};
  const int64_t in[4] = {c->embed_dim, m->kvd, m->kvd, m->Hq * m->hd};
  const int64_t out[4] = {m->Hq * m->hd, m->Hkv * m->hd, m->Hkv * m->hd, c->embed_dim};
  for (int i = 0; i < 4; i++) {
    char pre[ATTN_PARAM_NAME_MAX];
    attn_status st = attn_nn_name(pre, prefix, names[i]);
    if (!st) st = attn_nn_name(pre, pre, ".");
    if (!st) st = attn_linear_declare(lin[i], p, pre, in[i], out[i], c->bias);
    if (st) return st;
  }
  return ATTN_OK;
}

attn_status attn_vattn_init(const attn_vattn *m, attn_params *p, attn_init kind, uint64_t seed) {
  if (!m || !p) return attn_set_error(ATTN_EINVAL, "vattn_init: NULL argument");
  const attn_linear *lin[4] = {&m->q, &m->k, &m->v, &m->o};
  for (int i = 0; i < 4; i++) {
    attn_status st = attn_linear_init(lin[i], p, kind, seed);
    if (st) return st;
  }
  return ATTN_OK;
}

static float theta_of(const attn_vattn *m) {
  return m->c.rope_theta > 0.0f ? m->c.rope_theta : 10000.0f;
}

/* RoPE (forward, or its inverse with back) on x [B, L, H, hd] from position pos */
static attn_status rotate(const attn_vattn *m, float *x, int64_t B, int64_t L, int64_t H,
                          int64_t pos, int back) {
  const int64_t rd = m->c.rope_dim ? m->c.rope_dim : m->hd;
  return back ? attn_rope_partial_backward_f32(x, x, B, L, H, m->hd, rd, theta_of(m), pos,
                                               m->c.rope_layout)
              : attn_rope_partial_f32(x, x, B, L, H, m->hd, rd, theta_of(m), pos, m->c.rope_layout);
}

/* The SDPA on projections q [B, Lq, Hq*hd], k/v [B, Lk, Hkv*hd], ctx like q. */
static void vattn_desc(const attn_vattn *m, int64_t B, int64_t Lq, int64_t Lk,
                       const attn_sdpa_desc *extra, attn_sdpa_desc *d) {
  const int64_t hd = m->hd, Hq = m->Hq, Hkv = m->Hkv;
  attn_sdpa_desc_init(d, B, Hq, Hkv, Lq, Lk, hd, hd);
  if (extra) { /* the variant fields only */
    d->alibi_slopes = extra->alibi_slopes;
    d->rel_bias = extra->rel_bias;
    d->rel_buckets = extra->rel_buckets;
    d->rel_max_distance = extra->rel_max_distance;
    d->rel_bidirectional = extra->rel_bidirectional;
    d->shaw_k = extra->shaw_k;
    d->shaw_v = extra->shaw_v;
    d->shaw_max = extra->shaw_max;
    d->block_mask = extra->block_mask;
    d->block_size = extra->block_size;
    d->block_cols = extra->block_cols;
  }
  d->causal = m->c.causal;
  d->window_left = m->c.window_left;
  d->window_right = m->c.window_right;
  const int64_t qs[3] = {Lq * Hq * hd, hd, Hq * hd}, ks[3] = {Lk * Hkv * hd, hd, Hkv * hd};
  memcpy(d->q_stride, qs, sizeof qs);
  memcpy(d->o_stride, qs, sizeof qs);
  memcpy(d->k_stride, ks, sizeof ks);
  memcpy(d->v_stride, ks, sizeof ks);
}

static attn_backend backend_of(const attn_nn_ctx *ctx) {
  return ctx ? ctx->backend : ATTN_BACKEND_AUTO;
}

attn_status attn_vattn_forward(const attn_vattn *m, const attn_params *p, const attn_nn_ctx *ctx,
                               attn_vattn_saved *s, const float *x, const float *kv, int64_t B,
                               int64_t Lq, int64_t Lk, const attn_sdpa_desc *extra, float *out) {
  if (!m || !p || !s || !x || !out)
    return attn_set_error(ATTN_EINVAL, "vattn_forward: NULL argument");
  if (!kv) {
    if (Lk != Lq && Lk != 0)
      return attn_set_error(ATTN_EINVAL, "vattn_forward: self-attention with Lk %lld != Lq %lld",
                            (long long)Lk, (long long)Lq);
    Lk = Lq;
    if (m->kvd != m->c.embed_dim)
      return attn_set_error(ATTN_EINVAL, "vattn_forward: kv_dim %lld needs a kv input",
                            (long long)m->kvd);
  }
  if (B < 1 || Lq < 0 || Lk < 0)
    return attn_set_error(ATTN_EINVAL, "vattn_forward: B %lld, Lq %lld, Lk %lld", (long long)B,
                          (long long)Lq, (long long)Lk);
  const float *y = kv ? kv : x;
  const int64_t nq = B * Lq * m->Hq * m->hd, nk = B * Lk * m->Hkv * m->hd;
  attn_nn_arena_release(&s->arena);
  memset(s, 0, sizeof *s);
  s->B = B;
  s->Lq = Lq;
  s->Lk = Lk;
  if (!(s->q = NN_ALLOC_F(&s->arena, nq)) || !(s->k = NN_ALLOC_F(&s->arena, nk)) ||
      !(s->v = NN_ALLOC_F(&s->arena, nk)) || !(s->ctx = NN_ALLOC_F(&s->arena, nq)) ||
      !(s->lse = NN_ALLOC_F(&s->arena, B * m->Hq * Lq)))
    return ATTN_ENOMEM;
  attn_status st;
  if ((st = attn_linear_forward(&m->q, p, x, s->q, B * Lq)) ||
      (st = attn_linear_forward(&m->k, p, y, s->k, B * Lk)) ||
      (st = attn_linear_forward(&m->v, p, y, s->v, B * Lk)))
    return st;
  if (m->c.rope &&
      ((st = rotate(m, s->q, B, Lq, m->Hq, 0, 0)) || (st = rotate(m, s->k, B, Lk, m->Hkv, 0, 0))))
    return st;
  attn_sdpa_desc d;
  vattn_desc(m, B, Lq, Lk, extra, &d);
  if ((st = attn_sdpa_forward(&d, &(attn_sdpa_args){.path = (attn_sdpa_path)backend_of(ctx),
                                                    .q = s->q,
                                                    .k = s->k,
                                                    .v = s->v,
                                                    .out = s->ctx,
                                                    .lse = s->lse})))
    return st;
  return attn_linear_forward(&m->o, p, s->ctx, out, B * Lq);
}

/* dst [n] += src [n] */
static void add_to(float *dst, const float *src, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    dst[i] += src[i];
}

attn_status attn_vattn_backward(const attn_vattn *m, attn_params *p, const attn_nn_ctx *ctx,
                                const attn_vattn_saved *s, const float *x, const float *kv,
                                const float *dout, const attn_sdpa_desc *extra, float *dx,
                                float *dkv) {
  if (!m || !p || !s || !s->q || !x || !dout)
    return attn_set_error(ATTN_EINVAL, "vattn_backward: NULL argument or no saved forward");
  const int64_t B = s->B, Lq = s->Lq, Lk = s->Lk;
  const int64_t nq = B * Lq * m->Hq * m->hd, nk = B * Lk * m->Hkv * m->hd;
  const float *y = kv ? kv : x;
  float *dy = kv ? dkv : dx;
  attn_sdpa_desc d;
  vattn_desc(m, B, Lq, Lk, extra, &d);
  const int64_t R = 2 * d.shaw_max - 1;
  const int64_t nt5 = extra && d.rel_bias && extra->rel_bias_grad ? m->Hq * d.rel_buckets : 0;
  const int64_t nsk = extra && d.shaw_k && extra->shaw_k_grad ? R * m->hd : 0;
  const int64_t nsv = extra && d.shaw_v && extra->shaw_v_grad ? R * m->hd : 0;
  float *buf = attn_nn_scratch(2 * nq + 2 * nk + nt5 + nsk + nsv);
  if (!buf) return ATTN_ENOMEM;
  float *dctx = buf, *dq = buf + nq, *dk = dq + nq, *dv = dk + nk; /* each like its forward */
  d.rel_bias_grad = nt5 ? dv + nk : NULL;
  d.shaw_k_grad = nsk ? dv + nk + nt5 : NULL;
  d.shaw_v_grad = nsv ? dv + nk + nt5 + nsk : NULL;
  attn_status st;
  if ((st = attn_linear_backward(&m->o, p, s->ctx, dout, dctx, B * Lq)) ||
      (st = attn_sdpa_backward(&d, &(attn_sdpa_args){.path = (attn_sdpa_path)backend_of(ctx),
                                                     .q = s->q,
                                                     .k = s->k,
                                                     .v = s->v,
                                                     .out = s->ctx,
                                                     .lse = s->lse,
                                                     .dout = dctx,
                                                     .dq = dq,
                                                     .dk = dk,
                                                     .dv = dv})))
    goto done;
  if (m->c.rope && /* back to the unrotated projections */
      ((st = rotate(m, dq, B, Lq, m->Hq, 0, 1)) || (st = rotate(m, dk, B, Lk, m->Hkv, 0, 1))))
    goto done;
  if ((st = attn_linear_backward(&m->q, p, x, dq, dx, B * Lq)) ||
      (st = attn_linear_backward(&m->k, p, y, dk, dy, B * Lk)) ||
      (st = attn_linear_backward(&m->v, p, y, dv, dy, B * Lk)))
    goto done;
  if (nt5) add_to(extra->rel_bias_grad, d.rel_bias_grad, nt5);
  if (nsk) add_to(extra->shaw_k_grad, d.shaw_k_grad, nsk);
  if (nsv) add_to(extra->shaw_v_grad, d.shaw_v_grad, nsv);
done:
  free(buf);
  return st;
}

attn_status attn_vattn_decode(const attn_vattn *m, const attn_params *p, const attn_nn_ctx *ctx,
                              attn_kv_cache *cache, const float *x_new, int64_t B, int64_t n,
                              const attn_sdpa_desc *extra, float *out) {
  if (!m || !p || !cache || !x_new || !out)
    return attn_set_error(ATTN_EINVAL, "vattn_decode: NULL argument");
  if (m->kvd != m->c.embed_dim)
    return attn_set_error(ATTN_EINVAL, "vattn_decode: self-attention only (kv_dim %lld)",
                          (long long)m->kvd);
  if (cache->B != B || cache->Hkv != m->Hkv || cache->D != m->hd || cache->Dv != m->hd)
    return attn_set_error(ATTN_EINVAL,
                          "vattn_decode: cache (B %lld, Hkv %lld, D %lld, Dv %lld) does not "
                          "match (B %lld, Hkv %lld, head_dim %lld)",
                          (long long)cache->B, (long long)cache->Hkv, (long long)cache->D,
                          (long long)cache->Dv, (long long)B, (long long)m->Hkv, (long long)m->hd);
  if (n < 1) return attn_set_error(ATTN_EINVAL, "vattn_decode: n = %lld", (long long)n);
  const int64_t nq = B * n * m->Hq * m->hd, nk = B * n * m->Hkv * m->hd, pos = cache->len;
  float *buf = attn_nn_scratch(2 * nq + 4 * nk + B * m->Hq * n);
  if (!buf) return ATTN_ENOMEM;
  float *q = buf, *c = q + nq, *k = c + nq, *v = k + nk, *kt = v + nk, *vt = kt + nk;
  float *lse = vt + nk; /* [B, Hq, n] */
  attn_status st;
  if ((st = attn_linear_forward(&m->q, p, x_new, q, B * n)) ||
      (st = attn_linear_forward(&m->k, p, x_new, k, B * n)) ||
      (st = attn_linear_forward(&m->v, p, x_new, v, B * n)))
    goto done;
  if (m->c.rope &&
      ((st = rotate(m, q, B, n, m->Hq, pos, 0)) || (st = rotate(m, k, B, n, m->Hkv, pos, 0))))
    goto done;
  attn_nn_heads_first(k, kt, B, n, m->Hkv, m->hd);
  attn_nn_heads_first(v, vt, B, n, m->Hkv, m->hd);
  if ((st = attn_kv_cache_append(cache, kt, vt, n))) goto done;
  attn_sdpa_desc d;
  vattn_desc(m, B, n, cache->len, extra, &d);
  if ((st = attn_kv_cache_attend(cache, &d, backend_of(ctx), q, n, c, lse))) goto done;
  st = attn_linear_forward(&m->o, p, c, out, B * n);
done:
  free(buf);
  return st;
}
