/* The group behind apps/train/dist.h, shared by its local part (dist.c) and its
 * MPI part (dist_mpi.c, built with ATTN_HAVE_MPI only). */
#ifndef ATTN_APPS_DIST_INTERNAL_H
#define ATTN_APPS_DIST_INTERNAL_H

#include "apps/train/dist.h"

typedef struct dist_mpi dist_mpi;

struct attn_dist {
  int size, rank, shards, mpi;
  float *grad; /* this step's gradient buffer [n] (the caller's) */
  int64_t n;
  float *acc;  /* local, S > 1: the shards' running sum [acc_cap] */
  int64_t acc_cap;
  double *loss; /* the local shards' losses this step [shards] */
  int done;     /* local shards done this step */
  double wait_s;
  dist_mpi *m;  /* MPI state (NULL: local) */
};

/* MPI's side (dist_mpi.c); without MPI each says so (ATTN_EUNSUPPORTED);
 * dist.c calls them only for a group dist_mpi_open opened. */
attn_status dist_mpi_open(attn_dist *d);
void dist_mpi_close(attn_dist *d);
void dist_mpi_abort(attn_dist *d, int code);
attn_status dist_mpi_step_begin(attn_dist *d);
attn_status dist_mpi_grad_ready(attn_dist *d, int64_t lo);
/* Finishes the sum; *loss = the ranks' `mine` added in rank order. */
attn_status dist_mpi_step_end(attn_dist *d, double mine, double *loss);
attn_status dist_mpi_bcast_i64(attn_dist *d, int64_t *v, int n);
attn_status dist_mpi_max_i64(attn_dist *d, int64_t *v);
attn_status dist_mpi_allreduce_sum(attn_dist *d, float *x, int64_t n);
attn_status dist_mpi_barrier(attn_dist *d);

#endif
