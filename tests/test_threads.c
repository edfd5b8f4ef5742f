/* attn's thread count is its own (src/core/threads.c): attn_set_num_threads,
 * else $ATTN_NUM_THREADS, else the environment's $OMP_NUM_THREADS, else
 * the CPUs this process may use; never what another library set in the
 * shared OpenMP runtime (Debian's torch calls omp_set_num_threads(1) when
 * imported): the count stays, and a kernel call runs on it. */
#include <dirent.h>
#include <omp.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static int affinity_cpus(void) {
  cpu_set_t set;
  return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : -1;
}

/* The threads of this process (/proc/self/task). */
static int os_threads(void) {
  DIR *d = opendir("/proc/self/task");
  int n = 0;
  if (!d) return -1;
  for (struct dirent *e; (e = readdir(d));)
    n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

/* attn_get_num_threads() of a fresh process (a child forked before this one
 * read its default) with the two variables set as given (NULL: unset),
 * optionally on one CPU; -1 if the child failed. */
static int default_in_child(const char *attn_env, const char *omp_env, int one_cpu) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    if (attn_env)
      setenv("ATTN_NUM_THREADS", attn_env, 1);
    else
      unsetenv("ATTN_NUM_THREADS");
    if (omp_env)
      setenv("OMP_NUM_THREADS", omp_env, 1);
    else
      unsetenv("OMP_NUM_THREADS");
    if (one_cpu) {
      cpu_set_t set;
      int first = -1;
      if (sched_getaffinity(0, sizeof set, &set) != 0) _exit(255);
      for (int c = 0; c < CPU_SETSIZE && first < 0; c++)
        if (CPU_ISSET(c, &set)) first = c;
      CPU_ZERO(&set);
      CPU_SET(first, &set);
      if (sched_setaffinity(0, sizeof set, &set) != 0) _exit(255);
    }
    _exit(attn_get_num_threads() & 0xff);
  }
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) == 255) return -1;
  return WEXITSTATUS(st);
}

static void test_default_and_environment(void) {
  int cpus = affinity_cpus();
  CHECK(cpus >= 1);
  CHECK(default_in_child(NULL, NULL, 0) == (cpus > 254 ? cpus & 0xff : cpus));
  CHECK(default_in_child(NULL, NULL, 1) == 1); /* taskset's way: the CPUs it may use */
  CHECK(default_in_child("3", NULL, 0) == 3);
  CHECK(default_in_child("3", "5", 0) == 3); /* attn's own variable first */
  CHECK(default_in_child(NULL, "5", 0) == 5);
  CHECK(default_in_child(NULL, "5,2", 0) == 5); /* one count per nesting level */
  CHECK(default_in_child("lots", "5", 0) == 5); /* ignored here; the tool refuses it */
  CHECK(default_in_child("0", NULL, 1) == 1);   /* not a count */
}

/* omp_set_num_threads(1), as torch does at import, changes nothing of attn's;
 * a GEMM then starts attn's count of threads. Runs first in this process,
 * before any parallel region started the OpenMP pool. */
static void test_another_librarys_setting_does_not_change_it(void) {
  int cpus = affinity_cpus();
  omp_set_num_threads(1);
#pragma omp parallel
  { (void)0; } /* the pool at 1 thread: no worker */
  CHECK(omp_get_max_threads() == 1);
  CHECK(attn_get_num_threads() == cpus);
  attn_set_num_threads(3);
  enum { N = 256 };
  static float a[N * N], b[N * N], c[N * N];
  for (int i = 0; i < N * N; i++)
    a[i] = (float)(i % 7) - 3.0f, b[i] = (float)(i % 5) - 2.0f;
  int before = os_threads();
  CHECK_OK(attn_gemm_f32(0, 0, N, N, N, 1.0f, a, N, b, N, 0.0f, c, N));
  int after = os_threads();
  if (after - before < 2) printf("  threads before %d, after %d\n", before, after);
  CHECK(before > 0 && after - before >= 2); /* 3 threads: 2 workers started */
  CHECK(omp_get_max_threads() == 1);        /* and the other library's setting is its own */
  attn_set_num_threads(0);
  CHECK(attn_get_num_threads() == cpus);
}

static void test_set_and_get(void) {
  attn_set_num_threads(5);
  CHECK(attn_get_num_threads() == 5);
  attn_set_num_threads(100000);
  CHECK(attn_get_num_threads() == 4096);
  attn_set_num_threads(-2); /* as 0: the default */
  CHECK(attn_get_num_threads() == affinity_cpus());
}

/* Every parallel region in src/ names its thread count (num_threads(...)
 * from attn_get_num_threads()): one without would take the OpenMP runtime's
 * count, which another library sets. */
static void test_every_parallel_region_names_its_count(void) {
  FILE *f = fopen("src/core/threads.c", "r");
  if (!f) {
    SKIP("src/ not here (run from the repository root)");
    return;
  }
  fclose(f);
  FILE *p =
      popen("grep -rn --include='*.c' --include='*.h' '#pragma omp parallel' src 2>/dev/null", "r");
  CHECK(p != NULL);
  if (!p) return;
  char line[1024];
  int regions = 0, unnamed = 0;
  while (fgets(line, sizeof line, p)) {
    regions++;
    /* a clause may continue on the next line: then the pragma ends in '\' */
    if (!strstr(line, "num_threads(") && !strchr(line, '\\')) {
      printf("  no num_threads clause: %s", line);
      unnamed++;
    }
  }
  pclose(p);
  CHECK(regions >= 40); /* the kernels' regions were found */
  CHECK(unnamed == 0);
}

int main(void) {
  /* this process's default: the CPUs, whatever the caller's environment */
  unsetenv("ATTN_NUM_THREADS");
  unsetenv("OMP_NUM_THREADS");
  RUN(test_default_and_environment);
  RUN(test_another_librarys_setting_does_not_change_it);
  RUN(test_set_and_get);
  RUN(test_every_parallel_region_names_its_count);
  HARNESS_END();
}
