/* The seed 004 RelativePositionEmbedding: a learned table of 2*max_len-1
 * rows; forward(L)[i, j] = table[i - j + L - 1]. The same table serves as the
 * SDPA's Shaw table (include/attn/nn_variants.h). */
#include <string.h>

#include "attn/nn_variants.h"
#include "nn/nn_internal.h"

attn_status attn_relpos_declare(attn_relpos *m, attn_params *p, const char *prefix, int64_t max_len,
                                int64_t embed) {
  if (!m || !p || !prefix) return attn_set_error(ATTN_EINVAL, "relpos_declare: NULL argument");
  if (max_len < 1 || embed < 1)
    return attn_set_error(ATTN_EINVAL, "relative position '%s': max_len %lld, embed %lld (>= 1)",
                          prefix, (long long)max_len, (long long)embed);
  m->max_len = max_len;
  m->embed = embed;
  char name[ATTN_PARAM_NAME_MAX];
  const int64_t shape[2] = {2 * max_len - 1, embed};
  attn_status st = attn_nn_name(name, prefix, "embedding.weight");
  if (!st) st = attn_params_declare(p, name, 2, shape, &m->weight);
  return st;
}

attn_status attn_relpos_init(const attn_relpos *m, attn_params *p, uint64_t seed) {
  if (!m || !p || !p->data) return attn_set_error(ATTN_EINVAL, "relpos_init: NULL argument");
  float *w = attn_params_data(p, m->weight);
  const uint64_t s = attn_nn_hash(p->views[m->weight].name, seed + 1);
  for (int64_t i = 0; i < (2 * m->max_len - 1) * m->embed; i++)
    w[i] = attn_rng_normal(s, (uint64_t)i);
  return ATTN_OK;
}

static attn_status check_len(const attn_relpos *m, const attn_params *p, int64_t L, const void *buf,
                             const char *fn) {
  if (!m || !p || !buf) return attn_set_error(ATTN_EINVAL, "%s: NULL argument", fn);
  if (L < 1 || L > m->max_len)
    return attn_set_error(ATTN_EINVAL, "%s: seq_len %lld outside [1, max_len %lld]", fn,
                          (long long)L, (long long)m->max_len);
  return ATTN_OK;
}

attn_status attn_relpos_forward(const attn_relpos *m, const attn_params *p, int64_t L, float *out) {
  attn_status st = check_len(m, p, L, out, "relpos_forward");
  if (st) return st;
  const float *w = attn_params_data(p, m->weight);
  const int64_t E = m->embed;
  for (int64_t i = 0; i < L; i++)
    for (int64_t j = 0; j < L; j++)
      memcpy(out + (i * L + j) * E, w + (i - j + L - 1) * E, (size_t)E * sizeof(float));
  return ATTN_OK;
}

attn_status attn_relpos_backward(const attn_relpos *m, attn_params *p, int64_t L,
                                 const float *dout) {
  attn_status st = check_len(m, p, L, dout, "relpos_backward");
  if (st) return st;
  float *g = attn_params_grad(p, m->weight);
  const int64_t E = m->embed;
  for (int64_t i = 0; i < L; i++) /* fixed order: deterministic */
    for (int64_t j = 0; j < L; j++) {
      float *gr = g + (i - j + L - 1) * E;
      const float *d = dout + (i * L + j) * E;
      for (int64_t e = 0; e < E; e++)
        gr[e] += d[e];
    }
  return ATTN_OK;
}
