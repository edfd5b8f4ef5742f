/* The kernel thread count (CPU features and ISA levels: kernels/cpu.c). */
#include "attn/kernels.h"

#ifdef _OPENMP
#include <omp.h>
#endif

static int num_threads;

void attn_set_num_threads(int n) { num_threads = n > 0 ? n : 0; }

int attn_get_num_threads(void) {
  if (num_threads > 0) return num_threads;
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}
