/* Hugging Face checkpoints (a directory with config.json + model.safetensors)
 * of BERT-family encoders (model_type "bert") and GPT-2 ("gpt2"), loaded
 * into attn's nn_hf model (include/attn/nn_hf.h) through the name map of
 * docs/HF.md: BERT's separate query/key/value Linears become rows of the
 * packed in-projection; GPT-2's Conv1D weights ([in, out]) are transposed
 * into Linear weights ([out, in]) and its fused c_attn keeps its q | k | v
 * order. The checkpoint may hold F32, F16 or BF16 tensors (all run in f32),
 * under BertModel's / GPT2Model's names or with the "bert." /
 * "transformer." prefix of the task models; tensors of other heads (cls.*,
 * classifier.*) and buffers (position_ids, attn.bias) are counted as ignored.
 * Inference only. */
#ifndef ATTN_APPS_HF_H
#define ATTN_APPS_HF_H

#include <stddef.h>

#include "attn.h"
#include "attn/nn_hf.h"

typedef struct {
  attn_hf_config c;
  attn_hf_model m;
  attn_params p;
  const char *model_type; /* "bert" | "gpt2" */
  int ignored;            /* tensors of the file not used */
  int64_t bos_token_id, eos_token_id; /* config.json's (GPT-2 default 50256, when below
                                       * vocab_size); -1: none (BERT, null) */
  char first_ignored[ATTN_PARAM_NAME_MAX];
} attn_hf;

/* config.json's bos_token_id / eos_token_id for config c (absent: GPT2Config's
 * 50256, or -1 where that is not below vocab_size, and for BERT; null: -1).
 * ATTN_EFORMAT for an id that is not an integer below vocab_size. */
attn_status attn_hf_special_ids(const char *json, size_t len, const attn_hf_config *c, int64_t *bos,
                                int64_t *eos);

/* config.json text -> c (HF's defaults for absent keys: BertConfig's,
 * GPT2Config's). ATTN_EFORMAT for bad JSON or mistyped keys,
 * ATTN_EUNSUPPORTED for a model_type other than bert / gpt2 or an option
 * attn does not run (relative positions, cross-attention, ...), each naming
 * the key. c->pooler is left 0: the checkpoint decides (attn_hf_from_st). */
attn_status attn_hf_config_parse(const char *json, size_t len, attn_hf_config *c);

/* The model of config c with st's tensors: every expected tensor present
 * with the expected shape (else ATTN_EINVAL naming the tensor and the shape
 * it should have). BERT's pooler runs iff st has it. */
attn_status attn_hf_from_st(const attn_hf_config *c, const attn_st *st, attn_hf **out);

/* dir/config.json and dir/model.safetensors. Errors name the file. */
attn_status attn_hf_load(const char *dir, attn_hf **out);
void attn_hf_free(attn_hf *h);

/* One entry of the name map: Hugging Face's name (%d = layer index, under
 * the optional prefix) -> attn's parameter; TRANSPOSE for a Conv1D weight;
 * rows [part * n / parts, (part + 1) * n / parts) of the attn tensor for a
 * split (BERT's q, k, v into in_proj). */
typedef enum { ATTN_HF_COPY = 0, ATTN_HF_TRANSPOSE = 1 } attn_hf_op;
typedef struct {
  const char *hf, *attn;
  attn_hf_op op;
  int part, parts;
  int per_layer;
} attn_hf_name;
/* The map of arch (*n entries). */
const attn_hf_name *attn_hf_name_map(attn_hf_arch arch, int *n);

/* "101,7592,102" -> ids (malloc'd, free()); ATTN_EINVAL naming the bad item. */
attn_status attn_hf_parse_ids(const char *s, int32_t **ids, int64_t *n);

#endif
