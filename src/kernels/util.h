/* Small helpers shared by the kernel loops (internal). */
#ifndef ATTN_KERNELS_UTIL_H
#define ATTN_KERNELS_UTIL_H

#include <stdint.h>

#include "attn/kernels.h"
#include "core/checked.h"

#ifdef _OPENMP
#include <omp.h>
#endif

static inline int64_t attn_min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t attn_max64(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t attn_round_up(int64_t a, int64_t b) { return attn_ceil_div(a, b) * b; }

/* This thread's index in the enclosing OpenMP team (0 outside one). */
static inline int attn_thread_id(void) {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

/* The number of threads in the enclosing OpenMP team (1 outside one). */
static inline int attn_team_size(void) {
#ifdef _OPENMP
  return omp_get_num_threads();
#else
  return 1;
#endif
}

/* Threads for a call of `macs` multiply-adds in `items` independent work
 * items: the configured count, fewer for small calls (at least ~1M
 * multiply-adds per thread; results never depend on it). */
static inline int attn_kernel_threads(double macs, int64_t items) {
  int nt = attn_get_num_threads();
  double cap = macs / (double)(1 << 20);
  if (cap < nt) nt = (int)cap;
  if (items < nt) nt = (int)items;
  return nt < 1 ? 1 : nt;
}

#endif
