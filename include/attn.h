/* attn — attention and Transformer layers in C11: training and inference on
 * the CPU. Layers: kernels -> nn -> train -> apps. */
#ifndef ATTN_H
#define ATTN_H

#include "attn/version.h"
#include "attn/status.h"
#include "attn/tensor.h"
#include "attn/kernels.h"
#include "attn/sdpa.h"
#include "attn/sdpa_probs.h"
#include "attn/sdpa_varlen.h"
#include "attn/sdpa_mods.h"
#include "attn/variants.h"
#include "attn/safetensors.h"
#include "attn/params.h"
#include "attn/nn.h"
#include "attn/nn_variants.h"
#include "attn/nn_hf.h"
#include "attn/nn_encoder_ext.h"
#include "attn/train.h"
#include "attn/lowp.h"
#include "attn/amp.h"
#include "attn/quant.h"
#include "attn/sdpa_bf16.h"
#include "attn/sdpa_f16.h"
#include "attn/sdpa_i8.h"
#include "attn/sdpa_deprecated.h"
#include "attn/decode.h"

#endif
