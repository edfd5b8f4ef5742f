/* AMX + AVX-512 tile kernels of the bf16 flash attention (selected at run
 * time when the CPU has AMX-BF16 and AVX512_BF16 and the tile permission).
 *
 * scores: sᵀ [64 keys, 16 queries] in four accumulator tiles (0..3), per 32
 *   depth steps one Q tile (4) and four K tiles (5, 6 alternating): 4
 *   TDPBF16PS per chunk.
 * softmax: one zmm per key row (16 query lanes). When every lane has a
 *   running max, one pass against it (p = 2^((t - m) log2 e), exp2_or_zero),
 *   kept unless some exponent exceeds TAU; else a max pass and the exp pass
 *   against the moved max. Two running sums; each pair of key rows rounded
 *   to bf16 and interleaved (VCVTNE2PS2BF16 + VPERMW) into the VNNI rows of
 *   the p tiles.
 * accum: oᵀ [Dv, 16] rescaled by alpha with AVX-512 only when some alpha
 *   != 1, then four oᵀ tiles at a time loaded as accumulators (0..3), += vᵀ
 *   tiles (4, 5) times the two p tiles (6, 7).
 * Backward: probs_grad recomputes p from lse the same way and writes p, ds
 *   as bf16 rows of A tiles and ds as B tiles; accum_t adds A·B over query
 *   chunks into accumulator tiles loaded from and stored to memory. */
#include "kernels/flash/sdpa_flash_bf16.h"

#if defined(__x86_64__)
#include <immintrin.h>
#include <math.h>

#include "kernels/arch/amx/amx.h"

#define AMX_TARGET                                                                                 \
  __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c")))

enum { BC = ATTN_BF16_BC, QT = ATTN_BF16_QT };

/* GCC's _tile_loadd is an asm without a memory operand or clobber: without
 * this barrier, vector stores before a tile load of the same memory may be
 * moved after it. */
#define MEMORY_BARRIER() __asm__ volatile("" ::: "memory")

AMX_TARGET static void scores_amx(const uint16_t *k, int64_t ldk, int dc, int np,
                                  const uint16_t *qp, float *st) {
  (void)np;
  const int64_t s = ldk * 2; /* bytes */
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int c = 0; c < dc; c++) {
    const uint16_t *kc = k + 32 * c;
    _tile_loadd(4, qp + 512 * c, 64);
    _tile_loadd(5, kc, s);
    _tile_loadd(6, kc + 16 * ldk, s);
    _tile_dpbf16ps(0, 5, 4);
    _tile_loadd(5, kc + 32 * ldk, s);
    _tile_dpbf16ps(1, 6, 4);
    _tile_loadd(6, kc + 48 * ldk, s);
    _tile_dpbf16ps(2, 5, 4);
    _tile_dpbf16ps(3, 6, 4);
  }
  _tile_stored(0, st, 64);
  _tile_stored(1, st + 256, 64);
  _tile_stored(2, st + 512, 64);
  _tile_stored(3, st + 768, 64);
}

AMX_TARGET static void accum_amx(float *ot, int dvt, const float *alpha, const uint16_t *vt,
                                 const uint16_t *p) {
  if (alpha) {
    __m512 a = _mm512_loadu_ps(alpha);
    for (int r = 0; r < dvt * 16; r++)
      _mm512_storeu_ps(ot + r * QT, _mm512_mul_ps(a, _mm512_loadu_ps(ot + r * QT)));
  }
  MEMORY_BARRIER();
  _tile_loadd(6, p, 64);
  _tile_loadd(7, p + 512, 64);
  int dt = 0;
  for (; dt + 4 <= dvt; dt += 4) {
    float *o = ot + dt * 256;
    const uint16_t *v = vt + dt * 16 * BC;
    _tile_loadd(0, o, 64);
    _tile_loadd(1, o + 256, 64);
    _tile_loadd(2, o + 512, 64);
    _tile_loadd(3, o + 768, 64);
    _tile_loadd(4, v, 128);
    _tile_loadd(5, v + 32, 128);
    _tile_dpbf16ps(0, 4, 6);
    _tile_loadd(4, v + 16 * BC, 128);
    _tile_dpbf16ps(0, 5, 7);
    _tile_loadd(5, v + 16 * BC + 32, 128);
    _tile_dpbf16ps(1, 4, 6);
    _tile_loadd(4, v + 32 * BC, 128);
    _tile_dpbf16ps(1, 5, 7);
    _tile_loadd(5, v + 32 * BC + 32, 128);
    _tile_dpbf16ps(2, 4, 6);
    _tile_loadd(4, v + 48 * BC, 128);
    _tile_dpbf16ps(2, 5, 7);
    _tile_loadd(5, v + 48 * BC + 32, 128);
    _tile_dpbf16ps(3, 4, 6);
    _tile_dpbf16ps(3, 5, 7);
    _tile_stored(0, o, 64);
    _tile_stored(1, o + 256, 64);
    _tile_stored(2, o + 512, 64);
    _tile_stored(3, o + 768, 64);
  }
  for (; dt < dvt; dt++) {
    float *o = ot + dt * 256;
    const uint16_t *v = vt + dt * 16 * BC;
    _tile_loadd(0, o, 64);
    _tile_loadd(4, v, 128);
    _tile_loadd(5, v + 32, 128);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(0, 5, 7);
    _tile_stored(0, o, 64);
  }
}

AMX_TARGET static void accum_t_amx(float *acc, int ntc, const uint16_t *a, int64_t lda,
                                   const uint16_t *b, int nqc) {
  const int64_t sa = lda * 2;
  for (int kt = 0; kt < 4; kt++) {
    int ct = 0;
    for (; ct + 4 <= ntc; ct += 4) {
      float *c = acc + (kt * ntc + ct) * 256;
      _tile_loadd(0, c, 64);
      _tile_loadd(1, c + 256, 64);
      _tile_loadd(2, c + 512, 64);
      _tile_loadd(3, c + 768, 64);
      for (int qc = 0; qc < nqc; qc++) {
        const uint16_t *bt = b + (qc * ntc + ct) * 512;
        _tile_loadd(4, a + kt * 16 * lda + qc * 32, sa);
        _tile_loadd(5, bt, 64);
        _tile_loadd(6, bt + 512, 64);
        _tile_dpbf16ps(0, 4, 5);
        _tile_loadd(5, bt + 1024, 64);
        _tile_dpbf16ps(1, 4, 6);
        _tile_loadd(6, bt + 1536, 64);
        _tile_dpbf16ps(2, 4, 5);
        _tile_dpbf16ps(3, 4, 6);
      }
      _tile_stored(0, c, 64);
      _tile_stored(1, c + 256, 64);
      _tile_stored(2, c + 512, 64);
      _tile_stored(3, c + 768, 64);
    }
    for (; ct < ntc; ct++) {
      float *c = acc + (kt * ntc + ct) * 256;
      _tile_loadd(0, c, 64);
      for (int qc = 0; qc < nqc; qc++) {
        _tile_loadd(4, a + kt * 16 * lda + qc * 32, sa);
        _tile_loadd(5, b + (qc * ntc + ct) * 512, 64);
        _tile_dpbf16ps(0, 4, 5);
      }
      _tile_stored(0, c, 64);
    }
  }
}

static const attn_flash_bf16_ops amx_ops = {"amx",
                                            attn_amx_config_tiles,
                                            attn_amx_release_tiles,
                                            scores_amx,
                                            attn_flash_bf16_softmax_avx512,
                                            accum_amx,
                                            attn_flash_bf16_probs_grad_avx512,
                                            accum_t_amx};

const attn_flash_bf16_ops *attn_flash_bf16_ops_amx(void) { return &amx_ops; }
#else
const attn_flash_bf16_ops *attn_flash_bf16_ops_amx(void) { return 0; }
#endif
