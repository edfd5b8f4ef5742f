/* AMX-INT8 scores of the int8 flash attention: sᵀ [64 keys, 16 queries] in
 * four accumulator tiles (0..3), per 64 depth steps one Q tile (4, the VNNI
 * layout) and four K tiles (5, 6 alternating): 4 TDPBSSD (s8 x s8 -> s32,
 * exact) per chunk; then dequantized with AVX-512 in place. The caller has
 * configured the tiles (the bf16 flash's begin, kernels/amx.h). */
#include "kernels/sdpa_flash_i8.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define AMX_I8_TARGET __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512dq")))

/* GCC's tile load/store asm has no memory operand: keep vector accesses of
 * the same memory on their side (as sdpa_flash_bf16_amx.c). */
#define MEMORY_BARRIER() __asm__ volatile("" ::: "memory")

AMX_I8_TARGET static void scores_amx(const int8_t *k, int64_t ldk, int dc, const int8_t *qp,
                                     const float *sk, float *st) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int c = 0; c < dc; c++) {
    const int8_t *kc = k + 64 * c;
    _tile_loadd(4, qp + 1024 * c, 64);
    _tile_loadd(5, kc, ldk);
    _tile_loadd(6, kc + 16 * ldk, ldk);
    _tile_dpbssd(0, 5, 4);
    _tile_loadd(5, kc + 32 * ldk, ldk);
    _tile_dpbssd(1, 6, 4);
    _tile_loadd(6, kc + 48 * ldk, ldk);
    _tile_dpbssd(2, 5, 4);
    _tile_dpbssd(3, 6, 4);
  }
  _tile_stored(0, st, 64); /* int32 into st, converted in place below */
  _tile_stored(1, st + 256, 64);
  _tile_stored(2, st + 512, 64);
  _tile_stored(3, st + 768, 64);
  MEMORY_BARRIER();
  const __m512 vsq = _mm512_loadu_ps(qp + dc * 1024 + 64);
  for (int j = 0; j < 64; j++) {
    __m512 s = _mm512_cvtepi32_ps(_mm512_loadu_si512(st + j * 16));
    _mm512_storeu_ps(st + j * 16, _mm512_mul_ps(s, _mm512_mul_ps(_mm512_set1_ps(sk[j]), vsq)));
  }
}

attn_i8_scores_fn attn_flash_i8_scores_amx(void) { return scores_amx; }
#else
attn_i8_scores_fn attn_flash_i8_scores_amx(void) { return 0; }
#endif
