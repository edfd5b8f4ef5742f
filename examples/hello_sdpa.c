/* One attention head: a query attends to two keys. Built against an
 * installed attn: cc hello_sdpa.c $(pkg-config --cflags --libs attn) */
#include <attn.h>
#include <stdio.h>

int main(void) {
  float q[2] = {0, 1}, k[4] = {1, 0, 0, 1}, v[4] = {1, 2, 3, 4}, out[2], lse[1];
  attn_sdpa_desc d;
  attn_sdpa_desc_init(&d, 1, 1, 1, 1, 2, 2, 2); /* B, Hq, Hkv, Lq, Lk, D, Dv */
  attn_sdpa_args a = {.q = q, .k = k, .v = v, .out = out, .lse = lse}; /* f32, path auto */
  if (attn_sdpa_forward(&d, &a) != ATTN_OK) {
    fprintf(stderr, "attn: %s\n", attn_last_error());
    return 1;
  }
  printf("attn %s: out = %.4f %.4f\n", attn_version_string(), out[0], out[1]);
  return 0;
}
