/* Allocation-failure sweep: `attn sdpa` and `attn layer` run with their Nth
 * allocation failed (tests/alloc_fail_shim.c preloaded: one failure, counted
 * from main) for N = 1, 2, ... until a run no longer reaches N. Every run
 * must end either with exit 0 and a readable OUT, or with a non-zero exit,
 * a message on stderr (never calling the valid input invalid) and no OUT; never a signal (a crash,
 * or SIGALRM after 60 s: a hang), a sanitizer report, or a leftover file (PATH.tmp.<pid>). The
 * sweep needs glibc's LD_PRELOAD on this machine's tool: it is skipped (counted) under a RUNNER
 * such as qemu and in the SAN=1 build, whose allocator is AddressSanitizer's. The tool is
 * $ATTN_BIN, else <dir of this program>/../attn; the shim lies beside this program. */
#include <dirent.h>
#include <fcntl.h>
#include <libgen.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* why the sweep cannot run here, or NULL */
static const char *sweep_skip(void) {
#if defined(__SANITIZE_ADDRESS__)
  return "the SAN=1 build: AddressSanitizer owns malloc";
#endif
  const char *runner = getenv("RUNNER");
  if (runner && *runner)
    return "under a RUNNER: the shim is preloaded into this machine's tool only";
  return NULL;
}

#define MAX_N 100000 /* a run that still reaches this N is a failure */

static char bin[512], shim[512], dir[64], outdir[128], out_path[192], err_path[192], hit_path[192];

static int file_exists(const char *path) {
  struct stat s;
  return stat(path, &s) == 0;
}

/* entries of outdir other than "." and ".." and keep (may be NULL) */
static int stray_files(const char *keep) {
  DIR *d = opendir(outdir);
  int n = 0;
  if (!d) return 1;
  for (struct dirent *e; (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && (!keep || strcmp(e->d_name, keep)))
      n++;
  closedir(d);
  return n;
}

/* Runs the tool with args (NULL-terminated) and allocation n failing; returns
 * the wait status; stderr's text into err. */
static int run_failing(char *const *args, long n, char *err, size_t nerr) {
  pid_t pid = fork();
  if (pid == 0) {
    char nbuf[32];
    snprintf(nbuf, sizeof nbuf, "%ld", n);
    setenv("ATTN_FAIL_ALLOC", nbuf, 1);
    setenv("ATTN_FAIL_ALLOC_HIT", hit_path, 1);
    setenv("LD_PRELOAD", shim, 1);
    setenv("OMP_NUM_THREADS", "1", 1); /* the same allocations in every run */
    int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644), nul = open("/dev/null", O_WRONLY);
    if (fd < 0 || nul < 0 || dup2(fd, 2) < 0 || dup2(nul, 1) < 0) _exit(127);
    alarm(60);
    execv(bin, args);
    _exit(127);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return -1;
  err[0] = '\0';
  FILE *f = fopen(err_path, "r");
  if (f) {
    size_t got = fread(err, 1, nerr - 1, f);
    err[got] = '\0';
    fclose(f);
  }
  return status;
}

/* One command swept; args[...] name out_path. Returns the N swept. */
static long sweep(const char *name, char *const *args) {
  char err[4096];
  long n, errors = 0, oks = 0, bad = 0;
  for (n = 1; n <= MAX_N; n++) {
    unlink(hit_path);
    int status = run_failing(args, n, err, sizeof err);
    const int hit = file_exists(hit_path);
    const char *why = NULL;
    if (status == -1 || (WIFEXITED(status) && WEXITSTATUS(status) == 127))
      why = "could not run the tool";
    else if (WIFSIGNALED(status))
      why = WTERMSIG(status) == SIGALRM ? "hang (60 s)" : "killed by a signal";
    else if (strstr(err, "Sanitizer") || strstr(err, "runtime error"))
      why = "sanitizer report";
    else if (WEXITSTATUS(status) != 0 && !err[0])
      why = "failed without a message";
    else if (strstr(err, "not valid")) /* the input is fine: memory ran out */
      why = "an allocation failure reported as a bad file";
    else if (WEXITSTATUS(status) != 0 && stray_files(NULL))
      why = "failed but left a file";
    else if (WEXITSTATUS(status) == 0 && (stray_files("out.safetensors") || !file_exists(out_path)))
      why = "succeeded without its output alone";
    else if (!hit && WEXITSTATUS(status) != 0)
      why = "failed without an injected failure";
    if (why) {
      if (bad++ < 5)
        printf("  %s, allocation %ld failed: %s (status %#x)\n%s", name, n, why, status, err);
      CHECK(!why);
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      attn_st *o = NULL;
      if (attn_st_load(out_path, &o) != ATTN_OK || !attn_st_get(o, "out")) {
        printf("  %s, allocation %ld failed: exit 0 but OUT unreadable\n", name, n);
        CHECK(0);
      }
      attn_st_free(o);
      oks++;
    } else {
      errors++;
    }
    unlink(out_path);
    if (!hit || bad >= 5) break;
  }
  CHECK(n <= MAX_N);
  printf("  %s: swept N = 1..%ld: %ld clean errors, %ld successes\n", name, n, errors, oks);
  return n;
}

/* q [1,2,3,4], k and v [1,1,5,4] (grouped), dout, causal: forward and backward */
static void write_sdpa_input(const char *path) {
  float x[2 * 3 * 4];
  for (int i = 0; i < 24; i++)
    x[i] = (float)((i * 7) % 11) / 11.0f - 0.5f;
  const int64_t qs[4] = {1, 2, 3, 4}, ks[4] = {1, 1, 5, 4};
  attn_st *st = NULL;
  CHECK_OK(attn_st_new(&st));
  CHECK_OK(attn_st_add_f32(st, "q", 4, qs, x));
  CHECK_OK(attn_st_add_f32(st, "k", 4, ks, x));
  CHECK_OK(attn_st_add_f32(st, "v", 4, ks, x + 2));
  CHECK_OK(attn_st_add_f32(st, "dout", 4, qs, x + 1));
  CHECK_OK(attn_st_set_meta(st, "causal", "1"));
  CHECK_OK(attn_st_save(st, path));
  attn_st_free(st);
}

static void test_sdpa_every_allocation_failing(void) {
  if (sweep_skip()) {
    SKIP("%s", sweep_skip());
    return;
  }
  char in[128];
  snprintf(in, sizeof in, "%s/in.safetensors", dir);
  write_sdpa_input(in);
  char *args[] = {bin, "sdpa", in, out_path, "--threads", "1", NULL};
  CHECK(sweep("attn sdpa", args) > 1);
}

static void test_layer_every_allocation_failing(void) {
  if (sweep_skip()) {
    SKIP("%s", sweep_skip());
    return;
  }
  char in[] = "tests/golden/nn_encoder_post_relu.safetensors"; /* with dout: the backward too */
  char *args[] = {bin, "layer", in, out_path, NULL};
  CHECK(sweep("attn layer", args) > 1);
}

int main(int argc, char **argv) {
  char self[512];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  self[len > 0 ? len : 0] = '\0';
  const char *here = dirname(self);
  const char *env = getenv("ATTN_BIN");
  snprintf(bin, sizeof bin, "%s", env ? env : "");
  if (!env) snprintf(bin, sizeof bin, "%s/../attn", here);
  snprintf(shim, sizeof shim, "%s/alloc_fail_shim.so", here);
  snprintf(dir, sizeof dir, "/tmp/attn-allocsweep-XXXXXX");
  if (!mkdtemp(dir)) return 1;
  snprintf(outdir, sizeof outdir, "%s/out", dir);
  snprintf(out_path, sizeof out_path, "%s/out.safetensors", outdir);
  snprintf(err_path, sizeof err_path, "%s/stderr.txt", dir);
  snprintf(hit_path, sizeof hit_path, "%s/hit", dir);
  mkdir(outdir, 0755);
  RUN(test_sdpa_every_allocation_failing);
  RUN(test_layer_every_allocation_failing);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) printf("  could not remove %s\n", dir);
  HARNESS_END();
}
