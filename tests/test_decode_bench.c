/* `attn bench decode` and `attn bench membw` run and print what they say:
 * the CPU line, the bandwidth measured in the run, one row per dtype and
 * Lk whose cache size is the K/V bytes of that shape (int8 with its
 * scales) and whose GB/s is those bytes over the time, and the cache over
 * the last-level cache where the CPU says its size; bad options exit 2.
 * Nothing is timed against a target here (a shared machine). */
#include <unistd.h>

#include "harness.h"
#include "tool_run.h"

static char bin[512], dir[64], out[65536], err[4096];

static int run(const char *args) {
  return tool_run("", bin, dir, args, out, sizeof out, err, sizeof err);
}

/* the row of dtype t at Lk n: its numbers into v (up to 14), their count */
static int row(const char *t, long n, double *v) {
  char key[64];
  snprintf(key, sizeof key, "\n%5s %7ld ", t, n);
  const char *p = strstr(out, key);
  if (!p) return 0;
  p += strlen(key);
  int k = 0;
  while (k < 14) {
    char *end;
    double x = strtod(p, &end);
    if (end == p) break;
    v[k++] = x;
    p = end;
  }
  return k;
}

static void test_bench_decode_rows(void) {
  CHECK(run("bench decode --lk 40 300 --dtype f16 int8 int8r --heads 4 --kv-heads 2 --dim 32 "
            "--runs 1 --membw-mib 4 --threads 2") == 0);
  CHECK(strstr(out, "CPU: ") == out);
  /* the family and model where /proc/cpuinfo gives them (x86) */
  int fam = 0;
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f) {
    char line[512];
    while (!fam && fgets(line, sizeof line, f))
      fam = !strncmp(line, "cpu family", 10);
    fclose(f);
  }
  const char *nl = strchr(out, '\n'), *fm = strstr(out, " (family ");
  if (fam) CHECK(fm != NULL && nl != NULL && fm < nl && strstr(fm, " model ") < nl);
  CHECK(strstr(out, "memory read bandwidth measured now") != NULL);
  CHECK(strstr(out, "4 query heads over 2 KV heads, D=32, 2 threads") != NULL);
  static const char *const types[] = {"f16", "int8", "int8r"}; /* int8r: the rows layout */
  static const long lks[] = {40, 300};
  const long long llc = (long long)attn_cpu_llc_bytes(); /* as the bench finds it */
  CHECK((strstr(out, "\nlast-level cache: ") != NULL) == (llc > 0));
  for (int t = 0; t < 3; t++)
    for (int i = 0; i < 2; i++) {
      double v[14];
      int k = row(types[t], lks[i], v);
      /* cache_MiB ms GB/s %bw %bw_p %fma_p tok/s paged_ms paged/c pg_ceil ms_1thr GB/s_1
       * split_x, xLLC (- where unknown) */
      CHECK(k == (llc > 0 ? 14 : 13));
      if (k < 13) continue;
      const double bytes = lks[i] * 2.0 * (2 * 32 * (t ? 1 : 2) + (t ? 8 : 0));
      if (k == 14) CHECK(fabs(v[13] - bytes / (double)llc) <= 0.006);
      CHECK(fabs(v[0] - bytes / 1048576.0) <= 0.051);
      /* %bw_p of a 10 KiB cache against a 4 MiB read may print 0.0; %fma_p a share of
       * the FMA loop's rate, below 100 on a CPU whose decode runs on that loop's FMAs */
      CHECK(v[1] > 0 && v[4] >= 0 && v[5] >= 0 && v[7] > 0 && v[9] > 0 && v[10] > 0);
      CHECK(fabs(v[2] - bytes / (v[1] * 1e-3) * 1e-9) <= 0.01 * v[2] + 0.006);
      CHECK(fabs(v[6] - 1.0 / (v[1] * 1e-3)) <= 0.01 * v[6] + 0.2);
      CHECK(fabs(v[8] - v[7] / v[1]) <= 0.01 * v[8] + 0.002);
      CHECK(fabs(v[12] - v[10] / v[1]) <= 0.01 * v[12] + 0.006);
    }
  CHECK(strstr(out, "\n  f32 ") == NULL && strstr(out, "\n bf16 ") == NULL);
}

static void test_bench_membw_and_bad_options(void) {
  CHECK(run("bench membw --mib 4 --threads 2") == 0);
  CHECK(strstr(out, "memory read bandwidth (4 MiB buffer") != NULL);
  CHECK(strstr(out, "1 thread ") != NULL && strstr(out, "2 threads ") != NULL);
  CHECK(strstr(out, "shuffled chunks") == NULL);
  CHECK(run("bench membw --mib 4 --threads 2 --chunk 4096") == 0);
  CHECK(strstr(out, "in shuffled chunks of 4096 bytes: 1 thread ") != NULL);
  CHECK(run("bench membw --chunk 10") == 2);
  CHECK(run("bench decode --heads 30 --kv-heads 8") == 2);
  CHECK(strstr(err, "not a multiple") != NULL);
  CHECK(run("bench decode --dtype f8") == 2);
  CHECK(strstr(err, "bad argument near '--dtype'") != NULL);
  CHECK(run("bench decode --runs 32") == 2 && strstr(err, "--runs 1..31") != NULL);
  CHECK(run("bench decode --lq 17") == 2);
  CHECK(run("bench decode --help") == 0 && strstr(out, "usage: attn bench decode") != NULL);
}

int main(int argc, char **argv) {
  (void)argc;
  tool_path(argv[0], bin, sizeof bin);
  snprintf(dir, sizeof dir, "/tmp/attn_decode_bench_XXXXXX");
  if (!mkdtemp(dir)) {
    printf("cannot make a temporary directory\n");
    return 1;
  }
  if (access(bin, X_OK) != 0) {
    RUN_SKIPPED(test_bench_decode_rows, "no attn tool");
  } else {
    RUN(test_bench_decode_rows);
    RUN(test_bench_membw_and_bad_options);
  }
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) printf("  could not remove %s\n", dir);
  HARNESS_END();
}
