/* One f32 flash forward call (B = 1, H heads, N queries and keys, D = 64, 1
 * thread, standard-normal-ish inputs) for cachegrind's cache simulation:
 * tools/mca/cachegrind_flash.sh runs it with a given L1d / L2 geometry and
 * reads the misses of tile_forward_<isa> (everything of the fused tile is
 * inlined there). Not a benchmark: a driver for the simulator.
 *   cachegrind_flash N H [causal] */
#include <attn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: cachegrind_flash N H [causal]\n");
    return 2;
  }
  const int64_t N = atoll(argv[1]), H = atoll(argv[2]), D = 64;
  const int causal = argc > 3 && atoi(argv[3]);
  size_t n = (size_t)(H * N * D);
  float *q = malloc(n * sizeof *q), *k = malloc(n * sizeof *k), *v = malloc(n * sizeof *v),
        *o = malloc(n * sizeof *o), *lse = malloc((size_t)(H * N) * sizeof *lse);
  if (!q || !k || !v || !o || !lse) return 1;
  unsigned x = 12345;
  for (size_t i = 0; i < n; i++) { /* sums of uniforms: roughly normal, no libm */
    float s[3];
    for (int j = 0; j < 3; j++) {
      x = x * 1664525u + 1013904223u;
      s[j] = (float)(x >> 8) / 16777216.0f - 0.5f;
    }
    q[i] = 2 * s[0], k[i] = 2 * s[1], v[i] = 2 * s[2];
  }
  attn_set_num_threads(1);
  attn_sdpa_desc d;
  attn_sdpa_desc_init(&d, 1, H, H, N, N, D, D);
  d.causal = causal;
  attn_sdpa_args a = {.q = q, .k = k, .v = v, .out = o, .lse = lse};
  if (attn_sdpa_forward(&d, &a) != ATTN_OK) {
    fprintf(stderr, "attn: %s\n", attn_last_error());
    return 1;
  }
  printf("out[0] %g\n", (double)o[0]);
  free(q), free(k), free(v), free(o), free(lse);
  return 0;
}
