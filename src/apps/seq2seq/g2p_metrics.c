/* WER / PER (g2p_metrics.h). */
#include "apps/seq2seq/g2p_metrics.h"

#include <stdlib.h>

#include "apps/seq2seq/g2p_vocab.h"

int attn_g2p_edit_distance(const int32_t *a, int na, const int32_t *b, int nb) {
  int stackbuf[257];
  int *row = nb < 256 ? stackbuf : malloc((size_t)(nb + 1) * sizeof *row);
  if (!row) return na > nb ? na : nb;  // out of memory: an upper bound
  for (int j = 0; j <= nb; j++) row[j] = j;
  for (int i = 1; i <= na; i++) {
    int diag = row[0];
    row[0] = i;
    for (int j = 1; j <= nb; j++) {
      int up = row[j];
      int best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      row[j] = best;
      diag = up;
    }
  }
  int d = row[nb];
  if (row != stackbuf) free(row);
  return d;
}

static int32_t *unstress(const int32_t *x, int n, int32_t *buf) {
  for (int i = 0; i < n; i++) buf[i] = attn_g2p_phone_unstressed(x[i]);
  return buf;
}

int attn_g2p_score_word(attn_g2p_score *s, const int32_t *hyp, int nh, const int32_t *const *refs,
                        const int *ref_len, int nrefs, int stress) {
  int32_t hb[256], rb[256];
  if (nh > 256) nh = 256;
  const int32_t *h = stress ? hyp : unstress(hyp, nh, hb);
  int best = -1, best_len = 0;
  for (int r = 0; r < nrefs; r++) {
    int nr = ref_len[r] > 256 ? 256 : ref_len[r];
    const int32_t *x = stress ? refs[r] : unstress(refs[r], nr, rb);
    int d = attn_g2p_edit_distance(h, nh, x, nr);
    if (best < 0 || d < best || (d == best && nr < best_len)) {
      best = d;
      best_len = nr;
    }
  }
  if (best < 0) return 0;
  s->words++;
  s->word_errors += best > 0;
  s->phones += best_len;
  s->phone_errors += best;
  return best;
}

double attn_g2p_wer(const attn_g2p_score *s) {
  return s->words ? (double)s->word_errors / (double)s->words : 0.0;
}
double attn_g2p_per(const attn_g2p_score *s) {
  return s->phones ? (double)s->phone_errors / (double)s->phones : 0.0;
}
