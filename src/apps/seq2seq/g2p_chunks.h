/* Coarse parallel work for G2P decoding and scoring: chunks of words run one
 * per thread at a time (the operations inside a chunk on that thread alone:
 * nested regions), instead of many small parallel regions per step. The
 * chunks are fixed by the caller (by the word order), so what a chunk
 * computes does not depend on the thread count. */
#ifndef ATTN_APPS_G2P_CHUNKS_H
#define ATTN_APPS_G2P_CHUNKS_H

#include <stdint.h>

#include "attn/status.h"

/* Chunk c run by thread t (0 .. nt-1: per-thread buffers). */
typedef attn_status (*attn_g2p_chunk_fn)(void *user, int64_t c, int t);

/* The threads for n chunks: attn_get_num_threads(), at most n, at least 1. */
int attn_g2p_chunk_threads(int64_t n);

/* Runs fn on chunks 0 .. n-1 on nt threads (dynamic order). After a chunk
 * fails no chunk after it starts; the status and message returned are those
 * of the lowest-numbered chunk that failed (ATTN_OK if none did). */
attn_status attn_g2p_run_chunks(int64_t n, int nt, attn_g2p_chunk_fn fn, void *user);

#endif
