/* A program's side of data parallelism (apps/train/dist.h): opening the group
 * with rank 0 as the only voice, and ending it so that a failed rank takes
 * every rank down with a message instead of leaving them waiting. Used by
 * attn train, attn bench train and attn bench allreduce. */
#ifndef ATTN_APPS_DIST_RUN_H
#define ATTN_APPS_DIST_RUN_H

#include "apps/train/dist.h"

/* attn_dist_open(d, shards); on ranks > 0 stdout then goes to /dev/null
 * (rank 0 prints the logs; errors stay on every rank's stderr). On failure
 * prints "attn CMD: ..." and returns 1; else 0. */
int attn_dist_run_open(attn_dist **d, int shards, const char *cmd);
/* Ends the group and returns rc. rc != 0 with more than one process: says
 * "attn CMD: rank R of P failed (above): ending every rank" and aborts the
 * job (MPI_Abort) so that no rank hangs in a collective. */
int attn_dist_run_close(attn_dist *d, int rc, const char *cmd);

#endif
