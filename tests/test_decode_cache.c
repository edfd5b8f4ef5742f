/* attn_kvc (attn/decode.h): append, truncate (rollback), copy, reset and
 * the page pool, each checked through what attn_decode_forward then
 * computes or through attn_kvc_read; and the cache's own refusals. */
#include "decode_case.h"

/* out of a decode over c's content for seeded queries */
static void decode_out(attn_kvc *c, int dtype, int64_t Hq, int64_t Hkv, int64_t D, float *out) {
  attn_kv_view v;
  CHECK_OK(attn_kvc_view(c, &v));
  attn_decode_desc d;
  attn_decode_desc_init(&d, v.B, Hq, Hkv, 1, D, D, dtype);
  d.bf16_f32 = 1; /* the layouts compared on the same arithmetic (the bf16 dot products round
                     q in the K-tiled scores only: test_decode checks them) */
  float *q = malloc((size_t)(v.B * Hq * D) * 4);
  fill_uniform(q, (long)(v.B * Hq * D), 99, -1, 1);
  CHECK_OK(attn_decode_forward(&d, &v, q, out, NULL));
  free(q);
}

/* rollback: append 10 rows, truncate to 6, append 4 others = a cache that
 * got the 6 and the 4 directly (bits), for every storage and layout */
static void test_truncate_is_rollback(void) {
  enum { H = 2, D = 16, N = 10 };
  static const int types[] = {ATTN_F32, ATTN_F16, ATTN_BF16, ATTN_I8};
  float k[H * N * D], v[H * N * D], k2[H * 4 * D], v2[H * 4 * D];
  fill_uniform(k, H * N * D, 1, -1, 1);
  fill_uniform(v, H * N * D, 2, -1, 1);
  fill_uniform(k2, H * 4 * D, 3, -1, 1);
  fill_uniform(v2, H * 4 * D, 4, -1, 1);
  for (int t = 0; t < 4; t++)
    for (int ps = 0; ps <= 3; ps += 3) {
      attn_kvc_config cfg = {
          .dtype = types[t], .B = 1, .Hkv = H, .D = D, .Dv = D, .max_len = 32, .page_size = ps};
      attn_kvc *a, *b;
      CHECK_OK(attn_kvc_create(&a, &cfg));
      CHECK_OK(attn_kvc_create(&b, &cfg));
      CHECK_OK(attn_kvc_append(a, 0, k, v, N)); /* [H, 10, D] */
      CHECK_OK(attn_kvc_truncate(a, 0, 6));
      CHECK(attn_kvc_len(a, 0) == 6);
      CHECK_OK(attn_kvc_append(a, 0, k2, v2, 4));
      float k6[H * 6 * D], v6[H * 6 * D];
      for (int g = 0; g < H; g++) {
        memcpy(k6 + g * 6 * D, k + g * N * D, 6 * D * 4);
        memcpy(v6 + g * 6 * D, v + g * N * D, 6 * D * 4);
      }
      CHECK_OK(attn_kvc_append(b, 0, k6, v6, 6));
      CHECK_OK(attn_kvc_append(b, 0, k2, v2, 4));
      float oa[2 * D], ob[2 * D];
      decode_out(a, types[t], 2, H, D, oa);
      decode_out(b, types[t], 2, H, D, ob);
      CHECK(!memcmp(oa, ob, sizeof oa));
      attn_kvc_free(a), attn_kvc_free(b);
    }
}

/* a paged pool: pages given back by truncate are taken again; a full pool
 * refuses an append with ATTN_ENOMEM and leaves the sequence as it was */
static void test_page_pool(void) {
  enum { D = 8 };
  attn_kvc_config cfg = {.dtype = ATTN_F32,
                         .B = 2,
                         .Hkv = 1,
                         .D = D,
                         .Dv = D,
                         .max_len = 40,
                         .page_size = 4,
                         .num_pages = 5};
  attn_kvc *c;
  CHECK_OK(attn_kvc_create(&c, &cfg));
  float x[40 * D];
  fill_uniform(x, 40 * D, 5, -1, 1);
  CHECK_OK(attn_kvc_append(c, 0, x, x, 13));              /* 4 pages */
  CHECK_ERR(attn_kvc_append(c, 1, x, x, 5), ATTN_ENOMEM); /* needs 2, 1 free */
  CHECK(strstr(attn_last_error(), "pool") != NULL);
  CHECK(attn_kvc_len(c, 1) == 0);
  CHECK_OK(attn_kvc_append(c, 1, x, x, 4)); /* the last page */
  CHECK_ERR(attn_kvc_append(c, 0, x, x, 4), ATTN_ENOMEM);
  CHECK(attn_kvc_len(c, 0) == 13);
  CHECK_OK(attn_kvc_truncate(c, 0, 5)); /* pages 3, 4 of sequence 0 back */
  CHECK_OK(attn_kvc_append(c, 1, x + 4 * D, x + 4 * D, 8));
  CHECK(attn_kvc_len(c, 1) == 12);
  /* what sequence 1 holds reads back as appended (rows 0..11 of x) */
  float r[D];
  for (int t = 0; t < 12; t++) {
    CHECK_OK(attn_kvc_read(c, 1, 0, t, r, NULL));
    CHECK(!memcmp(r, x + t * D, sizeof r));
  }
  attn_kv_view v;
  CHECK_OK(attn_kvc_view(c, &v));
  CHECK(v.page_size == 4 && v.num_pages == 5 && v.block_table_stride == 10);
  attn_kvc_reset(c);
  CHECK(attn_kvc_len(c, 0) == 0 && attn_kvc_len(c, 1) == 0);
  CHECK_OK(attn_kvc_append(c, 0, x, x, 20)); /* all five pages again */
  attn_kvc_free(c);
}

/* copy_seq (beam search): the copy decodes to the same bits as its source */
static void test_copy_seq(void) {
  enum { H = 2, D = 16 };
  for (int ps = 0; ps <= 5; ps += 5) {
    attn_kvc_config cfg = {
        .dtype = ATTN_I8, .B = 2, .Hkv = H, .D = D, .Dv = D, .max_len = 30, .page_size = ps};
    attn_kvc *c;
    CHECK_OK(attn_kvc_create(&c, &cfg));
    float x[H * 21 * D], y[H * 3 * D];
    fill_uniform(x, H * 21 * D, 6, -1, 1);
    fill_uniform(y, H * 3 * D, 7, -1, 1);
    CHECK_OK(attn_kvc_append(c, 0, x, x, 21));
    CHECK_OK(attn_kvc_append(c, 1, y, y, 3));
    CHECK_OK(attn_kvc_copy_seq(c, 1, 0));
    CHECK(attn_kvc_len(c, 1) == 21);
    float o[2 * 2 * D];
    decode_out(c, ATTN_I8, 2, H, D, o); /* the same queries per sequence? no: seeded per b */
    float r0[D], r1[D];
    for (int t = 0; t < 21; t++) {
      CHECK_OK(attn_kvc_read(c, 0, 1, t, r0, NULL));
      CHECK_OK(attn_kvc_read(c, 1, 1, t, r1, NULL));
      CHECK(!memcmp(r0, r1, sizeof r0));
    }
    attn_kvc_free(c);
  }
}

static void test_cache_refusals(void) {
  attn_kvc *c = NULL;
  attn_kvc_config cfg = {.dtype = ATTN_I32, .B = 1, .Hkv = 1, .D = 4, .Dv = 4, .max_len = 8};
  CHECK_ERR(attn_kvc_create(&c, &cfg), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "dtype") != NULL);
  cfg.dtype = ATTN_F16;
  cfg.max_len = 0;
  CHECK_ERR(attn_kvc_create(&c, &cfg), ATTN_EINVAL);
  cfg.max_len = 8;
  cfg.num_pages = 3; /* a pool without pages */
  CHECK_ERR(attn_kvc_create(&c, &cfg), ATTN_EINVAL);
  cfg.num_pages = 0;
  CHECK_OK(attn_kvc_create(&c, &cfg));
  float x[4 * 9] = {0};
  CHECK_ERR(attn_kvc_append(c, 0, x, x, 9), ATTN_EINVAL); /* past max_len */
  CHECK(strstr(attn_last_error(), "max_len") != NULL);
  CHECK_ERR(attn_kvc_append(c, 1, x, x, 1), ATTN_EINVAL); /* no sequence 1 */
  CHECK_ERR(attn_kvc_append(c, 0, NULL, x, 1), ATTN_EINVAL);
  CHECK_OK(attn_kvc_append(c, 0, x, x, 2));
  CHECK_ERR(attn_kvc_truncate(c, 0, 3), ATTN_EINVAL);
  CHECK_ERR(attn_kvc_read(c, 0, 0, 2, x, NULL), ATTN_EINVAL);
  CHECK(attn_kvc_len(c, 5) == -1);
  attn_kvc_free(c);
}

/* int8 rows: the scale max|x| / 127 per token and head, values within half
 * a step; a zero row stays zero; NaN never becomes an out-of-range cast */
static void test_int8_quantization(void) {
  attn_kvc_config cfg = {.dtype = ATTN_I8, .B = 1, .Hkv = 2, .D = 5, .Dv = 5, .max_len = 4};
  attn_kvc *c;
  CHECK_OK(attn_kvc_create(&c, &cfg));
  float k[2 * 5] = {0.5f, -1.0f, 0.25f, 0.0f, 0.9f, 0, 0, 0, 0, 0};
  float v[2 * 5] = {1e-3f, 2, NAN, -2, 1, 3, 3, 3, 3, 3};
  CHECK_OK(attn_kvc_append(c, 0, k, v, 1));
  float r[5];
  CHECK_OK(attn_kvc_read(c, 0, 0, 0, r, NULL));
  for (int i = 0; i < 5; i++)
    CHECK(fabsf(r[i] - k[i]) <= 0.5f / 127.0f + 1e-7f);
  CHECK_OK(attn_kvc_read(c, 0, 1, 0, r, NULL));
  for (int i = 0; i < 5; i++)
    CHECK(r[i] == 0.0f);
  CHECK_OK(attn_kvc_read(c, 0, 0, 0, NULL, r));
  CHECK(r[1] == 2.0f && r[3] == -2.0f && r[2] == 0.0f);
  attn_kvc_free(c);
}

/* A tiled layout against rows: the same appends (in pieces that cross
 * tiles and quads), a truncate, more appends and a copy give the same rows
 * (attn_kvc_read) and the same decode (int8 tiled: the same bits; K-tiled
 * f16 and bf16: within rounding, the order of the scores' sums),
 * contiguous and paged; what the layout needs is refused by name (the
 * cache's and the view's). */
static void tiled_vs_rows(int dtype, int layout) {
  enum { H = 2, D = 16, N = 40 };
  float k[H * N * D], v[H * N * D];
  fill_uniform(k, H * N * D, 8, -1, 1);
  fill_uniform(v, H * N * D, 9, -1, 1);
  static const int pieces[] = {5, 13, 9};
  for (int ps = 0; ps <= 32; ps += 16) {
    attn_kvc *c[2];
    for (int l = 0; l < 2; l++) {
      attn_kvc_config cfg = {.dtype = dtype,
                             .B = 2,
                             .Hkv = H,
                             .D = D,
                             .Dv = D,
                             .max_len = 45,
                             .page_size = ps,
                             .layout = l ? layout : ATTN_KV_ROWS};
      CHECK_OK(attn_kvc_create(&c[l], &cfg));
      int t0 = 0;
      for (int i = 0; i < 3; i++) { /* [H, n, D] pieces of the [H, N, D] rows */
        const int n = pieces[i];
        float kn[H * 13 * D], vn[H * 13 * D];
        for (int g = 0; g < H; g++) {
          memcpy(kn + g * n * D, k + (g * N + t0) * D, (size_t)n * D * 4);
          memcpy(vn + g * n * D, v + (g * N + t0) * D, (size_t)n * D * 4);
        }
        CHECK_OK(attn_kvc_append(c[l], 0, kn, vn, n));
        t0 += n;
      }
      CHECK_OK(attn_kvc_truncate(c[l], 0, 20));
      CHECK_OK(attn_kvc_append(c[l], 0, k, v, 7));
      CHECK_OK(attn_kvc_append(c[l], 1, v, k, 3));
      CHECK_OK(attn_kvc_copy_seq(c[l], 1, 0));
      CHECK_OK(attn_kvc_append(c[l], 1, k, v, 2));
      attn_kv_view view;
      CHECK_OK(attn_kvc_view(c[l], &view));
      CHECK(view.layout == (l ? layout : ATTN_KV_ROWS));
    }
    for (int b = 0; b < 2; b++)
      for (int g = 0; g < H; g++)
        for (int t = 0; t < attn_kvc_len(c[0], b); t++) {
          float r0[2 * D], r1[2 * D];
          CHECK_OK(attn_kvc_read(c[0], b, g, t, r0, r0 + D));
          CHECK_OK(attn_kvc_read(c[1], b, g, t, r1, r1 + D));
          CHECK(!memcmp(r0, r1, sizeof r0));
        }
    float o0[2 * 4 * D], o1[2 * 4 * D];
    decode_out(c[0], dtype, 4, H, D, o0);
    decode_out(c[1], dtype, 4, H, D, o1);
    if (layout == ATTN_KV_I8_TILED)
      CHECK(!memcmp(o0, o1, sizeof o0));
    else
      CHECK_CLOSE("K-tiled out", o1, o0, 2 * 4 * D, 1e-5, 1e-5);
    if (ps == 16 && layout == ATTN_KV_K_TILED) { /* a K-tiled view of another dtype */
      attn_kv_view view;
      CHECK_OK(attn_kvc_view(c[1], &view));
      attn_decode_desc d;
      attn_decode_desc_init(&d, 2, 4, H, 1, D, D, ATTN_F32);
      view.dtype = ATTN_F32;
      float q[2 * 4 * D] = {0};
      CHECK_ERR(attn_decode_forward(&d, &view, q, o0, NULL), ATTN_EINVAL);
      CHECK(strstr(attn_last_error(), "K-tiled layout") != NULL);
    }
    if (ps == 16 && layout == ATTN_KV_I8_TILED) { /* a view that says tiled over shapes that
                                                     cannot be */
      attn_kv_view view;
      CHECK_OK(attn_kvc_view(c[1], &view));
      attn_decode_desc d;
      attn_decode_desc_init(&d, 2, 4, H, 1, D, 12, ATTN_I8);
      view.Dv = 12;
      float q[2 * 4 * D] = {0}, out[2 * 4 * 12];
      CHECK_ERR(attn_decode_forward(&d, &view, q, out, NULL), ATTN_EINVAL);
      CHECK(strstr(attn_last_error(), "tiled layout") != NULL);
      view.Dv = D;
      view.layout = 7;
      d.Dv = D;
      CHECK_ERR(attn_decode_forward(&d, &view, q, o0, NULL), ATTN_EINVAL);
      CHECK(strstr(attn_last_error(), "layout 7") != NULL);
    }
    attn_kvc_free(c[0]), attn_kvc_free(c[1]);
  }
}

static void test_tiled_layout(void) {
  tiled_vs_rows(ATTN_I8, ATTN_KV_I8_TILED);
  tiled_vs_rows(ATTN_F16, ATTN_KV_K_TILED);
  tiled_vs_rows(ATTN_BF16, ATTN_KV_K_TILED);
  attn_kvc *c = NULL;
  attn_kvc_config cfg = {.dtype = ATTN_I8,
                         .B = 1,
                         .Hkv = 1,
                         .D = 6,
                         .Dv = 16,
                         .max_len = 8,
                         .layout = ATTN_KV_I8_TILED};
  CHECK_ERR(attn_kvc_create(&c, &cfg), ATTN_EINVAL); /* D % 4 */
  CHECK(strstr(attn_last_error(), "D 6") != NULL);
  cfg.D = 8, cfg.page_size = 8; /* pages of half a tile */
  CHECK_ERR(attn_kvc_create(&c, &cfg), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "page_size 8") != NULL);
  cfg.page_size = 16, cfg.dtype = ATTN_F16;
  CHECK_ERR(attn_kvc_create(&c, &cfg), ATTN_EINVAL);
  cfg.dtype = ATTN_I8, cfg.layout = 5;
  CHECK_ERR(attn_kvc_create(&c, &cfg), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "layout 5") != NULL);
  cfg.layout = 0, cfg.D = 6; /* the library's choice where tiles cannot be: rows */
  CHECK_OK(attn_kvc_create(&c, &cfg));
  attn_kv_view view;
  CHECK_OK(attn_kvc_view(c, &view));
  CHECK(view.layout == ATTN_KV_ROWS);
  attn_kvc_free(c);
  /* K-tiled: f16 and bf16 only, pages of whole tiles */
  cfg.layout = ATTN_KV_K_TILED, cfg.D = 8, cfg.page_size = 16; /* int8 */
  CHECK_ERR(attn_kvc_create(&c, &cfg), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "K-tiled layout") != NULL);
  cfg.dtype = ATTN_F32;
  CHECK_ERR(attn_kvc_create(&c, &cfg), ATTN_EINVAL);
  cfg.dtype = ATTN_BF16, cfg.page_size = 24;
  CHECK_ERR(attn_kvc_create(&c, &cfg), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "page_size 24") != NULL);
  cfg.page_size = 0, cfg.max_len = 5; /* contiguous: rows rounded up to a tile */
  CHECK_OK(attn_kvc_create(&c, &cfg));
  CHECK_OK(attn_kvc_view(c, &view));
  CHECK(view.layout == ATTN_KV_K_TILED && view.capacity == 16);
  view.capacity = 8; /* a view whose blocks are not whole tiles */
  attn_decode_desc d;
  attn_decode_desc_init(&d, 1, 1, 1, 1, 8, 16, ATTN_BF16);
  float q[8] = {0}, out[16];
  CHECK_ERR(attn_decode_forward(&d, &view, q, out, NULL), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "capacity 8") != NULL);
  attn_kvc_free(c);
}

int main(void) {
  RUN(test_truncate_is_rollback);
  RUN(test_page_pool);
  RUN(test_copy_seq);
  RUN(test_cache_refusals);
  RUN(test_int8_quantization);
  RUN(test_tiled_layout);
  HARNESS_END();
}
