/* The seeds' TextClassifier, generalised (issue 4):
 *   x = embedding(ids) + positions            [B, L, E]   learned or sinusoidal
 *   x = layers.i(x, src_key_padding_mask)     N TransformerEncoderLayers (nn.h)
 *   pooled = mean of x over the real tokens   [B, E]      padding excluded
 *            (or [mean, max]: [B, 2E], config.pool)
 *   logits = fc(pooled)                        [B, classes]
 * Parameters live in one attn_params with PyTorch state_dict names:
 *   embedding.weight [V, E], positions.weight [max_len, E] (learned only),
 *   layers.<i>.self_attn.in_proj_weight, ..., layers.<i>.norm2.bias,
 *   fc.weight [C, E], fc.bias [C]
 * (exactly tools/bench_train_torch.py's Classifier state_dict).
 *
 * A batch is ids [B, L] (row b: lens[b] real tokens, then padding, any id)
 * and lens [B] in 1..L; L <= max_len.
 *
 * Training saves what backward needs in an attn_clf_acts. With ckpt set
 * (gradient checkpointing) only each layer's input is kept; backward runs
 * the layer forward again (same ctx, hence the same dropout masks) just
 * before its backward: same gradients, less memory, more time.
 * attn_clf_acts.saved_bytes is our own account of the activation bytes held
 * between forward and backward, peak_bytes adds the largest transient. */
#ifndef ATTN_APPS_CLASSIFIER_H
#define ATTN_APPS_CLASSIFIER_H

#include <stddef.h>
#include <stdint.h>

#include "attn.h"

typedef struct {
  int64_t vocab, d_model, heads, ff, layers, max_len, classes;
  float dropout;         /* in every encoder layer (attention, residuals, ff) */
  float attn_dropout;    /* on the attention probabilities only; < 0 (default) = dropout.
                          * 0 with dropout > 0 keeps attention on the flash path */
  int sinusoidal;        /* 1: fixed sin/cos positions (no positions.weight) */
  int norm_first;        /* 0: post-norm as torch's default */
  attn_activation activation;
  /* The input text (saved with the model, so eval / predict read mail the
   * same way): headers 1 adds the sender's other headers to Subject and
   * From (ATTN_MAIL_MORE_HEADERS, mail.h); a message longer than
   * max_len tokens keeps its first max_len - tail and its last tail tokens
   * (tail 0: the first max_len only). 0 and 0 by default. */
  int headers;
  int64_t tail;
  /* Pooling over the real tokens: ATTN_CLF_POOL_MEAN (the seed's) or
   * ATTN_CLF_POOL_MEANMAX: [mean, max] concatenated (fc sees 2 d_model; the
   * max passes its gradient to the first token holding it). */
  int pool;
} attn_clf_config;
enum { ATTN_CLF_POOL_MEAN = 0, ATTN_CLF_POOL_MEANMAX = 1 };

/* d_model 128, 8 heads, ff 512, 2 layers, max_len 256, 2 classes, dropout
 * 0.1, learned positions, post-norm, relu; vocab must be set. */
void attn_clf_config_default(attn_clf_config *c);
/* One-line JSON of c (*json malloc'd) and back; unknown keys are an error,
 * missing keys keep the defaults. */
attn_status attn_clf_config_to_json(const attn_clf_config *c, char **json);
attn_status attn_clf_config_from_json(const char *json, attn_clf_config *c);

typedef struct {
  attn_clf_config c;
  attn_params p;
  int emb, pos;            /* param indices; pos = -1 when sinusoidal */
  attn_encoder_layer *layer; /* [layers] */
  attn_linear fc;
  float *sin_table;        /* [max_len, E] when sinusoidal */
  attn_qlinear_set *qlinears; /* int8 model (attn quantize): Linears run in int8 */
  /* Packed batches (ATTN_CLF_VARLEN_*; not saved with the model; 0: off):
   * attn_clf_forward then runs the B sequences as T = sum(lens) packed rows
   * (embedding, Linears, LayerNorms, varlen attention, pooling: no padding
   * row anywhere) where attn_clf_varlen_applies says so. */
  int varlen;
} attn_clf;
enum { ATTN_CLF_VARLEN_OFF = 0, ATTN_CLF_VARLEN_ON = 1, ATTN_CLF_VARLEN_AUTO = 2 };
/* auto packs a batch when at least this share of its padded B x L tokens
 * would be padding */
#define ATTN_CLF_VARLEN_AUTO_PAD 0.10
/* "off" | "on" | "auto" */
attn_status attn_clf_varlen_from_name(const char *name, int *out);
const char *attn_clf_varlen_name(int v);
/* 1 when attn_clf_forward runs this batch packed: m->varlen on (or auto and
 * the padding share >= ATTN_CLF_VARLEN_AUTO_PAD; any precision: bf16
 * training runs the bf16 varlen kernel), no QAT or int8 Linears (their per-tensor activation ranges would not see the
 * padding rows), and no attention-probability dropout while training (the
 * packed attention has none); else 0 (the padded path). With dropout
 * elsewhere (residuals, feed-forward) the packed rows draw exactly the
 * padded batch's numbers for the real tokens (attn_nn_ctx.pack_cu), and the
 * padded path's padding rows never reach the loss, so both paths give the
 * same loss and gradients up to float summation order. */
int attn_clf_varlen_applies(const attn_clf *m, const attn_nn_ctx *ctx, const int32_t *lens,
                            int64_t B, int64_t L);

/* Longest max_len a config may have (a sinusoidal model's table is max_len
 * x E floats, and nothing in its file bounds it). */
#define ATTN_CLF_MAX_LEN (1 << 20)

/* A file's config against its tensors before anything is allocated:
 * embedding.weight [vocab, E], positions.weight [max_len, E] (learned),
 * fc.weight [classes, E or 2E], the last layer's linear1.weight [ff, E];
 * ATTN_EFORMAT naming the tensor otherwise. */
attn_status attn_clf_check_file(const attn_clf_config *c, const attn_st *f);
/* Every tensor of f is one m reads: a parameter, its AdamW moments
 * (optim.m./optim.v.), weight average (ema.), ensemble copies (memberK.) or
 * int8 scales (.scale); e.g. layers.1.* in a file whose config says 1 layer
 * is an error, not ignored. */
attn_status attn_clf_check_leftovers(const attn_clf *m, const attn_st *f);
/* Loads a checkpoint (attn_clf_save of classifier_train.h writes one; an
 * int8 file of attn quantize too): creates m from its "config", loads the
 * parameters; *file (may be NULL) receives the file for other metadata
 * (attn_st_free). */
attn_status attn_clf_load(const char *path, attn_clf *m, attn_st **file);

/* Declares and allocates (parameters zero); attn_clf_init then draws them. */
attn_status attn_clf_create(attn_clf *m, const attn_clf_config *c);
/* Seeded: embeddings and positions N(0,1) as nn.Embedding, layers as torch. */
attn_status attn_clf_init(attn_clf *m, uint64_t seed);
void attn_clf_free(attn_clf *m);

typedef struct {
  int64_t B, L, n_layers;
  int ckpt;
  float **x;              /* [layers+1] layer inputs / last output [B*L*E] */
  attn_encoder_saved *saved; /* [layers] */
  uint8_t *kpm;           /* [B, L] key padding (1 = padding) */
  int32_t *lens;          /* [B] */
  int32_t *ids;           /* [B*L] copy (embedding backward) */
  float *pooled;          /* [B, E], or [B, 2E] with mean+max pooling */
  int32_t *argmax;        /* [B, E]: the token of each max (mean+max pooling) */
  float *logits;          /* [B, classes] */
  attn_nn_ctx ctx;
  size_t saved_bytes, peak_bytes;
  /* packed batch (attn_clf_varlen_applies): the rows of x, ids are the T
   * real tokens, sequence b the rows cu[b] .. cu[b+1]-1 (kpm NULL); NULL:
   * padded [B, L] rows */
  int32_t *cu;
  int64_t T, max_len;
} attn_clf_acts;
/* Frees everything a holds (a zeroed struct is a valid empty one). */
void attn_clf_acts_free(attn_clf_acts *a);

/* logits [B, classes] (also in a->logits). ctx: training flag, seed, step
 * (dropout), backend. a may be reused across calls. */
attn_status attn_clf_forward(const attn_clf *m, const attn_nn_ctx *ctx, int ckpt,
                             attn_clf_acts *a, const int32_t *ids, const int32_t *lens,
                             int64_t B, int64_t L, float *logits);
/* Accumulates parameter gradients from dlogits [B, classes]. */
attn_status attn_clf_backward(attn_clf *m, attn_clf_acts *a, const float *dlogits);
/* The same, calling ready(user, lo) whenever the gradients m->p.grad[lo,
 * numel) are final: after the head, then after each layer from the last
 * (the flat buffer holds the embeddings first, the head last), so that data
 * parallelism (apps/train/dist.h) sends them while the rest of the backward runs.
 * An error from ready stops the backward and is returned. */
attn_status attn_clf_backward_ready(attn_clf *m, attn_clf_acts *a, const float *dlogits,
                                    attn_status (*ready)(void *user, int64_t lo), void *user);

/* Inference probabilities probs [B, classes] (softmax of the logits). */
attn_status attn_clf_predict(const attn_clf *m, const int32_t *ids, const int32_t *lens,
                             int64_t B, int64_t L, float *probs);
/* The same under ctx (NULL: the default inference ctx). */
attn_status attn_clf_predict_ctx(const attn_clf *m, const attn_nn_ctx *ctx, const int32_t *ids,
                                 const int32_t *lens, int64_t B, int64_t L, float *probs);

/* The attention probabilities of one message (B = 1, n tokens) in every
 * layer: probs [layers, heads, n, n] (inference, no dropout). */
attn_status attn_clf_attention(const attn_clf *m, const int32_t *ids, int64_t n, float *probs);

/* Names for the optimizer's decay rule: no decay for biases, norms,
 * embeddings and positions. */
int attn_clf_decay_rule(const char *name, void *user);

#endif
