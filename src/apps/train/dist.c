/* apps/train/dist.h: the local group (one process, S shards one after another)
 * and the front end that hands an MPI group to dist_mpi.c. */
#include <stdlib.h>
#include <string.h>

#include "apps/train/dist_internal.h"

int attn_dist_mpi_built(void) {
#ifdef ATTN_HAVE_MPI
  return 1;
#else
  return 0;
#endif
}

int attn_dist_launched(void) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
    if (getenv(vars[i])) return 1;
  return 0;
}

attn_status attn_dist_open(attn_dist **out, int shards) {
  if (!out) return attn_set_error(ATTN_EINVAL, "dist_open: NULL argument");
  *out = NULL;
  if (shards < 0 || shards > 4096)
    return attn_set_error(ATTN_EINVAL, "--shards %d: need 1..4096", shards);
  int mpi = attn_dist_launched();
  if (mpi && !attn_dist_mpi_built())
    return attn_set_error(ATTN_EUNSUPPORTED,
                          "started by mpirun, but this attn was built without MPI (make MPI=1 with "
                          "libopenmpi-dev installed): each process would train alone; run it "
                          "without mpirun, or rebuild");
  attn_dist *d = calloc(1, sizeof *d);
  if (!d) return attn_set_error(ATTN_ENOMEM, "dist_open: out of memory");
  d->size = 1;
  d->shards = shards > 0 ? shards : 1;
  attn_status st = ATTN_OK;
  if (mpi) {
    st = dist_mpi_open(d);  // sets size, rank, m
    if (!st && shards > 0 && shards != d->size)
      st = attn_set_error(ATTN_EINVAL, "--shards %d under mpirun -np %d: the shards are the "
                          "processes (leave --shards out, or give %d)", shards, d->size, d->size);
    if (!st) {
      d->shards = d->size;
      d->mpi = 1;
    }
  }
  if (!st) {
    d->loss = calloc((size_t)d->shards, sizeof *d->loss);
    if (!d->loss) st = attn_set_error(ATTN_ENOMEM, "dist_open: out of memory");
  }
  if (st) {
    attn_dist_close(d);
    return st;
  }
  *out = d;
  return ATTN_OK;
}

void attn_dist_close(attn_dist *d) {
  if (!d) return;
  if (d->m) dist_mpi_close(d);
  free(d->acc);
  free(d->loss);
  free(d);
}

void attn_dist_abort(attn_dist *d, int code) {
  if (d && d->m && d->size > 1) dist_mpi_abort(d, code);
}

int attn_dist_size(const attn_dist *d) { return d ? d->size : 1; }
int attn_dist_rank(const attn_dist *d) { return d ? d->rank : 0; }
int attn_dist_shards(const attn_dist *d) { return d ? d->shards : 1; }
int attn_dist_first_shard(const attn_dist *d) { return d && d->mpi ? d->rank : 0; }
int attn_dist_local_shards(const attn_dist *d) { return d && !d->mpi ? d->shards : 1; }
const char *attn_dist_kind(const attn_dist *d) { return d && d->mpi ? "mpi" : "local"; }
double attn_dist_wait_seconds(const attn_dist *d) { return d ? d->wait_s : 0.0; }

void attn_dist_shard_rows(int64_t B, int S, int s, int64_t *lo, int64_t *hi) {
  if (S < 1) S = 1;
  *lo = B * s / S;
  *hi = B * (s + 1) / S;
}

void attn_dist_fold(float *acc, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) acc[i] += x[i];
}

attn_status attn_dist_step_begin(attn_dist *d, float *grad, int64_t n) {
  if (!d || !grad || n <= 0) return attn_set_error(ATTN_EINVAL, "dist_step_begin: no gradient");
  d->grad = grad;
  d->n = n;
  d->done = 0;
  if (!d->mpi && d->shards > 1 && d->acc_cap < n) {
    float *a = realloc(d->acc, (size_t)n * sizeof *a);
    if (!a) return attn_set_error(ATTN_ENOMEM, "dist: gradient sum of %lld floats", (long long)n);
    d->acc = a;
    d->acc_cap = n;
  }
  return d->mpi ? dist_mpi_step_begin(d) : ATTN_OK;
}

attn_status attn_dist_grad_ready(attn_dist *d, int64_t lo) {
  return d && d->mpi ? dist_mpi_grad_ready(d, lo) : ATTN_OK;
}

attn_status attn_dist_shard_done(attn_dist *d, double loss) {
  if (!d || !d->grad || d->done >= attn_dist_local_shards(d))
    return attn_set_error(ATTN_EINVAL, "dist_shard_done: no step begun, or more shards than %d",
                          attn_dist_local_shards(d));
  if (!d->mpi && d->shards > 1) {
    if (d->done == 0) memcpy(d->acc, d->grad, (size_t)d->n * sizeof(float));
    else attn_dist_fold(d->acc, d->grad, d->n);
  }
  d->loss[d->done++] = loss;
  return ATTN_OK;
}

attn_status attn_dist_step_end(attn_dist *d, double *loss) {
  if (!d || !d->grad || d->done != attn_dist_local_shards(d))
    return attn_set_error(ATTN_EINVAL, "dist_step_end: %d of %d shards done",
                          d ? d->done : 0, attn_dist_local_shards(d));
  attn_status st = ATTN_OK;
  double sum = d->loss[0];
  if (d->mpi) st = dist_mpi_step_end(d, d->loss[0], &sum);
  if (!d->mpi && d->shards > 1) {
    memcpy(d->grad, d->acc, (size_t)d->n * sizeof(float));
    for (int k = 1; k < d->shards; k++) sum += d->loss[k];
  }
  if (loss) *loss = sum;
  d->grad = NULL;
  return st;
}

/* The collectives below are MPI's, or nothing to do in one process. */
attn_status attn_dist_bcast_i64(attn_dist *d, int64_t *v, int n) {
  return d && d->mpi ? dist_mpi_bcast_i64(d, v, n) : ATTN_OK;
}

attn_status attn_dist_max_i64(attn_dist *d, int64_t *v) {
  return d && d->mpi ? dist_mpi_max_i64(d, v) : ATTN_OK;
}

attn_status attn_dist_allreduce_sum(attn_dist *d, float *x, int64_t n) {
  return d && d->mpi ? dist_mpi_allreduce_sum(d, x, n) : ATTN_OK;
}

attn_status attn_dist_barrier(attn_dist *d) { return d && d->mpi ? dist_mpi_barrier(d) : ATTN_OK; }
