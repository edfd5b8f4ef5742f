/* Data parallelism: every global batch is cut into S shards of rows, each
 * shard's gradient is computed on its own, and the shards' gradients are
 * summed in shard order, ((g0 + g1) + g2) + ..., element by element.
 *
 * Two implementations behind this one interface:
 * - MPI (a build with ATTN_HAVE_MPI, the program started by mpirun): P
 *   processes, one shard each (S = P); the sum is computed in fixed buckets
 *   of the flat gradient buffer by reduce-scatter + all-gather on
 *   non-blocking collectives (MPI_Ialltoallv, MPI_Iallgatherv), each rank
 *   adding its chunk's P contributions in rank order, so every rank holds the
 *   same bits and a P-process run equals the 1-process run with S = P below
 *   to the bit. Buckets are launched as the backward finishes them
 *   (attn_dist_grad_ready), overlapping communication with the rest of the
 *   backward (progress is made at each attn_dist_grad_ready call).
 * - local: one process computing its S shards one after another (S = 1: the
 *   plain run, nothing added). The twin of a P-process run on one machine.
 *
 * Shard s of a global batch of B rows holds rows [s B / S, (s + 1) B / S)
 * (attn_dist_shard_rows): uneven B is cut exactly, and the trainer
 * normalises each shard's loss by the global B, so the summed gradient is
 * the gradient of the global batch's mean loss. */
#ifndef ATTN_APPS_DIST_H
#define ATTN_APPS_DIST_H

#include <stdint.h>

#include "attn/status.h"

typedef struct attn_dist attn_dist;

/* 1 when this build has MPI (ATTN_HAVE_MPI). */
int attn_dist_mpi_built(void);
/* 1 when the environment says the process was started by mpirun (Open MPI's
 * OMPI_COMM_WORLD_SIZE, or PMIx/PMI's rank variables). */
int attn_dist_launched(void);

/* Opens the process group. Started by mpirun in an MPI build: MPI_Init, P =
 * the world's size, S = P (shards must be 0 or P). Started by mpirun in a
 * build without MPI: ATTN_EUNSUPPORTED (each process would train alone).
 * Otherwise one process with `shards` shards (0: 1). */
attn_status attn_dist_open(attn_dist **d, int shards);
/* Ends the group (MPI_Finalize); d may be NULL. */
void attn_dist_close(attn_dist *d);
/* For a program's failure path: with P > 1, ends every process of the group
 * now (MPI_Abort with `code`), so that none waits forever on a collective a
 * failed rank will never join. With P = 1: returns. */
void attn_dist_abort(attn_dist *d, int code);

int attn_dist_size(const attn_dist *d);   /* processes (1 for d == NULL) */
int attn_dist_rank(const attn_dist *d);   /* this one's (0 for d == NULL) */
int attn_dist_shards(const attn_dist *d); /* S (1 for d == NULL) */
/* This process computes shards [first, first + count). */
int attn_dist_first_shard(const attn_dist *d);
int attn_dist_local_shards(const attn_dist *d);
/* "mpi" or "local" */
const char *attn_dist_kind(const attn_dist *d);

/* Rows [*lo, *hi) of shard s of S of a batch of B rows. */
void attn_dist_shard_rows(int64_t B, int S, int s, int64_t *lo, int64_t *hi);

/* One step's gradient sum. begin(grad [n]); then for each local shard, in
 * order: its backward writes grad (zeroed by the caller first), calling
 * attn_dist_grad_ready(lo) as grad[lo, n) becomes final (lo decreasing; may
 * be skipped), then attn_dist_shard_done(loss of the shard); then end: grad
 * holds the shard-order sum on every process and *loss the shards' losses
 * added in shard order (in double). */
attn_status attn_dist_step_begin(attn_dist *d, float *grad, int64_t n);
attn_status attn_dist_grad_ready(attn_dist *d, int64_t lo);
attn_status attn_dist_shard_done(attn_dist *d, double loss);
attn_status attn_dist_step_end(attn_dist *d, double *loss);

/* Seconds this process spent blocked in communication (end's waits), and
 * in all of begin..end, since open. */
double attn_dist_wait_seconds(const attn_dist *d);

/* Every process gets rank 0's v[0..n). */
attn_status attn_dist_bcast_i64(attn_dist *d, int64_t *v, int n);

/* *v = the largest of the processes' *v (e.g. the slowest rank's time). */
attn_status attn_dist_max_i64(attn_dist *d, int64_t *v);

/* A blocking all-reduce (sum) of x[n] in place, as fast as the MPI library
 * does it (not rank-ordered): attn bench allreduce's comparison. Local: no-op. */
attn_status attn_dist_allreduce_sum(attn_dist *d, float *x, int64_t n);
/* Every process waits for all (MPI_Barrier). */
attn_status attn_dist_barrier(attn_dist *d);

/* acc[i] += x[i]: the fold both implementations use. */
void attn_dist_fold(float *acc, const float *x, int64_t n);

#endif
