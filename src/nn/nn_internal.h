/* Internal helpers of the nn layer (not public API): a small owner list of
 * buffers for the "saved" structs, dropout streams, residual sublayers. */
#ifndef ATTN_NN_INTERNAL_H
#define ATTN_NN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "attn/kernels.h"
#include "attn/nn.h"

/* An arena is a list of malloc'ed blocks freed together. */
typedef struct {
  void **blocks;
  int count, cap;
} nn_arena;

/* Frees every block of *slot's arena and the arena itself; *slot = NULL. */
void attn_nn_arena_release(void **slot);
/* Zeroed block of n elements of size sz, owned by the arena in *slot
 * (created on first use). NULL (and ATTN_ENOMEM set) on failure. */
void *attn_nn_alloc(void **slot, int64_t n, size_t sz);
/* The same, not zeroed (for buffers written in full before any read). */
void *attn_nn_alloc_uninit(void **slot, int64_t n, size_t sz);
#define NN_ALLOC_F(slot, n) ((float *)attn_nn_alloc((slot), (n), sizeof(float)))
#define NN_ALLOC_F_UNINIT(slot, n) ((float *)attn_nn_alloc_uninit((slot), (n), sizeof(float)))
#define NN_ALLOC_BF16(slot, n) ((uint16_t *)attn_nn_alloc_uninit((slot), (n), sizeof(uint16_t)))
#define NN_ALLOC_U8(slot, n) ((uint8_t *)attn_nn_alloc((slot), (n), 1))
#define NN_ALLOC_U8_UNINIT(slot, n) ((uint8_t *)attn_nn_alloc_uninit((slot), (n), 1))

/* Scratch buffer (not arena), zeroed; free with free(). */
float *attn_nn_scratch(int64_t n);
/* The same, not zeroed (for buffers written in full before any read). */
float *attn_nn_scratch_uninit(int64_t n);
/* A function compiled twice on x86-64, for AVX2 and for the base set, the
 * CPU picking at load time (GCC / clang target_clones): for loops the
 * compiler vectorises lane by lane with no FMA contraction (AVX2 without
 * FMA), so both give the same bits. Not under ASan (plain code there).
 * (src/nn/decode_attend.c) */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__SANITIZE_ADDRESS__)
#define ATTN_NN_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define ATTN_NN_CLONES
#endif
/* Linear biases (linear.c): y [rows, out] := b in every row; db [out] += the
 * column sums of dy [rows, out], each summed in row order (threads split the
 * columns: the sums do not depend on the thread count). */
void attn_nn_bias_rows(float *y, const float *b, int64_t rows, int64_t out);
void attn_nn_bias_grad(float *db, const float *dy, int64_t rows, int64_t out);
/* Elementwise passes on the library's threads when large (nn_common.c):
 * the thread count for n floats; y [n] += x; y = a + b. */
int attn_nn_pass_threads(int64_t n);
void attn_nn_add(float *y, const float *x, int64_t n);
void attn_nn_sum(float *y, const float *a, const float *b, int64_t n);
/* Dense backward (linear.c, dense_ctx.c) with dx OVERWRITTEN (dx_set = 1;
 * no zeroed buffer needed) or accumulated (0, as attn_dense_backward_*);
 * dW, db (may be NULL) accumulate. */
attn_status attn_nn_dense_backward_f32(const float *x, const float *W, const float *dy, float *dx,
                                       int dx_set, float *dW, float *db, int64_t rows,
                                       int64_t in, int64_t out);
attn_status attn_nn_dense_backward(const attn_nn_ctx *ctx, const float *x, const float *W,
                                   const float *dy, float *dx, int dx_set, float *dW, float *db,
                                   int64_t rows, int64_t in, int64_t out);
/* attn_linear_backward_ctx with dx OVERWRITTEN */
attn_status attn_nn_linear_backward_set(const attn_linear *m, attn_params *p,
                                        const attn_nn_ctx *ctx, const float *x, const float *dy,
                                        float *dx, int64_t rows);
/* attn_layernorm_backward with dx OVERWRITTEN (layernorm.c) */
attn_status attn_nn_layernorm_backward_set(const attn_layernorm *m, attn_params *p,
                                           const float *x, const float *mean, const float *rstd,
                                           const float *dy, float *dx, int64_t rows);

/* FNV-1a of a string, for dropout stream ids. */
uint64_t attn_nn_hash(const char *s, uint64_t h);
/* The dropout seed of a module's site for this ctx step. */
uint64_t attn_nn_dropout_seed(const attn_nn_ctx *ctx, uint64_t site);
/* The dropout stream offset of a tensor of n elements laid out batch first:
 * a shard's (ctx->shard_row0, shard_rows) place in the whole batch, else 0. */
uint64_t attn_nn_dropout_offset(const attn_nn_ctx *ctx, int64_t n);
/* attn_dropout_f32 of n elements of rows (a batch first, or ctx->pack_cu's
 * packed rows, each sequence drawing at its place in the padded batch) on
 * the stream of site (dropout_rows.c). */
attn_status attn_nn_dropout_rows(const attn_nn_ctx *ctx, const float *x, float *y, uint8_t *mask,
                                 int64_t n, float p, uint64_t site);
/* Packed variable-length self-attention (attn_mha_masks.cu_seqlens;
 * mha_varlen.c): whether this forward may run it (ATTN_EUNSUPPORTED naming
 * what is in the way), and the SDPA forward (dout NULL) or backward on the
 * saved packed rows. */
attn_status attn_nn_mha_varlen_check(const attn_mha *m, const attn_nn_ctx *ctx,
                                     const attn_mha_masks *masks, int self, int extra,
                                     const float *attn_weights, int64_t B, int64_t Lq);
attn_status attn_nn_mha_varlen_sdpa(const attn_mha *m, const attn_nn_ctx *ctx,
                                    const attn_mha_saved *s, const float *dout, float *dq,
                                    float *dk, float *dv);
/* 1 when dropout with probability p runs under ctx. */
int attn_nn_dropout_on(const attn_nn_ctx *ctx, float p);

/* x [B, H, n, hd] := y [B, n, H, hd] (a KV-cache append's layout) */
void attn_nn_heads_first(const float *y, float *x, int64_t B, int64_t n, int64_t H, int64_t hd);

/* "<a><b>" into buf (size ATTN_PARAM_NAME_MAX); ATTN_EINVAL if too long. */
attn_status attn_nn_name(char *buf, const char *a, const char *b);

/* Residual sublayers (see nn.h). f's input comes from sub_in, f's output
 * f_out goes to sub_out. */
attn_status attn_nn_sub_in(const attn_layernorm *ln, const attn_params *p, int norm_first,
                      attn_sublayer_saved *s, const float *x, int64_t rows, const float **f_in);
attn_status attn_nn_sub_out(const attn_layernorm *ln, const attn_params *p, const attn_nn_ctx *ctx,
                       int norm_first, float dropout, uint64_t site, attn_sublayer_saved *s,
                       const float *x, const float *f_out, float *y);
/* From dy: dx += residual path; df (overwritten [rows, n]) = ∂L/∂f_out. */
attn_status attn_nn_sub_out_backward(const attn_layernorm *ln, attn_params *p, int norm_first,
                                float dropout, const attn_sublayer_saved *s, const float *dy,
                                float *dx, float *df);
/* From df_in (∂L/∂f_in): dx += through the pre-norm LN (or directly). */
attn_status attn_nn_sub_in_backward(const attn_layernorm *ln, attn_params *p, int norm_first,
                               const attn_sublayer_saved *s, const float *x, const float *df_in,
                               float *dx);

/* bf16 mixed-precision paths (ffn_bf16.c, mha_bf16.c): when they apply, and
 * the forward / backward that keep activations in bf16. */
int attn_nn_ffn_bf16_applies(const attn_ffn *m, const attn_nn_ctx *ctx);
attn_status attn_nn_ffn_forward_bf16(const attn_ffn *m, const attn_params *p, attn_ffn_saved *s,
                                const float *x, float *y, int64_t rows);
attn_status attn_nn_ffn_backward_bf16(const attn_ffn *m, attn_params *p, const attn_ffn_saved *s,
                                 const float *dy, float *dx);
int attn_nn_mha_bf16_applies(const attn_mha *m, const attn_nn_ctx *ctx, int self);
/* flash16: q, k, v into s->qkvh in bf16 (for attn_sdpa_*_bf16), else into s->q, k, v */
attn_status attn_nn_mha_project_bf16(const attn_mha *m, const attn_params *p, attn_mha_saved *s,
                                const float *x, int flash16);
/* attn_nn_mha_desc for q, k, v in s->qkvh ([B, L, 3E]) */
void attn_nn_mha_desc_bf16(const attn_mha *m, const attn_mha_saved *s, attn_sdpa_desc *d);
attn_status attn_nn_mha_out_bf16(const attn_mha *m, const attn_params *p, attn_mha_saved *s,
                            float *out);
/* dctx [B*L, E] = dout · Wo (overwritten); out-projection gradients */
attn_status attn_nn_mha_out_backward_bf16(const attn_mha *m, attn_params *p, const attn_mha_saved *s,
                                     const float *dout, float *dctx);
/* dx += [dq dk dv] · W_in; in-projection gradients (dq, dk, dv rows ld apart) */
attn_status attn_nn_mha_project_backward_bf16(const attn_mha *m, attn_params *p,
                                         const attn_mha_saved *s, const float *dq,
                                         const float *dk, const float *dv, int64_t ld, float *dx);

/* MHA internals (mha_masks.c): combine PyTorch-style masks into s, and
 * describe the SDPA call on s's projected q/k/v ([B, L, E] layouts). */
attn_status attn_nn_mha_build_masks(const attn_mha *m, const attn_mha_masks *mk, attn_mha_saved *s);
void attn_nn_mha_desc(const attn_mha *m, const attn_mha_saved *s, attn_sdpa_desc *d);
/* probs [nrows, Lk] := rows row0.. of (b, h) recomputed from q, k and a
 * forward's lse (attn_sdpa_forward with args.probs_rows; mha_probs.c) */
attn_status attn_nn_probs_rows(const attn_sdpa_desc *d, const float *q, const float *k,
                               const float *lse, int64_t b, int64_t h, int64_t row0, int64_t nrows,
                               float *probs);
/* The SDPA call on s: *d as attn_nn_mha_desc (bf16 strides with s->qkvh), *a
 * its q, k, v (s->qkvh in bf16 on the bf16 kernel, else s->q, k, v on
 * ctx's backend), out s->ctx and lse s->lse; the caller adds the rest. */
void attn_nn_mha_sdpa_call(const attn_mha *m, const attn_nn_ctx *ctx, const attn_mha_saved *s,
                           attn_sdpa_desc *d, attn_sdpa_args *a);
/* Projection i (0 q, 1 k, 2 v) of rows of x into y ([rows, out[i]]) under ctx. */
attn_status attn_nn_mha_project(const attn_mha *m, const attn_params *p, const attn_nn_ctx *ctx,
                                int i, const float *x, float *y, int64_t rows);

/* Transformer layer helpers (encoder.c): config check, a torch-style
 * attention "<prefix><name>" and a LayerNorm "<prefix><name>". */
attn_status attn_nn_layer_check(const attn_layer_config *c, const char *prefix);
attn_status attn_nn_layer_attn(attn_mha *a, attn_params *p, const char *prefix, const char *name,
                          const attn_layer_config *c);
attn_status attn_nn_layer_norm(attn_layernorm *ln, attn_params *p, const char *prefix,
                          const char *name, const attn_layer_config *c);
/* attn layer's input normalisation (layer_file_prep.c): 1 when the file has
 * F16 / BF16 tensors or is sequence first; *out = a copy with those widened
 * to F32 and, unless batch_first, the [L, B, E] inputs and dout made
 * [B, L, E]; prep_out transposes out and grad.<input> back. */
int attn_nn_layer_needs_prep(const attn_st *in, int batch_first);
attn_status attn_nn_layer_prep_in(const attn_st *in, int batch_first, attn_st **out);
attn_status attn_nn_layer_prep_out(attn_st *out);

/* MHA extra key rows (mha_extra_kv.c): add_bias_kv, add_zero_attn,
 * static_k / static_v, torch 1.13's way. extend_kv fills s->k, s->v [B, Lk,
 * E] from the projections kp, vp [B, Lk_in, E] (NULL where static);
 * pad_masks pads the masks for the appended rows (in s->arena); split_dkv
 * sends dk, dv back to dkp, dvp [B, Lk_in, E] (OVERWRITTEN), dstatic_* (+=)
 * and the bias_k / bias_v gradients. */
int attn_nn_mha_extra(const attn_mha *m, const float *static_k, const float *static_v);
attn_status attn_nn_mha_extend_kv(const attn_mha *m, const attn_params *p, attn_mha_saved *s,
                                  const float *kp, const float *vp, const float *static_k,
                                  const float *static_v);
attn_status attn_nn_mha_pad_masks(const attn_mha *m, const attn_mha_masks *in, attn_mha_saved *s,
                                  attn_mha_masks *out);
attn_status attn_nn_mha_split_dkv(const attn_mha *m, attn_params *p, const attn_mha_saved *s,
                                  const float *dk, const float *dv, float *dkp, float *dvp,
                                  float *dstatic_k, float *dstatic_v);

/* Decoding (decode_attend.c): q [B, H*D] the queries of the one position
 * appended last to c (H query heads over c's Hkv), attending to every cached
 * step; o [B, H*D]. No masks but the (trivial) causal one. */
attn_status attn_nn_attend_last(const attn_kv_cache *c, int64_t H, float scale, const float *q,
                                float *o);
/* ... and q [B, H*D] (one position per decoder row) against the cross K/V
 * [B_mem, Lm, Hkv*D] of c (K, V: one layer's), mem_lens as set. */
attn_status attn_nn_attend_memory(const attn_decoder_cache *c, const float *K, const float *V,
                                  float scale, const float *q, float *o);

#endif
