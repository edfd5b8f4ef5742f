/* --precision auto|f32|bf16 for attn g2p train / eval / predict: the rules
 * of apps/train/precision_probe.h (bf16 only a candidate where a bf16 unit
 * runs its GEMMs; auto takes it only when measured >= ATTN_PREC_AUTO_MARGIN x f32
 * per wall and per CPU second, else f32) on the G2P model's own step.
 *
 * Training probe: a fresh model of m's configuration, the middle batch of
 * the training set sorted by length (its median length), a warm-up step per
 * precision, then up to 3 rounds alternating f32 and bf16 (best of each;
 * at most ~1.5 s); forward + loss + backward timed.
 * Inference probe: greedy decoding of the first (up to) 32 given words in
 * f32 and bf16, best of 2 each.
 * No bf16 unit here: nothing is timed and auto says why f32. */
#ifndef ATTN_APPS_G2P_PRECISION_H
#define ATTN_APPS_G2P_PRECISION_H

#include <stddef.h>

#include "apps/seq2seq/g2p_decode.h"
#include "apps/seq2seq/g2p_set.h"
#include "apps/seq2seq/g2p_train.h"
#include "apps/train/precision_probe.h"

/* Training (batches of `batch` words in `shards` shards, attn_g2p_batch_grad):
 * *prec the choice when want_auto, else *prec is kept (an explicit choice)
 * and only timed; why: one line, what decided it (and a warning for an
 * explicit precision slower than f32 here). */
attn_status attn_g2p_prec_train(const attn_g2p_model *m, const attn_g2p_set *train, int batch,
                                int shards, uint64_t seed, int want_auto, attn_precision *prec,
                                char *why, size_t why_cap);

/* Inference (eval / predict): the same for decoding words src[0..n). */
attn_status attn_g2p_prec_infer(const attn_g2p_model *m, const int32_t *const *src,
                                const int32_t *src_lens, int n, int want_auto,
                                attn_precision *prec, char *why, size_t why_cap);

#endif
