/* Chunks of G2P work in parallel (g2p_chunks.h). */
#include "apps/seq2seq/g2p_chunks.h"

#include <stdio.h>

#include "attn/kernels.h"
#ifdef _OPENMP
#include <omp.h>
#endif

int attn_g2p_chunk_threads(int64_t n) {
  int nt = attn_get_num_threads();
  nt = nt < n ? nt : (int)n;
  return nt > 1 ? nt : 1;
}

attn_status attn_g2p_run_chunks(int64_t n, int nt, attn_g2p_chunk_fn fn, void *user) {
  int64_t bad = n; /* the first chunk that failed, its status and message */
  attn_status bad_st = ATTN_OK;
  char bad_msg[256] = "";
#pragma omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1)
  for (int64_t c = 0; c < n; c++) {
    int64_t failed;
#pragma omp atomic read
    failed = bad;
    if (failed < c) continue;
    int t = 0;
#ifdef _OPENMP
    t = omp_get_thread_num();
#endif
    const attn_status e = fn(user, c, t);
    if (e) {
#pragma omp critical(g2p_chunk_error)
      if (c < bad) {
#pragma omp atomic write
        bad = c;
        bad_st = e;
        snprintf(bad_msg, sizeof bad_msg, "%s", attn_last_error());
      }
    }
  }
  return bad_st ? attn_set_error(bad_st, "%s", bad_msg) : ATTN_OK;
}
