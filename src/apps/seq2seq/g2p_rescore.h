/* N-best rescoring of a left-to-right G2P beam by right-to-left models
 * (attn g2p eval|predict MODEL --rescore R2L[,R2L...]; docs/G2P.md); a
 * both-directions model (--both-directions) may rescore its own beam
 * (--rescore MODEL): one model, both passes.
 *
 * The left-to-right search (one model or an ensemble) gives each word its K
 * best hypotheses with their log-probabilities lp_l2r (sums over the
 * phonemes and </s>). The right-to-left models score each hypothesis by
 * teacher forcing: lp_r2l = sum over t of log p(y_t | y_<t, word), y = the
 * hypothesis's phonemes last first, then </s>, p the mean of the R2L
 * models' probabilities (one model: its own). Each hypothesis then ranks by
 *   logp  = lp_l2r + W * lp_r2l                    (--rescore-weight W, 1)
 *   score = logp / ((5 + len) / 6)^A              (the beam's length penalty A;
 *                                                  len = phonemes + 1, A = 0: logp)
 * and the n-best list is re-sorted by score (ties keep the beam's order). */
#ifndef ATTN_APPS_G2P_RESCORE_H
#define ATTN_APPS_G2P_RESCORE_H

#include "apps/seq2seq/g2p_decode.h"

/* The teacher-forced log-probability of n sequences under the ensemble
 * ms[0..nm): sequence j is the phonemes ph + j * stride [len[j]] (reading
 * order, first phoneme first; the models' inventory) of the word
 * src[word[j]] [src_lens[word[j]]]; a right-to-left model reads them
 * reversed, and so does a both-directions model (its right-to-left pass,
 * from ATTN_G2P_BOS_R2L). logp[j] includes </s>. Sequences go `batch` at a
 * time. */
attn_status attn_g2p_sequence_logp(const attn_g2p_model *const *ms, int nm, const attn_nn_ctx *ctx,
                                   const int32_t *const *src, const int32_t *src_lens,
                                   const int *word, const int32_t *ph, int64_t stride,
                                   const int *len, int64_t n, int batch, double *logp);

/* r2l[0..nr) may rescore the beams of l2r[0..nl): every r2l model scores right
 * to left (--reverse or --both-directions), every l2r model decodes left to
 * right (a both-directions model may be on both sides), and all read the same graphemes and
 * lengths and write the same inventory. ATTN_EINVAL saying what differs. */
attn_status attn_g2p_rescore_check(const attn_g2p_model *const *l2r, int nl,
                                   const attn_g2p_model *const *r2l, int nr);

/* Rescores h (from attn_g2p_search_ensemble on the words src, src_lens) in
 * place: h->logp becomes the combined logp, h->score the combined score
 * (alpha: the length penalty), each word's hypotheses re-sorted. */
attn_status attn_g2p_rescore(attn_g2p_hyps *h, const attn_g2p_model *const *r2l, int nr,
                             float weight, float alpha, const attn_nn_ctx *ctx,
                             const int32_t *const *src, const int32_t *src_lens, int batch);
/* attn_g2p_rescore for the best hypothesis only (eval): each word keeps one
 * hypothesis (count 1), the one attn_g2p_rescore puts first, with the same
 * logp and score. The first of the beam is scored; another one only if the
 * score it would have with a right-to-left logp of 0 (its bound: that logp
 * is <= 0) beats the first's, so most are not scored at all. */
attn_status attn_g2p_rescore_best(attn_g2p_hyps *h, const attn_g2p_model *const *r2l, int nr,
                                  float weight, float alpha, const attn_nn_ctx *ctx,
                                  const int32_t *const *src, const int32_t *src_lens, int batch);

#endif
