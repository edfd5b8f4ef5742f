/* attn — kernels: pure functions on pointers + shapes. f32 unless the name
 * says otherwise. Row-major. Backward functions OVERWRITE their outputs unless
 * documented as accumulating ("_acc"). All return ATTN_OK or an error status
 * with a message (negative sizes, NULL pointers where data is required). */
#ifndef ATTN_KERNELS_H
#define ATTN_KERNELS_H

#include <stdint.h>

#include "attn/api.h"
#include "attn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- CPU features, ISA levels and threads ---------------------------------
 * At first use attn picks one ISA level: the best that both the CPU and the
 * build have, capped by the environment variable ATTN_CPU (generic, avx2,
 * avx512, neon or native = the best). Every kernel then runs that level's
 * micro-kernels; the AVX-512 level also uses the low-precision units the CPU
 * has (AVX512_BF16, VNNI, AMX). An unknown or unavailable ATTN_CPU value
 * falls back to the best level (attn_isa_reason() says so; the attn tool
 * refuses it). Results are deterministic per level, not across levels. */
typedef struct {
  int avx2, fma, f16c, avx512f, avx512bw, avx512vl, avx512dq, avx512_bf16, avx512_fp16,
      avx512_vnni;
  int amx_tile, amx_bf16, amx_int8;
  int neon;
  int avx_vnni; /* VEX VPDPBUSD (Alder Lake, Zen 5): the avx2 level's int8 decode */
  /* AVX512_BF16's dot product (VDPBF16PS) runs at least at the f32 FMA's
   * rate, so the automatic choices take it for bf16 data (GEMM, flash
   * attention, the decode over a bf16 cache): AMD Zen 4 and Zen 5. The
   * Intel Xeon measured (Emerald Rapids, docs/ISA.md) runs it at half the
   * f32 FMA's rate, and the rule takes every Intel CPU as that one (not
   * measured on others): there the bf16 data are widened to f32 instead (the
   * forced paths still run it). ATTN_BF16_DOT=1 / 0 overrides the rule. */
  int bf16_dot_fast;
} attn_cpu_features;
/* The size in bytes of the CPU's data (or unified) cache of a level (1-4;
 * per core or shared, as the CPU has it), from Linux's sysfs (what lscpu
 * shows), else sysconf; 0 where unknown or for another level. */
ATTN_API int64_t attn_cpu_cache_bytes(int level);
/* The last level's (the highest of 2-4 that is known; 0: none). */
ATTN_API int64_t attn_cpu_llc_bytes(void);
/* The features the active level may use (all 0 at the generic level). */
ATTN_API const attn_cpu_features *attn_cpu(void);
/* What the CPU itself reports, whatever the level. */
ATTN_API const attn_cpu_features *attn_cpu_detected(void);

typedef enum { ATTN_ISA_GENERIC = 0, ATTN_ISA_AVX2, ATTN_ISA_AVX512, ATTN_ISA_NEON } attn_isa;
#define ATTN_ISA_COUNT 4
/* "generic", "avx2", "avx512", "neon" */
ATTN_API const char *attn_isa_name(attn_isa isa);
/* 1 when this CPU and this build can run the level. */
ATTN_API int attn_isa_available(attn_isa isa);
/* The level in use and, in words, why it was chosen. */
ATTN_API attn_isa attn_isa_active(void);
ATTN_API const char *attn_isa_reason(void);
/* Level by name ("native": the best available); ATTN_EINVAL for an unknown
 * name, ATTN_EUNSUPPORTED for one this CPU or build lacks (the message names
 * the levels available). */
ATTN_API attn_status attn_isa_from_name(const char *name, attn_isa *out);
/* Switch the level (tests, benches): ATTN_EUNSUPPORTED if unavailable. Not
 * to be called while other threads run attn kernels. */
ATTN_API attn_status attn_set_isa(attn_isa isa);
/* The number of threads attn's kernels use: attn's own, never changed by
 * another library's OpenMP setting (omp_set_num_threads). n > 0 sets it
 * (capped at 4096); 0 returns to the default: $ATTN_NUM_THREADS, else
 * the environment variable $OMP_NUM_THREADS, else the CPUs this
 * process may run on (sched_getaffinity). Results do not depend on it. */
ATTN_API void attn_set_num_threads(int n);
ATTN_API int attn_get_num_threads(void);

/* ---- GEMM ------------------------------------------------------------------
 * C[M,N] = alpha * op(A)[M,K] · op(B)[K,N] + beta * C.
 * transa=0: A is M×K with row stride lda; transa=1: A is K×M (use Aᵀ).
 * transb=0: B is K×N with row stride ldb; transb=1: B is N×K (use Bᵀ).
 * beta == 0 means C is write-only (NaN in C is not propagated).
 * Results do not depend on the thread count. */
ATTN_API attn_status attn_gemm_f32(int transa, int transb, int64_t M, int64_t N, int64_t K,
                                   float alpha, const float *A, int64_t lda, const float *B,
                                   int64_t ldb, float beta, float *C, int64_t ldc);
/* Plain reference (triple loop, double accumulation not used: f32 FMA order k=0..K-1). */
ATTN_API attn_status attn_gemm_f32_ref(int transa, int transb, int64_t M, int64_t N, int64_t K,
                                       float alpha, const float *A, int64_t lda, const float *B,
                                       int64_t ldb, float beta, float *C, int64_t ldc);

/* ---- softmax over the last dim: x,y [rows, n] ---------------------------- */
ATTN_API attn_status attn_softmax_f32(const float *x, float *y, int64_t rows, int64_t n);
/* dx = y * (dy - sum(dy*y)) ; y is the softmax output */
ATTN_API attn_status attn_softmax_backward_f32(const float *y, const float *dy, float *dx,
                                               int64_t rows, int64_t n);
/* log-softmax, y = x - logsumexp(x) (a row of all -inf gives -inf, zero grad);
 * dx = dy - exp(y) * sum(dy) ; y is the log-softmax output */
ATTN_API attn_status attn_log_softmax_f32(const float *x, float *y, int64_t rows, int64_t n);
ATTN_API attn_status attn_log_softmax_backward_f32(const float *y, const float *dy, float *dx,
                                                   int64_t rows, int64_t n);

/* ---- LayerNorm over the last dim: x,y [rows, n]; weight,bias [n] or NULL ---
 * Saves mean[rows] and rstd[rows] (1/sqrt(var+eps), biased var) for backward. */
ATTN_API attn_status attn_layernorm_f32(const float *x, const float *weight, const float *bias,
                                        float *y, float *mean, float *rstd, int64_t rows, int64_t n,
                                        float eps);
/* dx overwritten; dweight/dbias ACCUMULATED (may be NULL). */
ATTN_API attn_status attn_layernorm_backward_f32(const float *x, const float *weight,
                                                 const float *mean, const float *rstd,
                                                 const float *dy, float *dx, float *dweight,
                                                 float *dbias, int64_t rows, int64_t n);

/* ---- activations, elementwise over n values (in-place allowed) ----------- */
ATTN_API attn_status attn_relu_f32(const float *x, float *y, int64_t n);
ATTN_API attn_status attn_relu_backward_f32(const float *x, const float *dy, float *dx, int64_t n);
/* GELU with exact erf, as torch.nn.GELU() (approximate='none'). */
ATTN_API attn_status attn_gelu_f32(const float *x, float *y, int64_t n);
ATTN_API attn_status attn_gelu_backward_f32(const float *x, const float *dy, float *dx, int64_t n);
/* GELU, tanh approximation, as torch.nn.GELU(approximate='tanh') and Hugging
 * Face's "gelu_new" (GPT-2): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
ATTN_API attn_status attn_gelu_tanh_f32(const float *x, float *y, int64_t n);
ATTN_API attn_status attn_gelu_tanh_backward_f32(const float *x, const float *dy, float *dx,
                                                 int64_t n);

/* tanh, as torch.tanh; SiLU (swish) x * sigmoid(x), as torch.nn.SiLU. Scalar. */
ATTN_API attn_status attn_tanh_f32(const float *x, float *y, int64_t n);
ATTN_API attn_status attn_tanh_backward_f32(const float *x, const float *dy, float *dx, int64_t n);
ATTN_API attn_status attn_silu_f32(const float *x, float *y, int64_t n);
ATTN_API attn_status attn_silu_backward_f32(const float *x, const float *dy, float *dx, int64_t n);

/* ---- dropout: counter-based RNG (Philox-4x32-10), seed + offset ------------
 * Element i is kept iff attn_dropout_uniform(seed, offset + i) >= p; kept
 * values scaled by 1/(1-p). mask[n] (1 = kept) is written if non-NULL; x == y
 * (in place) is allowed. Same seed/offset give the same mask whatever the
 * thread count, ISA level or split into calls. p in [0,1). */
ATTN_API attn_status attn_dropout_f32(const float *x, float *y, uint8_t *mask, int64_t n, float p,
                                      uint64_t seed, uint64_t offset);
ATTN_API attn_status attn_dropout_backward_f32(const float *dy, const uint8_t *mask, float *dx,
                                               int64_t n, float p);
/* Dropout's stream: uniform float in [0,1) for element e under seed, the top
 * 24 bits of word (e & 3) of Philox-4x32-10 with counter (e >> 2 as two
 * 32-bit words, 0x706f7264 "drop", 0) and key (seed low, seed high): one
 * Philox block per four elements, a stream apart from attn_rng_uniform's. */
ATTN_API float attn_dropout_uniform(uint64_t seed, uint64_t e);
/* uniform float in [0,1) for counter i under seed: the top 24 bits of word 0
 * of Philox-4x32-10 with counter (i as two 32-bit words, 0, 0) (weight
 * initialisation and the other draws; dropout has its own stream, above) */
ATTN_API float attn_rng_uniform(uint64_t seed, uint64_t i);
/* standard normal for counter i under seed (Box-Muller on two uniforms) */
ATTN_API float attn_rng_normal(uint64_t seed, uint64_t i);

/* ---- embedding: ids [n] in [0,vocab), table [vocab, dim], y [n, dim] ------ */
ATTN_API attn_status attn_embedding_f32(const int32_t *ids, int64_t n, const float *table,
                                        int64_t vocab, int64_t dim, float *y);
/* dtable ACCUMULATED (rows may repeat); deterministic. */
ATTN_API attn_status attn_embedding_backward_f32(const int32_t *ids, int64_t n, const float *dy,
                                                 int64_t vocab, int64_t dim, float *dtable);

/* ---- cross-entropy: logits [rows, classes], targets [rows] ----------------
 * Mean over rows whose target != ignore_index (like torch, reduction='mean'),
 * with label smoothing in [0,1). loss may be NULL. dlogits [rows, classes]
 * (may be NULL) receives d(mean loss)/d(logits). A target outside
 * [0,classes) that is not ignore_index is ATTN_EINVAL. */
ATTN_API attn_status attn_cross_entropy_f32(const float *logits, const int32_t *targets,
                                            int64_t rows, int64_t classes, int32_t ignore_index,
                                            float label_smoothing, float *loss, float *dlogits);
/* The same with the mean's divisor given: norm > 0 divides the summed row
 * losses (and scales dlogits) by norm instead of the count of rows not
 * ignored (norm 0: that count). Data parallelism (apps/dist.h): a shard of
 * a batch divides by the whole batch's count, so that the shards' losses
 * and gradients add up to the batch's, row for row the same floats. */
ATTN_API attn_status attn_cross_entropy_norm_f32(const float *logits, const int32_t *targets,
                                                 int64_t rows, int64_t classes,
                                                 int32_t ignore_index, float label_smoothing,
                                                 int64_t norm, float *loss, float *dlogits);

#ifdef __cplusplus
}
#endif
#endif
