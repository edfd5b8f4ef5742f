/* The descriptor's walk (tools/sdpa_walk.sh): one attn_sdpa_forward call on
 * a library built with -finstrument-functions, every function entry
 * recorded once per (caller, callee) edge in call order, so the walk a
 * reader takes from the descriptor to the micro-kernels can be mapped to
 * files. Usage: walk_trace CASE OUT (CASE: plain | causal | softcap | bf16). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"

#define NI __attribute__((no_instrument_function))

enum { MAXE = 1 << 16 };
static void *edges[MAXE][2];
static int nedges, depth, recording;
static void *stack[4096];
static FILE *out;

NI static int seen(void *a, void *b) {
  for (int i = 0; i < nedges; i++)
    if (edges[i][0] == a && edges[i][1] == b) return 1;
  if (nedges < MAXE) edges[nedges][0] = a, edges[nedges][1] = b, nedges++;
  return 0;
}

NI void __cyg_profile_func_enter(void *fn, void *site) {
  (void)site;
  void *caller = depth > 0 ? stack[depth - 1] : NULL;
  if (depth < 4096) stack[depth] = fn;
  depth++;
  if (recording && !seen(caller, fn)) fprintf(out, "%d %p\n", depth, fn);
}

NI void __cyg_profile_func_exit(void *fn, void *site) {
  (void)fn, (void)site;
  depth--;
}

NI int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: walk_trace plain|causal|softcap|bf16 OUT\n");
    return 2;
  }
  const char *c = argv[1];
  out = fopen(argv[2], "w");
  if (!out) return 1;
  const int64_t B = 1, H = 2, L = 256, D = 64;
  attn_sdpa_desc d;
  attn_sdpa_desc_init(&d, B, H, H, L, L, D, D);
  d.causal = strcmp(c, "causal") == 0;
  if (strcmp(c, "softcap") == 0) d.softcap = 20.0f;
  const size_t n = (size_t)(B * H * L * D);
  float *q = calloc(n, 4), *k = calloc(n, 4), *v = calloc(n, 4), *o = calloc(n, 4);
  float *lse = calloc((size_t)(B * H * L), 4);
  uint16_t *q16 = calloc(n, 2), *k16 = calloc(n, 2), *v16 = calloc(n, 2);
  for (size_t i = 0; i < n; i++)
    q[i] = k[i] = v[i] = (float)(i % 7) * 0.1f;
  attn_sdpa_args a = {
      .dtype = ATTN_F32, .path = ATTN_PATH_AUTO, .q = q, .k = k, .v = v, .out = o, .lse = lse};
  if (strcmp(c, "bf16") == 0) a.dtype = ATTN_BF16, a.q = q16, a.k = k16, a.v = v16;
  attn_set_num_threads(1);
  attn_sdpa_forward(&d, &a); /* the kernel tables' one-time set-up: not the walk */
  recording = 1;
  attn_status st = attn_sdpa_forward(&d, &a);
  recording = 0;
  fclose(out);
  free(q), free(k), free(v), free(o), free(lse), free(q16), free(k16), free(v16);
  if (st) fprintf(stderr, "walk_trace: %s\n", attn_last_error());
  return st ? 1 : 0;
}
