/* The MPI group of apps/train/dist.h (with ATTN_HAVE_MPI: make finds Open MPI;
 * without, stubs that are never reached).
 *
 * The gradient buffer [n] is cut into fixed buckets from its end (the
 * backward writes the last layers' gradients first): bucket k holds
 * [max(0, n - (k + 1) BUCKET), n - k BUCKET). Each bucket is cut into P
 * chunks; chunk c is owned by rank c. Stage 1 (MPI_Ialltoallv on comm c1)
 * sends every chunk to its owner; the owner adds the P copies in rank order
 * into the gradient buffer (attn_dist_fold); stage 2 (MPI_Iallgatherv on
 * comm c2) gives every rank every owner's sum. A bucket's stage 1 starts
 * when the backward reports it final (attn_dist_grad_ready); stage 2 when
 * its stage 1 is seen complete. Collectives on one communicator must start
 * in the same order on every rank: stage 1 starts in bucket order on c1,
 * stage 2 in bucket order on c2, whatever the timing.
 *
 * Errors: the communicators return errors (MPI_ERRORS_RETURN) and each call
 * is checked; a rank that fails ends the job with attn_dist_abort (the CLI
 * does), so no rank waits forever. */
#ifdef ATTN_HAVE_MPI
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apps/train/dist_internal.h"

enum { BUCKET = 1 << 18 }; /* floats: 1 MB per bucket (ATTN_DIST_BUCKET_FLOATS overrides) */

struct dist_mpi {
  MPI_Comm c1, c2;
  int64_t bucket;  /* floats per bucket */
  int64_t n;       /* the layout below is for this n */
  int nb;          /* buckets */
  int *cnt, *dis;  /* [nb][P]: chunk counts and offsets within the bucket */
  int *rcnt, *rdis; /* [nb][P]: stage 1 receive counts/offsets (my chunk from each rank) */
  float *rbuf;     /* stage 1 receive space: [nb][P * my chunk] */
  int64_t *roff;   /* [nb]: bucket k's offset in rbuf */
  MPI_Request *r1, *r2; /* [nb] */
  int next1, next2; /* buckets whose stage 1 / stage 2 started */
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static attn_status mpi_fail(const attn_dist *d, int rc, const char *what) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "error %d", rc);
  return attn_set_error(ATTN_EIO, "MPI: %s failed on rank %d of %d: %s", what, d->rank, d->size, msg);
}
#define CHECK(call, what)                          \
  do {                                             \
    int rc_ = (call);                              \
    if (rc_ != MPI_SUCCESS) return mpi_fail(d, rc_, what); \
  } while (0)

static void bucket_range(const dist_mpi *m, int64_t n, int k, int64_t *lo, int64_t *hi) {
  *hi = n - (int64_t)k * m->bucket;
  *lo = *hi > m->bucket ? *hi - m->bucket : 0;
}

static void layout_free(dist_mpi *m) {
  free(m->cnt);
  free(m->dis);
  free(m->rcnt);
  free(m->rdis);
  free(m->rbuf);
  free(m->roff);
  free(m->r1);
  free(m->r2);
  m->cnt = m->dis = m->rcnt = m->rdis = NULL;
  m->rbuf = NULL;
  m->roff = NULL;
  m->r1 = m->r2 = NULL;
  m->n = 0;
}

static attn_status layout(attn_dist *d, int64_t n) {
  dist_mpi *m = d->m;
  if (m->n == n) return ATTN_OK;
  layout_free(m);
  int P = d->size, nb = (int)((n + m->bucket - 1) / m->bucket);
  size_t np = (size_t)nb * (size_t)P;
  m->cnt = malloc(np * sizeof(int));
  m->dis = malloc(np * sizeof(int));
  m->rcnt = malloc(np * sizeof(int));
  m->rdis = malloc(np * sizeof(int));
  m->roff = malloc((size_t)nb * sizeof(int64_t));
  m->r1 = malloc((size_t)nb * sizeof(MPI_Request));
  m->r2 = malloc((size_t)nb * sizeof(MPI_Request));
  if (!m->cnt || !m->dis || !m->rcnt || !m->rdis || !m->roff || !m->r1 || !m->r2) {
    layout_free(m);
    return attn_set_error(ATTN_ENOMEM, "dist: bucket tables");
  }
  int64_t total = 0;
  for (int k = 0; k < nb; k++) {
    int64_t lo, hi;
    bucket_range(m, n, k, &lo, &hi);
    int64_t len = hi - lo;
    int *cnt = m->cnt + (size_t)k * P, *dis = m->dis + (size_t)k * P;
    for (int c = 0; c < P; c++) {
      dis[c] = (int)(len * c / P);
      cnt[c] = (int)(len * (c + 1) / P) - dis[c];
    }
    for (int r = 0; r < P; r++) {
      m->rcnt[(size_t)k * P + r] = cnt[d->rank];
      m->rdis[(size_t)k * P + r] = r * cnt[d->rank];
    }
    m->roff[k] = total;
    total += (int64_t)P * cnt[d->rank];
    m->r1[k] = m->r2[k] = MPI_REQUEST_NULL;
  }
  m->rbuf = malloc((size_t)(total > 0 ? total : 1) * sizeof(float));
  if (!m->rbuf) {
    layout_free(m);
    return attn_set_error(ATTN_ENOMEM, "dist: receive space of %lld floats", (long long)total);
  }
  m->nb = nb;
  m->n = n;
  return ATTN_OK;
}

attn_status dist_mpi_open(attn_dist *d) {
  int inited = 0, provided = 0;
  MPI_Initialized(&inited);
  if (!inited && MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
    return attn_set_error(ATTN_EIO, "MPI_Init failed");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_size(MPI_COMM_WORLD, &d->size);
  MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
  d->m = calloc(1, sizeof *d->m);
  if (!d->m) return attn_set_error(ATTN_ENOMEM, "dist: out of memory");
  d->m->c1 = d->m->c2 = MPI_COMM_NULL;
  // smaller buckets: more overlap, more messages (the tests use a few thousand floats)
  const char *e = getenv("ATTN_DIST_BUCKET_FLOATS");
  long long b = e ? atoll(e) : 0;
  d->m->bucket = b >= 64 && b <= (1 << 28) ? b : BUCKET;
  CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &d->m->c1), "MPI_Comm_dup");
  CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &d->m->c2), "MPI_Comm_dup");
  MPI_Comm_set_errhandler(d->m->c1, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(d->m->c2, MPI_ERRORS_RETURN);
  return ATTN_OK;
}

void dist_mpi_close(attn_dist *d) {
  dist_mpi *m = d->m;
  if (m->c1 != MPI_COMM_NULL) MPI_Comm_free(&m->c1);
  if (m->c2 != MPI_COMM_NULL) MPI_Comm_free(&m->c2);
  layout_free(m);
  free(m);
  d->m = NULL;
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin) MPI_Finalize();
}

void dist_mpi_abort(attn_dist *d, int code) {
  (void)d;
  MPI_Abort(MPI_COMM_WORLD, code);
}

attn_status dist_mpi_step_begin(attn_dist *d) {
  attn_status st = layout(d, d->n);
  if (st) return st;
  d->m->next1 = d->m->next2 = 0;
  return ATTN_OK;
}

/* Bucket k's stage 1 is complete: fold my chunk's P copies in rank order
 * into the gradient, start stage 2. */
static attn_status stage2(attn_dist *d, int k) {
  dist_mpi *m = d->m;
  int P = d->size;
  int64_t lo, hi;
  bucket_range(m, d->n, k, &lo, &hi);
  const int *cnt = m->cnt + (size_t)k * P, *dis = m->dis + (size_t)k * P;
  int mine = cnt[d->rank];
  float *dst = d->grad + lo + dis[d->rank];
  const float *rb = m->rbuf + m->roff[k];
  memcpy(dst, rb, (size_t)mine * sizeof(float));
  for (int r = 1; r < P; r++) attn_dist_fold(dst, rb + (size_t)r * (size_t)mine, mine);
  CHECK(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_FLOAT, d->grad + lo, cnt, dis, MPI_FLOAT, m->c2,
                        &m->r2[k]),
        "MPI_Iallgatherv (gradient bucket)");
  return ATTN_OK;
}

/* Starts stage 2 of the buckets, in order, whose stage 1 has completed
 * (wait = 1: waits for each). */
static attn_status advance(attn_dist *d, int wait) {
  dist_mpi *m = d->m;
  while (m->next2 < m->next1) {
    int k = m->next2;
    if (wait) {
      CHECK(MPI_Wait(&m->r1[k], MPI_STATUS_IGNORE), "MPI_Wait (gradient bucket)");
    } else {
      int flag = 0;
      CHECK(MPI_Test(&m->r1[k], &flag, MPI_STATUS_IGNORE), "MPI_Test (gradient bucket)");
      if (!flag) return ATTN_OK;
    }
    attn_status st = stage2(d, k);
    if (st) return st;
    m->next2++;
  }
  return ATTN_OK;
}

attn_status dist_mpi_grad_ready(attn_dist *d, int64_t lo) {
  dist_mpi *m = d->m;
  if (d->size == 1 || !d->grad) return ATTN_OK;
  int P = d->size;
  while (m->next1 < m->nb) {
    int k = m->next1;
    int64_t blo, bhi;
    bucket_range(m, d->n, k, &blo, &bhi);
    if (blo < lo) break;
    CHECK(MPI_Ialltoallv(d->grad + blo, m->cnt + (size_t)k * P, m->dis + (size_t)k * P, MPI_FLOAT,
                         m->rbuf + m->roff[k], m->rcnt + (size_t)k * P, m->rdis + (size_t)k * P,
                         MPI_FLOAT, m->c1, &m->r1[k]),
          "MPI_Ialltoallv (gradient bucket)");
    m->next1++;
  }
  return advance(d, 0);
}

attn_status dist_mpi_step_end(attn_dist *d, double mine, double *loss) {
  dist_mpi *m = d->m;
  if (d->size == 1) {
    *loss = mine;
    return ATTN_OK;
  }
  attn_status st = dist_mpi_grad_ready(d, 0);
  if (st) return st;
  double t0 = now_s();
  st = advance(d, 1);
  if (st) return st;
  CHECK(MPI_Waitall(m->nb, m->r2, MPI_STATUSES_IGNORE), "MPI_Waitall (gradient buckets)");
  double *all = malloc((size_t)d->size * sizeof *all);
  if (!all) return attn_set_error(ATTN_ENOMEM, "dist: out of memory");
  int rc = MPI_Allgather(&mine, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, m->c1);
  if (rc == MPI_SUCCESS) {
    *loss = all[0];
    for (int r = 1; r < d->size; r++) *loss += all[r];
  }
  free(all);
  d->wait_s += now_s() - t0;
  return rc == MPI_SUCCESS ? ATTN_OK : mpi_fail(d, rc, "MPI_Allgather (losses)");
}

attn_status dist_mpi_bcast_i64(attn_dist *d, int64_t *v, int n) {
  CHECK(MPI_Bcast(v, n, MPI_INT64_T, 0, d->m->c1), "MPI_Bcast");
  return ATTN_OK;
}

attn_status dist_mpi_max_i64(attn_dist *d, int64_t *v) {
  CHECK(MPI_Allreduce(MPI_IN_PLACE, v, 1, MPI_INT64_T, MPI_MAX, d->m->c1), "MPI_Allreduce (max)");
  return ATTN_OK;
}

attn_status dist_mpi_allreduce_sum(attn_dist *d, float *x, int64_t n) {
  for (int64_t o = 0; o < n; o += 1 << 30) {
    int c = (int)(n - o < (1 << 30) ? n - o : (1 << 30));
    CHECK(MPI_Allreduce(MPI_IN_PLACE, x + o, c, MPI_FLOAT, MPI_SUM, d->m->c1), "MPI_Allreduce");
  }
  return ATTN_OK;
}

attn_status dist_mpi_barrier(attn_dist *d) {
  CHECK(MPI_Barrier(d->m->c1), "MPI_Barrier");
  return ATTN_OK;
}
#else
/* A build without MPI: attn_dist_open never opens an MPI group (it refuses
 * under mpirun), so these are never reached; they say why if they are. */
#include "apps/train/dist_internal.h"

static attn_status no_mpi(void) {
  return attn_set_error(ATTN_EUNSUPPORTED, "this attn was built without MPI (make MPI=1)");
}
attn_status dist_mpi_open(attn_dist *d) { return no_mpi(); }
void dist_mpi_close(attn_dist *d) {}
void dist_mpi_abort(attn_dist *d, int code) {}
attn_status dist_mpi_step_begin(attn_dist *d) { return no_mpi(); }
attn_status dist_mpi_grad_ready(attn_dist *d, int64_t lo) { return no_mpi(); }
attn_status dist_mpi_step_end(attn_dist *d, double mine, double *loss) { return no_mpi(); }
attn_status dist_mpi_bcast_i64(attn_dist *d, int64_t *v, int n) { return no_mpi(); }
attn_status dist_mpi_max_i64(attn_dist *d, int64_t *v) { return no_mpi(); }
attn_status dist_mpi_allreduce_sum(attn_dist *d, float *x, int64_t n) { return no_mpi(); }
attn_status dist_mpi_barrier(attn_dist *d) { return no_mpi(); }
#endif
