/* Open-addressing hash map from uint64 keys to int32 values (the BPE pair
 * tables). Keys must not be UINT64_MAX (the empty marker). Internal. */
#ifndef ATTN_APPS_U64MAP_H
#define ATTN_APPS_U64MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  uint64_t *keys;
  int32_t *vals;
  size_t cap, count; /* cap: power of two */
} attn_u64map;

/* Value of key, or -1 if absent. */
int32_t attn_u64map_get(const attn_u64map *m, uint64_t key);
/* Sets key -> val. Returns 0, or -1 when out of memory. */
int attn_u64map_put(attn_u64map *m, uint64_t key, int32_t val);
void attn_u64map_free(attn_u64map *m);

#endif
