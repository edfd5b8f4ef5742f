/* The modifier table (src/kernels/sdpa_modifiers.c) against the kernels
 * themselves: every modifier set alone on a small call, each kernel called
 * directly (0.1's entry points, which skip the table) forward and backward,
 * dense and packed varlen; the kernel must accept the call exactly where the
 * table says it runs (and refuse with ATTN_EUNSUPPORTED elsewhere). Then the
 * entry (attn_sdpa_forward) refuses the same calls up front, naming the
 * field and the kernel, and accepts the others. */
#include <stdint.h>
#include <string.h>

#include "attn.h"
#include "harness.h"
#include "kernels/sdpa/sdpa_modifiers.h"

enum { B = 2, H = 2, L = 8, D = 8, M = 3 };

static int allow_all(int64_t b, int64_t h, int64_t i, int64_t j, void *u) {
  (void)b, (void)h, (void)i, (void)j, (void)u;
  return 1;
}

static float q[B * H * L * D], k[B * H * L * D], v[B * H * L * D], dout[B * H * L * D];
static uint16_t qh[B * H * L * D], kh[B * H * L * D], vh[B * H * L * D];
static float out[B * H * L * D], lse[B * H * L], dq[B * H * L * D], dk[B * H * L * D],
    dv[B * H * L * D];
static uint8_t ones_u8[L * L], blocks[4] = {1, 1, 1, 1};
static float zeros_f[L * L], slopes[H] = {0.5f, 0.25f}, rel[H * 8], shaw[(2 * M - 1) * D],
                             sinks[H] = {0.3f, -0.2f};
static int32_t key_lens[B] = {8, 5}, prefix[B] = {2, 1}, cu[B + 1] = {0, L, 2 * L};
static int64_t q_offsets[B] = {0, 1};
static const attn_sdpa_mods mods = {.mask_mod = allow_all};

/* d with modifier i of the table set alone. */
static void with_modifier(int i, attn_sdpa_desc *d) {
  attn_sdpa_desc_init(d, B, H, H, L, L, D, D);
  const char *f = attn_sdpa_modifier_at(i)->field;
  if (!strcmp(f, "causal")) d->causal = 1;
  if (!strcmp(f, "prefix_lens")) d->causal = 1, d->prefix_lens = prefix;
  if (!strcmp(f, "window_left/window_right")) d->window_left = 2;
  if (!strcmp(f, "key_lens")) d->key_lens = key_lens;
  if (!strcmp(f, "q_offset")) d->q_offset = 1;
  if (!strcmp(f, "q_offsets")) d->q_offsets = q_offsets;
  if (!strcmp(f, "bool_mask")) {
    d->bool_mask = ones_u8;
    const int64_t s[4] = {0, 0, L, 1};
    memcpy(d->bool_mask_stride, s, sizeof s);
  }
  if (!strcmp(f, "add_mask")) {
    d->add_mask = zeros_f;
    const int64_t s[4] = {0, 0, L, 1};
    memcpy(d->add_mask_stride, s, sizeof s);
  }
  if (!strcmp(f, "block_mask")) d->block_mask = blocks, d->block_size = 4;
  if (!strcmp(f, "mods")) d->mods = &mods;
  if (!strcmp(f, "softcap")) d->softcap = 5.0f;
  if (!strcmp(f, "alibi_slopes")) d->alibi_slopes = slopes;
  if (!strcmp(f, "rel_bias")) {
    d->rel_bias = rel, d->rel_buckets = 8, d->rel_max_distance = 16, d->rel_bidirectional = 1;
  }
  if (!strcmp(f, "shaw_k/shaw_v")) d->shaw_k = shaw, d->shaw_v = shaw, d->shaw_max = M;
  if (!strcmp(f, "sinks")) d->sinks = sinks;
  if (!strcmp(f, "dropout_p")) d->dropout_p = 0.1f, d->dropout_seed = 7;
}

/* Kernel kb (one ATTN_SK_* bit) called directly; bwd: the backward too. */
static attn_status call_kernel(unsigned kb, int varlen, int bwd, const attn_sdpa_desc *d) {
  const attn_sdpa_varlen vl = {cu, cu, B * L, B * L};
  attn_status st;
  attn_sdpa_desc x = *d;
  if (varlen) x.B = B; /* B sequences of L */
  switch (kb) {
  case ATTN_SK_MATH:
  case ATTN_SK_FLASH: {
    const attn_backend be = kb == ATTN_SK_MATH ? ATTN_BACKEND_MATH : ATTN_BACKEND_FLASH;
    st = varlen ? attn_sdpa_varlen_forward(&x, &vl, be, q, k, v, out, lse)
                : attn_sdpa_forward_f32(&x, be, q, k, v, out, lse, NULL);
    if (st || !bwd) return st;
    return varlen ? attn_sdpa_varlen_backward(&x, &vl, be, q, k, v, out, lse, dout, dq, dk, dv)
                  : attn_sdpa_backward_f32(&x, be, q, k, v, out, lse, dout, dq, dk, dv);
  }
  case ATTN_SK_BF16:
    st = varlen ? attn_sdpa_varlen_forward_bf16(&x, &vl, qh, kh, vh, out, lse)
                : attn_sdpa_forward_bf16(&x, qh, kh, vh, out, lse);
    if (st || !bwd) return st;
    return varlen ? attn_sdpa_varlen_backward_bf16(&x, &vl, qh, kh, vh, out, lse, dout, dq, dk, dv)
                  : attn_sdpa_backward_bf16(&x, qh, kh, vh, out, lse, dout, dq, dk, dv);
  case ATTN_SK_F16:
    st = varlen ? attn_sdpa_varlen_forward_f16(&x, &vl, qh, kh, vh, out, lse)
                : attn_sdpa_forward_f16(&x, qh, kh, vh, out, lse);
    if (st || !bwd) return st;
    return varlen ? attn_sdpa_varlen_backward_f16(&x, &vl, qh, kh, vh, out, lse, dout, dq, dk, dv)
                  : attn_sdpa_backward_f16(&x, qh, kh, vh, out, lse, dout, dq, dk, dv);
  default:
    return varlen ? attn_sdpa_varlen_forward_i8(&x, &vl, q, k, v, out, lse)
                  : attn_sdpa_forward_i8(&x, q, k, v, out, lse);
  }
}

static void test_table_matches_the_kernels(void) {
  static const unsigned kernels[] = {ATTN_SK_MATH, ATTN_SK_FLASH, ATTN_SK_BF16, ATTN_SK_F16,
                                     ATTN_SK_I8};
  char buf[128];
  for (int i = 0; i < attn_sdpa_modifier_count(); i++) {
    const attn_sdpa_modifier *m = attn_sdpa_modifier_at(i);
    attn_sdpa_desc d;
    with_modifier(i, &d);
    CHECK(m->present(&d));
    for (unsigned x = 0; x < 5; x++)
      for (int varlen = 0; varlen < 2; varlen++) {
        const unsigned kb = kernels[x];
        const int want = (m->kernels & kb) && (!varlen || (m->kernels & ATTN_SK_VARLEN));
        const attn_status st = call_kernel(kb, varlen, kb != ATTN_SK_I8, &d);
        /* a dense-only field in the packed layout: ATTN_EINVAL */
        const attn_status refusal = varlen && m->dense_only ? ATTN_EINVAL : ATTN_EUNSUPPORTED;
        if (st != ATTN_OK && st != refusal)
          printf("  %s in %s%s: %s\n", m->field, attn_sdpa_kernel_names(kb, buf, sizeof buf),
                 varlen ? " (varlen)" : "", attn_last_error());
        if ((st == ATTN_OK) != want) {
          printf("  %s in %s%s: the table says %s, the kernel %s\n", m->field,
                 attn_sdpa_kernel_names(kb, buf, sizeof buf), varlen ? " (varlen)" : "",
                 want ? "runs" : "refuses", st == ATTN_OK ? "runs it" : attn_last_error());
          CHECK(0);
        }
        CHECK(st == ATTN_OK || st == refusal);
      }
  }
}

/* The entry refuses what the table refuses before any kernel runs (the
 * message names the field and the kernel) and routes the rest. */
static void test_entry_refuses_up_front(void) {
  static const int dtypes[] = {ATTN_F32, ATTN_BF16, ATTN_F16, ATTN_I8};
  static const unsigned bits[] = {ATTN_SK_FLASH, ATTN_SK_BF16, ATTN_SK_F16, ATTN_SK_I8};
  for (int i = 0; i < attn_sdpa_modifier_count(); i++) {
    const attn_sdpa_modifier *m = attn_sdpa_modifier_at(i);
    attn_sdpa_desc d;
    with_modifier(i, &d);
    for (int t = 0; t < 4; t++) {
      const int lowp = dtypes[t] == ATTN_BF16 || dtypes[t] == ATTN_F16;
      attn_sdpa_args a = {.dtype = dtypes[t],
                          .path = ATTN_PATH_FLASH,
                          .q = lowp ? (void *)qh : q,
                          .k = lowp ? (void *)kh : k,
                          .v = lowp ? (void *)vh : v,
                          .out = out,
                          .lse = lse};
      attn_status st = attn_sdpa_forward(&d, &a);
      if (m->kernels & bits[t]) {
        CHECK_OK(st);
      } else {
        CHECK(st == ATTN_EUNSUPPORTED);
        CHECK(strstr(attn_last_error(), m->field) && strstr(attn_last_error(), "runs in"));
      }
      /* the packed layout: the same, and the dense-only fields refused as invalid */
      const attn_sdpa_varlen vl = {cu, cu, B * L, B * L};
      a.varlen = &vl;
      st = attn_sdpa_forward(&d, &a);
      if (m->dense_only) {
        CHECK(st == ATTN_EINVAL && strstr(attn_last_error(), m->field));
      } else if ((m->kernels & bits[t]) && (m->kernels & ATTN_SK_VARLEN)) {
        CHECK_OK(st);
      } else {
        CHECK(st == ATTN_EUNSUPPORTED && strstr(attn_last_error(), m->field));
      }
      a.varlen = NULL;
      /* f32 auto: flash, or else math; bf16 / fp16 math: the widened math path */
      if (dtypes[t] != ATTN_I8) {
        a.path = dtypes[t] == ATTN_F32 ? ATTN_PATH_AUTO : ATTN_PATH_MATH;
        CHECK_OK(attn_sdpa_forward(&d, &a));
      }
    }
  }
}

int main(void) {
  attn_set_num_threads(1);
  fill_uniform(q, B * H * L * D, 1, -1, 1);
  fill_uniform(k, B * H * L * D, 2, -1, 1);
  fill_uniform(v, B * H * L * D, 3, -1, 1);
  fill_uniform(dout, B * H * L * D, 4, -1, 1);
  for (int i = 0; i < B * H * L * D; i++)
    qh[i] = attn_f32_to_bf16(q[i]), kh[i] = attn_f32_to_bf16(k[i]), vh[i] = attn_f32_to_bf16(v[i]);
  memset(ones_u8, 1, sizeof ones_u8);
  RUN(test_table_matches_the_kernels);
  RUN(test_entry_refuses_up_front);
  HARNESS_END();
}
