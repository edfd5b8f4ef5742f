/* A small random LM for the LM tests (test_lm, test_lm_kv): weights 8x the
 * init's (so the attention is far from uniform), the LayerNorms' gains 1;
 * and deterministic token ids. */
#ifndef ATTN_TESTS_LM_SMALL_H
#define ATTN_TESTS_LM_SMALL_H

#include <string.h>

#include "apps/lm/lm_model.h"
#include "harness.h"

static inline attn_lm_model lm_small_model(int64_t V, int64_t E, int64_t H, int64_t ff, int64_t L,
                                           int64_t max_len, uint64_t seed) {
  attn_lm_model m;
  attn_lm_config c;
  attn_lm_config_default(&c);
  c.vocab = V, c.d_model = E, c.heads = H, c.ff = ff, c.layers = L, c.max_len = max_len;
  CHECK_OK(attn_lm_create(&m, &c));
  CHECK_OK(attn_lm_init(&m, seed));
  for (int64_t i = 0; i < m.p.numel; i++)
    m.p.data[i] *= 8.0f;
  for (int v = 0; v < m.p.count; v++)
    if (strstr(m.p.views[v].name, "ln") && strstr(m.p.views[v].name, "weight"))
      for (int64_t i = 0; i < m.p.views[v].numel; i++)
        attn_params_data(&m.p, v)[i] = 1.0f;
  return m;
}

static inline void lm_fill_ids(int32_t *ids, int64_t n, int64_t V, unsigned seed) {
  for (int64_t i = 0; i < n; i++)
    ids[i] = (int32_t)((i * 7919u + seed * 104729u + (i * i) % 13) % (uint64_t)V);
}

#endif
