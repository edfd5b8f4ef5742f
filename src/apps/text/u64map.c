#include "apps/text/u64map.h"

#include <stdlib.h>
#include <string.h>

static size_t slot_of(uint64_t key, size_t cap) {
  key ^= key >> 33; /* splitmix64 finaliser: spreads (a << 32 | b) pair keys */
  key *= 0xff51afd7ed558ccdull;
  key ^= key >> 33;
  key *= 0xc4ceb9fe1a85ec53ull;
  key ^= key >> 33;
  return (size_t)key & (cap - 1);
}

int32_t attn_u64map_get(const attn_u64map *m, uint64_t key) {
  if (!m->cap) return -1;
  for (size_t i = slot_of(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
    if (m->keys[i] == key) return m->vals[i];
    if (m->keys[i] == UINT64_MAX) return -1;
  }
}

static int grow(attn_u64map *m) {
  size_t cap = m->cap ? m->cap * 2 : 1024;
  uint64_t *keys = malloc(cap * sizeof *keys);
  int32_t *vals = malloc(cap * sizeof *vals);
  if (!keys || !vals) {
    free(keys);
    free(vals);
    return -1;
  }
  memset(keys, 0xff, cap * sizeof *keys);
  for (size_t i = 0; i < m->cap; i++) {
    if (m->keys[i] == UINT64_MAX) continue;
    size_t j = slot_of(m->keys[i], cap);
    while (keys[j] != UINT64_MAX) j = (j + 1) & (cap - 1);
    keys[j] = m->keys[i];
    vals[j] = m->vals[i];
  }
  free(m->keys);
  free(m->vals);
  m->keys = keys;
  m->vals = vals;
  m->cap = cap;
  return 0;
}

int attn_u64map_put(attn_u64map *m, uint64_t key, int32_t val) {
  if ((m->count + 1) * 4 > m->cap * 3 && grow(m)) return -1; /* load <= 3/4 */
  size_t i = slot_of(key, m->cap);
  while (m->keys[i] != UINT64_MAX && m->keys[i] != key) i = (i + 1) & (m->cap - 1);
  if (m->keys[i] == UINT64_MAX) m->count++;
  m->keys[i] = key;
  m->vals[i] = val;
  return 0;
}

void attn_u64map_free(attn_u64map *m) {
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof *m);
}
