/* The instruction sets of the x86 ISA levels as function attributes, one
 * definition for every file of a level (dispatch.c runs a level's code only
 * on a CPU that has all of its set). Include from x86-64 code only. */
#ifndef ATTN_ISA_TARGETS_H
#define ATTN_ISA_TARGETS_H

/* avx2: Haswell and later, Zen 1 and later */
#define ATTN_AVX2 __attribute__((target("avx2,fma,f16c")))
#define ATTN_AVX2_INLINE __attribute__((target("avx2,fma,f16c"), always_inline)) static inline
/* avx512: F, BW, VL, DQ (Skylake-X and later, Zen 4 and later), with AVX2's set */
#define ATTN_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")))
#define ATTN_AVX512_INLINE                                                                         \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c"), always_inline))      \
  static inline
/* avx512 with AVX512_BF16 (VDPBF16PS, VCVTNE2PS2BF16): Cooper Lake,
 * Sapphire Rapids, Zen 4; used only where the CPU has it (dispatch.c) */
#define ATTN_AVX512_BF16                                                                           \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c")))
#define ATTN_AVX512_BF16_INLINE                                                                    \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c"),            \
                 always_inline)) static inline

#endif
