/* The kernel thread count (CPU features and ISA levels: kernels/cpu.c).
 *
 * attn's count is its own: every parallel region passes
 * attn_get_num_threads() in its num_threads clause, and this never reads
 * omp_get_max_threads(), which another library in the same process changes
 * through the shared OpenMP runtime (Debian's torch calls
 * omp_set_num_threads(1) when imported on a 2-vCPU machine: attn followed it
 * and ran on one thread). In order:
 *   1. attn_set_num_threads(n), n > 0;
 *   2. $ATTN_NUM_THREADS (an integer in [1, 4096]; anything else is ignored
 *      here, the tool and the Python package refuse it with a message);
 *   3. $OMP_NUM_THREADS's first value: the environment variable, the
 *      user's setting (not what a library set since with omp_set_num_threads);
 *   4. the CPUs this process may run on (sched_getaffinity: taskset, cgroup
 *      cpusets), else the online CPUs.
 * 2-4 are read once, at the first call. */
#include "attn/kernels.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

enum { MAX_THREADS = 4096 };

static int num_threads;
static int default_threads;
static pthread_once_t default_once = PTHREAD_ONCE_INIT;

/* A whole decimal integer in [1, MAX_THREADS] at the start of s, ending at
 * its end or at a comma (OMP_NUM_THREADS may list one count per level), or 0. */
static int parse_count(const char *s) {
  if (!s) return 0;
  char *end = NULL;
  long n = strtol(s, &end, 10);
  if (end == s || (*end && *end != ',') || n < 1 || n > MAX_THREADS) return 0;
  return (int)n;
}

static int usable_cpus(void) {
#ifdef CPU_COUNT
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
#endif
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : (int)n;
}

static void init_default(void) {
  int n = parse_count(getenv("ATTN_NUM_THREADS"));
  if (!n) n = parse_count(getenv("OMP_NUM_THREADS"));
  if (!n) n = usable_cpus();
  default_threads = n;
}

void attn_set_num_threads(int n) { num_threads = n > 0 ? (n > MAX_THREADS ? MAX_THREADS : n) : 0; }

int attn_get_num_threads(void) {
  if (num_threads > 0) return num_threads;
  pthread_once(&default_once, init_default);
  return default_threads;
}
