/* attn_bench_interleave (src/apps/tools/bench_interleave.c): the cases run
 * round after round (A B A B ...), at least min_rounds, the budget honoured,
 * a failure stops it; the minimum CPU time per run is kept. And `attn bench
 * sdpa` reports its vs_plain / vs_builtin as that ratio of minima (JSON
 * fields rounds, ratios, cpu_min_ms ...), with --mod identity (the per-pair
 * callback returning the score: dispatch alone) against the plain case.
 * Nothing is measured here: only the order and the bookkeeping. */
#include <sys/wait.h>
#include <unistd.h>

#include "apps/tools/bench_interleave.h"
#include "harness.h"

typedef struct {
  int order[256], n, fail_at;
  volatile double sink;
} calls;

static int record(void *ctx, int c) {
  calls *k = ctx;
  if (k->n == k->fail_at) return 1;
  if (k->n < 256) k->order[k->n] = c;
  k->n++;
  for (int i = 0; i < 20000 * (c + 1); i++) /* some CPU time, case 1 twice case 0's */
    k->sink += 1e-9 * i;
  return 0;
}

static void test_rounds_interleaved(void) {
  calls k = {.fail_at = -1};
  attn_bench_timing t[3];
  int rounds = attn_bench_interleave(3, record, &k, 5, 7, 0.0, t);
  CHECK(rounds == 5); /* the budget (0 s) spent: the minimum count */
  CHECK(k.n == 3 * (rounds + 1)); /* one warm-up round */
  for (int i = 0; i < k.n && i < 256; i++)
    CHECK(k.order[i] == i % 3);
  for (int c = 0; c < 3; c++) {
    CHECK(t[c].cpu_min > 0 && t[c].cpu_min <= t[c].cpu_mean);
    CHECK(t[c].wall_med > 0);
  }
  /* a budget: more rounds, up to max_rounds */
  k.n = 0;
  rounds = attn_bench_interleave(2, record, &k, 2, 9, 1e9, t);
  CHECK(rounds == 9 && k.n == 2 * 10);
  /* a failure in a timed round: -1 */
  k.n = 0, k.fail_at = 5;
  CHECK(attn_bench_interleave(2, record, &k, 5, 9, 0.0, t) == -1);
  CHECK(attn_bench_interleave(0, record, &k, 5, 9, 0.0, t) == -1);
}

/* The value of "key": in a JSON line, or NAN */
static double field(const char *json, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\": ", key);
  const char *p = strstr(json, pat);
  return p ? atof(p + strlen(pat)) : NAN;
}

/* r (printed to 3 decimals) is a / b (each printed to 4 decimals, in ms) */
static int close_ratio(double r, double a, double b) {
  return a > 0 && b > 0 && fabs(r - a / b) <= 1e-3 + (a / b) * (5e-5 / a + 5e-5 / b);
}

static void bench_json(const char *bin, const char *args, char *buf, size_t cap) {
  char cmd[512], json[] = "/tmp/attn_test_bench_interleave_XXXXXX";
  int fd = mkstemp(json);
  CHECK(fd >= 0);
  if (fd < 0) return;
  close(fd);
  snprintf(cmd, sizeof cmd,
           "%s bench sdpa --n 64 --heads 1 --dim 16 --no-math --threads 1 %s --json %s "
           ">/dev/null 2>&1",
           bin, args, json);
  CHECK(system(cmd) == 0);
  FILE *f = fopen(json, "r");
  size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
  buf[n] = 0;
  if (f) fclose(f);
  unlink(json);
}

static void test_bench_sdpa_ratios(void) {
  const char *bin = getenv("ATTN_BIN");
  if (!bin || access(bin, X_OK) != 0) {
    SKIP("ATTN_BIN not set: CLI not checked");
    return;
  }
  char buf[8192];
  bench_json(bin, "--softcap 30", buf, sizeof buf);
  CHECK(strstr(buf, "\"ratios\": \"min_cpu_interleaved\"") != NULL);
  double rounds = field(buf, "rounds"), a = field(buf, "cpu_min_ms"),
         b = field(buf, "plain_cpu_min_ms"), r = field(buf, "cpu_vs_plain");
  CHECK(rounds >= 5 && field(buf, "runs") == rounds);
  CHECK(a > 0 && b > 0 && a <= field(buf, "cpu_ms") * 1.0001 + 1e-4);
  CHECK(close_ratio(r, a, b));
  /* the per-pair dispatch alone: identity against the same case without it */
  bench_json(bin, "--mod identity", buf, sizeof buf);
  CHECK(strstr(buf, "\"mod\": \"identity\"") != NULL);
  a = field(buf, "cpu_min_ms"), b = field(buf, "builtin_cpu_min_ms"), r = field(buf, "cpu_vs_builtin");
  CHECK(field(buf, "rounds") >= 5 && a > 0 && b > 0);
  CHECK(close_ratio(r, a, b));
  /* softcap per pair with the scalar rational tanh, against the built-in */
  bench_json(bin, "--softcap 30 --mod softcap-fast", buf, sizeof buf);
  CHECK(strstr(buf, "\"mod\": \"softcap-fast\"") != NULL);
  a = field(buf, "cpu_min_ms"), b = field(buf, "builtin_cpu_min_ms"), r = field(buf, "cpu_vs_builtin");
  CHECK(field(buf, "rounds") >= 5 && a > 0 && b > 0);
  CHECK(close_ratio(r, a, b));
  /* --rounds R: at least R rounds (1..64) */
  bench_json(bin, "--softcap 30 --rounds 9", buf, sizeof buf);
  CHECK(field(buf, "rounds") >= 9);
  char cmd[512];
  for (int i = 0; i < 2; i++) {
    snprintf(cmd, sizeof cmd, "%s bench sdpa --n 64 --softcap 30 --rounds %s >/dev/null 2>&1", bin,
             i ? "65" : "0");
    int rc = system(cmd);
    CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 2);
  }
  /* alone (no reference): no rounds */
  bench_json(bin, "", buf, sizeof buf);
  CHECK(field(buf, "rounds") == 0 && field(buf, "runs") >= 3);
}

int main(void) {
  RUN(test_rounds_interleaved);
  RUN(test_bench_sdpa_ratios);
  HARNESS_END();
}
