/* libFuzzer target: attn_decode_forward on views built from the input —
 * dtype, sizes, lengths, page size, pool size, block-table entries,
 * missing scales and the int8 layout all taken from the bytes — over tensors allocated at
 * exactly the size the view declares, so that a page number outside the
 * pool, a sequence longer than its pages or its capacity, or a wrong
 * dtype that the checks (kernels/decode/decode_check.c) let through would
 * be a read out of bounds under ASan. A refusal must say why. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"

typedef struct {
  const uint8_t *p;
  size_t n;
} bytes;

static int take(bytes *b) {
  if (!b->n) return 0;
  b->n--;
  return *b->p++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  bytes in = {data, size};
  static const int types[5] = {ATTN_F32, ATTN_F16, ATTN_BF16, ATTN_I8, ATTN_I32};
  const int vt = types[take(&in) % 5], ct = take(&in) % 4 ? vt : types[take(&in) % 5];
  const int64_t B = 1 + take(&in) % 3, Hkv = 1 + take(&in) % 2, G = 1 + take(&in) % 3;
  int64_t Lq = 1 + take(&in) % 3, D = 1 + take(&in) % 9, Dv = 1 + take(&in) % 9;
  int64_t ps = take(&in) % 6, pages = take(&in) % 9, stride = take(&in) % 5;
  int64_t cap = take(&in) % 13;
  const int flags = take(&in);
  /* the tiled layouts (attn/decode.h): mostly shapes they allow, so that
   * their kernels run over the exact tensors; sometimes a bad layout value */
  const int lsel = take(&in);
  const int layout = !(lsel & 1) ? 0
                     : lsel & 2  ? ATTN_KV_I8_TILED
                     : lsel & 16 ? ATTN_KV_K_TILED
                     : lsel & 4  ? 9
                                 : ATTN_KV_ROWS;
  if (layout == ATTN_KV_I8_TILED && !(lsel & 8)) {
    D = 4 * (1 + D % 3), Dv = 16 * (1 + Dv % 2);
    ps = ps % 2 ? 16 : 0, cap = cap % 2 ? 32 : 16;
  }
  if (layout == ATTN_KV_K_TILED && !(lsel & 8)) ps = ps % 2 ? 16 : 0, cap = cap % 2 ? 32 : 16;
  int32_t lens[3], table[3 * 4];
  for (int i = 0; i < 3; i++)
    lens[i] = (int8_t)take(&in) % 24;
  for (int i = 0; i < 12; i++)
    table[i] = (int8_t)take(&in) % 12;
  const size_t elt = attn_dtype_size((attn_dtype)vt);
  const int64_t blocks = ps ? pages : B, rows = ps ? ps : cap;
  const size_t nk = (size_t)(blocks * Hkv * rows * D), nv = (size_t)(blocks * Hkv * rows * Dv);
  const size_t ns = (size_t)(blocks * Hkv * rows);
  /* exact sizes (at least one byte, so that NULL means "missing") */
  uint8_t *k = malloc(nk * elt + 1), *v = malloc(nv * elt + 1);
  float *ks = malloc(ns * sizeof(float) + 1), *vs = malloc(ns * sizeof(float) + 1);
  float *q = malloc((size_t)(B * G * Hkv * Lq * D) * sizeof(float));
  float *out = malloc((size_t)(B * G * Hkv * Lq * Dv) * sizeof(float));
  float *lse = malloc((size_t)(B * G * Hkv * Lq) * sizeof(float));
  for (size_t i = 0; i < nk * elt; i++)
    k[i] = (uint8_t)(i * 37u);
  for (size_t i = 0; i < nv * elt; i++)
    v[i] = (uint8_t)(i * 11u);
  for (size_t i = 0; i < ns; i++)
    ks[i] = vs[i] = 0.01f;
  for (int64_t i = 0; i < B * G * Hkv * Lq * D; i++)
    q[i] = (float)(i % 7) - 3.0f;
  attn_kv_view view = {.dtype = vt,
                       .B = B,
                       .Hkv = Hkv,
                       .D = D,
                       .Dv = Dv,
                       .seq_lens = lens,
                       .k = k,
                       .v = v,
                       .k_scale = flags & 1 ? NULL : ks,
                       .v_scale = flags & 2 ? NULL : vs,
                       .capacity = cap,
                       .page_size = ps,
                       .num_pages = pages,
                       .block_table = flags & 4 ? NULL : table,
                       .block_table_stride = stride,
                       .layout = layout};
  attn_decode_desc d;
  attn_decode_desc_init(&d, B, G * Hkv, Hkv, Lq, D, Dv, ct);
  d.causal = !(flags & 8);
  d.window_left = flags & 16 ? take(&in) % 8 : -1;
  d.softcap = flags & 32 ? 3.0f : 0.0f;
  attn_clear_error();
  if (attn_decode_forward(&d, &view, q, out, flags & 64 ? NULL : lse) != ATTN_OK &&
      !attn_last_error()[0]) {
    fprintf(stderr, "fuzz: decode: a refusal without a message\n");
    abort();
  }
  free(k), free(v), free(ks), free(vs), free(q), free(out), free(lse);
  return 0;
}
