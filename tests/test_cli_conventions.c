/* The habits every attn command shares (README, "Command line"): --version
 * and -V; each command's own help on stdout with exit 0; "did you mean" for
 * a misspelt command or option; exit status 0 ok, 1 failure, 2 usage error;
 * one error style "attn CMD: FILE: reason" (strerror's words where a system
 * call failed); and tests/run.sh's last line counting skipped cases. The
 * commands are those `attn --help` lists. */
#include <sys/stat.h>

#include "harness.h"
#include "tool_run.h"

static char bin[512], dir[64], out[65536], err[65536];

static int run(const char *args) {
  return tool_run("", bin, dir, args, out, sizeof out, err, sizeof err);
}

#define MAX_CMDS 64
static char cmds[MAX_CMDS][32];
static int ncmds;

/* The command table as `attn --help` prints it: "  NAME  summary" lines
 * between "commands:" and the blank line after them. */
static void read_commands(void) {
  ncmds = 0;
  CHECK(run("--help") == 0);
  const char *p = strstr(out, "commands:\n");
  CHECK(p != NULL);
  if (!p) return;
  p += strlen("commands:\n");
  while (*p == ' ' && ncmds < MAX_CMDS) {
    while (*p == ' ')
      p++;
    size_t n = strcspn(p, " \n");
    if (n > 0 && n < sizeof cmds[0]) snprintf(cmds[ncmds++], sizeof cmds[0], "%.*s", (int)n, p);
    p = strchr(p, '\n');
    if (!p) break;
    p++;
  }
  CHECK(ncmds >= 14); /* sdpa ... version */
}

static void test_version_flags(void) {
  char first[256], want[64];
  CHECK(run("version") == 0);
  snprintf(first, sizeof first, "%.*s", (int)strcspn(out, "\n"), out);
  snprintf(want, sizeof want, "attn %s", ATTN_VERSION);
  CHECK(!strcmp(first, want));
  static const char *const flags[] = {"--version", "-V"};
  for (int i = 0; i < 2; i++) {
    CHECK(run(flags[i]) == 0);
    CHECK(!strncmp(out, first, strlen(first)) && out[strlen(first)] == '\n' &&
          out[strlen(first) + 1] == '\0');
    CHECK(err[0] == '\0');
  }
}

/* attn CMD --help and -h: exit 0, the command's own help on stdout (its
 * first line names "attn CMD"), nothing on stderr; for every command. */
static void test_every_command_has_its_own_help(void) {
  read_commands();
  static const char *const flags[] = {"--help", "-h"};
  for (int i = 0; i < ncmds; i++)
    for (int f = 0; f < 2; f++) {
      char args[128], want[64];
      snprintf(args, sizeof args, "%.31s %s", cmds[i], flags[f]);
      int rc = run(args);
      size_t first = strcspn(out, "\n");
      snprintf(want, sizeof want, "attn %.31s", cmds[i]);
      char *at = strstr(out, want);
      int own =
          at && (size_t)(at - out) < first && (at[strlen(want)] == ' ' || at[strlen(want)] == '\n');
      if (rc != 0 || !own || err[0])
        printf("  attn %s: exit %d, stdout: %.200s, stderr: %.200s\n", args, rc, out, err);
      CHECK(rc == 0);
      CHECK(own);
      CHECK(err[0] == '\0');
    }
}

static void test_did_you_mean_commands(void) {
  CHECK(run("trian") == 2);
  CHECK(!strcmp(err, "attn: unknown command 'trian'; did you mean 'train'?\n"));
  CHECK(run("predcit m f") == 2 && strstr(err, "did you mean 'predict'?"));
  CHECK(run("--verison") == 2 && strstr(err, "did you mean '--version'?"));
  CHECK(run("xyzzy") == 2); /* nothing near: no guess, the command list */
  CHECK(!strstr(err, "did you mean") && strstr(err, "attn: unknown command 'xyzzy'") &&
        strstr(err, "commands:"));
  CHECK(run("bench gem") == 2 &&
        strstr(err, "attn bench: unknown bench 'gem'; did you mean 'gemm'?"));
}

/* Every command: a misspelt option gets the nearest one, exit 2. */
static void test_did_you_mean_options(void) {
  if (!ncmds) read_commands();
  for (int i = 0; i < ncmds; i++) {
    if (!strcmp(cmds[i], "bench")) continue; /* its first argument is a bench: above */
    char args[128], want[160];
    snprintf(args, sizeof args, "%.31s --hepl", cmds[i]);
    int rc = run(args);
    snprintf(want, sizeof want, "attn %.31s: unknown option '--hepl'; did you mean '--help'?\n",
             cmds[i]);
    if (rc != 2 || strncmp(err, want, strlen(want)))
      printf("  attn %s: exit %d: %s", args, rc, err);
    CHECK(rc == 2 && !strncmp(err, want, strlen(want)));
  }
  static const struct {
    const char *args, *want;
  } near[] = {
      {"train --epoch 3", "attn train: unknown option '--epoch'; did you mean '--epochs'?"},
      {"train --ephocs 3", "did you mean '--epochs'?"},
      {"eval m --pictures d", "attn eval: unknown option '--pictures'; did you mean '--picture'?"},
      {"sdpa a b --backnd math", "attn sdpa: unknown option '--backnd'; did you mean '--backend'?"},
      {"layer a b --bakend math", "did you mean '--backend'?"},
      {"viz a b.png --all-head", "did you mean '--all-heads'?"},
      {"diagnose a --casual yes", "did you mean '--causal'?"},
      {"nb --vocb 100", "attn nb: unknown option '--vocb'; did you mean '--vocab'?"},
      {"data --seeds 2", "did you mean '--seed'?"},
      {"gradcheck --lsit", "did you mean '--list'?"},
      {"predict m --precison bf16 f",
       "attn predict: unknown option '--precison'; did you mean '--precision'?"},
      {"quantize m -o x --frobnicate",
       "attn quantize: unknown option '--frobnicate' (attn quantize --help"},
  };
  for (size_t i = 0; i < sizeof near / sizeof near[0]; i++) {
    int rc = run(near[i].args);
    if (rc != 2 || !strstr(err, near[i].want))
      printf("  attn %s: exit %d: %s", near[i].args, rc, err);
    CHECK(rc == 2 && strstr(err, near[i].want));
  }
}

/* exit 2: the command line is wrong (found before any file is read); exit
 * 1: the work failed. Every message's first line: "attn CMD: ". */
static void test_exit_codes_and_one_error_style(void) {
  static const struct {
    const char *args;
    int rc;
    const char *want; /* the first line of stderr starts so */
  } cases[] = {
      {"sdpa /nonexistent/in.st out.st", 1,
       "attn sdpa: /nonexistent/in.st: cannot open: No such file or directory\n"},
      {"layer /nonexistent/in.st out.st", 1,
       "attn layer: /nonexistent/in.st: cannot open: No such file or directory\n"},
      {"viz /nonexistent/in.st out.png", 1,
       "attn viz: /nonexistent/in.st: cannot open: No such file or directory\n"},
      {"diagnose /nonexistent/in.st", 1,
       "attn diagnose: /nonexistent/in.st: cannot open: No such file or directory\n"},
      {"diagnose /", 1, "attn diagnose: /: is not a regular file\n"},
      {"quantize /nonexistent/m.st -o q.st", 1,
       "attn quantize: /nonexistent/m.st: cannot open: No such file or directory\n"},
      {"ensemble -o e.st /nonexistent/m.st", 1,
       "attn ensemble: /nonexistent/m.st: cannot open: No such file or directory\n"},
      {"predict /nonexistent/m.st mail", 1,
       "attn predict: /nonexistent/m.st: cannot open: No such file or directory\n"},
      {"eval /nonexistent/m.st", 1,
       "attn eval: /nonexistent/m.st: cannot open: No such file or directory\n"},
      {"data --data /nonexistent/corpus", 1, "attn data: /nonexistent/corpus: "},
      {"nb --data /nonexistent/corpus", 1, "attn nb: /nonexistent/corpus: "},
      {"train --data /nonexistent/corpus", 1, "attn train: /nonexistent/corpus: "},
      {"gradcheck --filter no_such_case", 1, "attn gradcheck: no case matches 'no_such_case'"},
      /* usage errors: exit 2, said with the same prefix */
      {"sdpa a b --threads 0", 2, "attn sdpa: --threads '0'"},
      {"sdpa a", 2, "attn sdpa: expected IN.safetensors and OUT.safetensors\n"},
      {"layer a b --backend warp", 2, "attn layer: --backend: "},
      {"layer a b --backend", 2, "attn layer: --backend needs a value\n"},
      {"viz a b.png --cmap plasma9", 2, "attn viz: --cmap: "},
      {"viz a b.png --layer x", 2, "attn viz: --layer: 'x' is not"},
      {"diagnose a --causal maybe", 2, "attn diagnose: --causal 'maybe'"},
      {"train --epochs x", 2, "attn train: --epochs: 'x' is not a number\n"},
      {"train --epochs=x", 2, "attn train: --epochs: 'x' is not a number\n"},
      {"train --sinusoidal=1", 2, "attn train: --sinusoidal takes no value\n"},
      {"train extra", 2, "attn train: unexpected argument 'extra'"},
      {"eval", 2, "attn eval: expected MODEL"},
      {"eval m1 m2", 2, "attn eval: unexpected argument 'm2'"},
      {"eval m --precision fp64", 2, "attn eval: --precision: "},
      {"eval m --epochs 3", 2, "attn eval: unknown option '--epochs'"}, /* a training option */
      {"predict m --precision fp64 f", 2, "attn predict: --precision: 'fp64'"},
      {"data --seed x", 2, "attn data: --seed: 'x' is not a number\n"},
      {"nb --show f", 2, "attn nb: unknown option '--show'"}, /* attn data's */
      {"data --train-pct 95 --val-pct 10", 2, "attn data: --train-pct 95 and --val-pct 10"},
      {"ensemble -o", 2, "attn ensemble: -o needs a value\n"},
      {"ensemble -o e.st", 2, "attn ensemble: no MODEL\n"},
      {"quantize m", 2, "attn quantize: expected MODEL.safetensors and -o OUT.safetensors\n"},
      {"gradcheck --seed x", 2, "attn gradcheck: --seed wants a number"},
      {"version extra", 2, "attn version: unexpected argument 'extra'"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char args[512];
    snprintf(args, sizeof args, "%s", cases[i].args);
    int rc = run(args);
    int ok = rc == cases[i].rc && !strncmp(err, cases[i].want, strlen(cases[i].want));
    if (!ok)
      printf("  attn %s: exit %d (want %d), stderr: %.300s", cases[i].args, rc, cases[i].rc, err);
    CHECK(ok);
  }
}

/* attn --help names every bench that attn bench --help lists. */
static void test_help_lists_every_bench(void) {
  CHECK(run("bench --help") == 0);
  char benches[4096];
  snprintf(benches, sizeof benches, "%.4000s", out);
  CHECK(run("--help") == 0);
  const char *line = strstr(out, "  bench ");
  CHECK(line != NULL);
  if (!line) return;
  char summary[512];
  snprintf(summary, sizeof summary, "%.*s", (int)strcspn(line, "\n"), line);
  int n = 0;
  for (const char *p = strstr(benches, "benches:\n"); p && (p = strchr(p, '\n')) && p[1] == ' ';) {
    p += 1;
    while (*p == ' ')
      p++;
    char name[32];
    snprintf(name, sizeof name, "%.*s", (int)strcspn(p, " \n"), p);
    char want[40];
    snprintf(want, sizeof want, " %s", name);
    if (!strstr(summary, want))
      printf("  attn --help's bench line lacks '%s': %s\n", name, summary);
    CHECK(strstr(summary, want) != NULL);
    n++;
  }
  CHECK(n >= 7); /* peak ... varlen */
}

/* Every command that computes takes --threads N (its help says so, a bad N
 * is a usage error naming it), and ATTN_NUM_THREADS is checked as well. */
static void test_computing_commands_take_threads(void) {
  static const char *const cmds_with_threads[] = {
      "sdpa a b",   "layer a b",   "gradcheck",   "train",
      "eval m",     "predict m f", "nb",          "hf run d --input-ids 1",
      "g2p train",  "bench sdpa",  "bench gemm",  "bench peak",
      "bench lowp", "bench train", "bench varlen"};
  for (size_t i = 0; i < sizeof cmds_with_threads / sizeof cmds_with_threads[0]; i++) {
    char args[160], help[160], cmd[64];
    snprintf(cmd, sizeof cmd, "%.*s", (int)strcspn(cmds_with_threads[i], " "),
             cmds_with_threads[i]);
    const char *sub = cmds_with_threads[i] + strlen(cmd);
    if (!strcmp(cmd, "bench") || !strcmp(cmd, "g2p") || !strcmp(cmd, "hf"))
      snprintf(help, sizeof help, "%s %.*s --help", cmd, (int)strcspn(sub + 1, " "), sub + 1);
    else
      snprintf(help, sizeof help, "%s --help", cmd);
    int rc = run(help);
    if (rc != 0 || !strstr(out, "--threads")) printf("  attn %s: no --threads in its help\n", help);
    CHECK(rc == 0 && strstr(out, "--threads") != NULL);
    if (!strcmp(cmd, "bench") || !strcmp(cmd, "g2p") || !strcmp(cmd, "train") ||
        !strcmp(cmd, "eval"))
      continue; /* their own parsers: the help is what is common */
    snprintf(args, sizeof args, "%s --threads 0", cmds_with_threads[i]);
    rc = run(args);
    if (rc != 2 || !strstr(err, "--threads '0': expected an integer in [1, 4096]"))
      printf("  attn %s: exit %d: %s", args, rc, err);
    CHECK(rc == 2 && strstr(err, "--threads '0': expected an integer in [1, 4096]"));
  }
  CHECK(tool_run("ATTN_NUM_THREADS=3", bin, dir, "version", out, sizeof out, err, sizeof err) == 0);
  CHECK(strstr(out, "\nthreads: 3\n") != NULL);
  CHECK(strstr(out, "\ncaches: ") != NULL); /* the sizes, or "unknown" */
  CHECK(tool_run("ATTN_NUM_THREADS=many", bin, dir, "version", out, sizeof out, err, sizeof err) ==
        2);
  CHECK(!strcmp(err, "attn version: ATTN_NUM_THREADS 'many': expected an integer in [1, 4096]\n"));
}

/* tests/run.sh: a program that skips a case adds ", N skipped" to the last
 * line, and the skipped case is listed with its reason. */
static void test_run_sh_counts_skips(void) {
  struct stat sb;
  if (stat("tests/run.sh", &sb) != 0) {
    SKIP("tests/run.sh not found here (run from the repository root)");
    return;
  }
  char a[128], b[128], cmd[1024];
  snprintf(a, sizeof a, "%s/fake_a", dir);
  snprintf(b, sizeof b, "%s/fake_b", dir);
  FILE *f = fopen(a, "w");
  if (f) {
    fputs("#!/bin/sh\necho 'ok   one'\necho 'skip two: no frobnicator here'\necho '# 1 passed, 0 "
          "failed, 1 skipped'\n",
          f);
    fclose(f);
  }
  f = fopen(b, "w");
  if (f) {
    fputs("#!/bin/sh\necho '# 3 passed, 0 failed'\n", f);
    fclose(f);
  }
  CHECK(chmod(a, 0755) == 0 && chmod(b, 0755) == 0);
  snprintf(
      cmd, sizeof cmd,
      "ATTN_CPU=generic RUNNER= ATTN_BIN= sh tests/run.sh '%s' '%s' '%s' >'%s/run_out.txt' 2>&1",
      dir, a, b, dir);
  int rc = system(cmd);
  CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 0);
  char path[128];
  snprintf(path, sizeof path, "%s/run_out.txt", dir);
  tool_slurp(path, out, sizeof out);
  size_t n = strlen(out);
  while (n && out[n - 1] == '\n')
    out[--n] = '\0';
  const char *last = strrchr(out, '\n');
  last = last ? last + 1 : out;
  if (strcmp(last, "4 passed, 0 failed, 1 skipped")) printf("  run.sh said:\n%s\n", out);
  CHECK(!strcmp(last, "4 passed, 0 failed, 1 skipped"));
  CHECK(strstr(out, "fake_a: skip two: no frobnicator here") != NULL);
  /* nothing skipped: the line as before */
  snprintf(cmd, sizeof cmd,
           "ATTN_CPU=generic RUNNER= ATTN_BIN= sh tests/run.sh '%s' '%s' >'%s/run_out.txt' 2>&1",
           dir, b, dir);
  rc = system(cmd);
  tool_slurp(path, out, sizeof out);
  CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 0 && strstr(out, "\n3 passed, 0 failed\n") &&
        !strstr(out, "skipped"));
}

int main(int argc, char **argv) {
  tool_path(argc > 0 ? argv[0] : NULL, bin, sizeof bin);
  snprintf(dir, sizeof dir, "/tmp/attn_cli_conv_XXXXXX");
  if (!mkdtemp(dir)) {
    printf("mkdtemp failed\n");
    return 1;
  }
  RUN(test_version_flags);
  RUN(test_every_command_has_its_own_help);
  RUN(test_did_you_mean_commands);
  RUN(test_did_you_mean_options);
  RUN(test_exit_codes_and_one_error_style);
  RUN(test_run_sh_counts_skips);
  RUN(test_help_lists_every_bench);
  RUN(test_computing_commands_take_threads);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) printf("  could not remove %s\n", dir);
  HARNESS_END();
}
