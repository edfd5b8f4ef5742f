/* `attn bench sdpa --mod NAME`: a case's built-in causal mask, window, ALiBi
 * or softcap written as a user callback (attn/sdpa_mods.h) instead, so that the callback is timed against its built-in
 * equivalent (issue 17's target: within 2x). */
#ifndef ATTN_APPS_TOOLS_BENCH_SDPA_MODS_H
#define ATTN_APPS_TOOLS_BENCH_SDPA_MODS_H

#include "attn.h"

typedef enum {
  BENCH_MOD_NONE,
  BENCH_MOD_CAUSAL,         /* mask_mod kv <= q, with a 64 x 64 block mask */
  BENCH_MOD_CAUSAL_NOBLOCK, /* the same mask_mod, no block mask */
  BENCH_MOD_WINDOW,         /* mask_mod of the case's window, with a block mask */
  BENCH_MOD_ALIBI,          /* score_mod s - slope[h] |q - kv| */
  BENCH_MOD_SOFTCAP,        /* score_mod cap tanh(s / cap) (the case's --softcap) */
  BENCH_MOD_ALIBI_ROW,      /* the same as score_mod_row, a loop the compiler vectorises */
  BENCH_MOD_SOFTCAP_ROW,    /* softcap as score_mod_row with attn_bench_tanh_row */
  BENCH_MOD_IDENTITY,       /* score_mod returning the score: the per-pair dispatch's own
                             * cost, timed against the case without it */
  BENCH_MOD_SOFTCAP_FAST    /* softcap as score_mod with the fast tanh of attn_bench_tanh_row
                             * in scalar code (not libm's tanhf) */
} attn_bench_mod_kind;

/* "causal" ... "softcap" -> kind; -1 if unknown. */
int attn_bench_mod_parse(const char *name);
const char *attn_bench_mod_name(int kind);

typedef struct {
  attn_sdpa_mods mods;
  attn_block_mask bm;
  int64_t wl, wr;
  const float *slopes;
  float cap;
} attn_bench_mod;

/* From the case's descriptor d (with its --causal / --window / --alibi):
 * *builtin := d (with --softcap etc.), then d loses the built-in that kind replaces and gets the
 * callbacks (m holds them; m->slopes and the block mask live as long as d).
 * Returns 0, or 1 with a message printed (the case lacks the built-in, or
 * no memory). */
int attn_bench_mod_setup(int kind, attn_sdpa_desc *d, attn_sdpa_desc *builtin, attn_bench_mod *m);
void attn_bench_mod_free(attn_bench_mod *m);
/* t[c] = tanh(x[c]) in plain C that vectorises (x == t allowed): the fast
 * tanh of the softcap-row callbacks, error <= 3.5e-7. */
void attn_bench_tanh_row(const float *x, float *t, int64_t n);

#endif
