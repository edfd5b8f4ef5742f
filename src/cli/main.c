#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/train/precision_probe.h"
#include "apps/train/dist.h"
#include "attn.h"
#include "cli/commands.h"

#if defined(__SANITIZE_ADDRESS__) && defined(ATTN_HAVE_CAIRO)
#include "apps/viz/viz.h"
/* A sanitizer build: fontconfig keeps process-wide caches (reached through
 * cairo's font maps) until exit, which LeakSanitizer would report as the
 * tool's leaks; the tests do the same for themselves. */
__attribute__((used)) const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libfontconfig.so\n"; }
static void release_static_data(void) { attn_viz_release_fonts(); }
#else
static void release_static_data(void) {}
#endif

/* Weak defaults let the tool build while a subcommand's file is missing. */
#define WEAK_CMD(fn)                                                          \
  __attribute__((weak)) int fn(int argc, char **argv) {                       \
    (void)argc;                                                               \
    cli_error(NULL, "not built into this binary");                            \
    return CLI_FAILED;                                                        \
  }
WEAK_CMD(attn_cmd_sdpa)
WEAK_CMD(attn_cmd_layer)
WEAK_CMD(attn_cmd_gradcheck)

static const attn_cmd commands[] = {
    {"sdpa", attn_cmd_sdpa, "scaled dot-product attention on a safetensors file"},
    {"layer", attn_cmd_layer, "run a PyTorch-named layer (mha/encoder/decoder) from a file"},
    {"gradcheck", attn_cmd_gradcheck, "finite-difference check of every backward"},
    {"bench", attn_cmd_bench, NULL /* cli_bench_summary(): every bench by name */},
    {"data", attn_cmd_data, "mail corpus: counts, split, parse report (--show FILE)"},
    {"nb", attn_cmd_nb, "Naive Bayes spam baseline on the corpus split"},
    {"viz", attn_cmd_viz, "draw attention weights: heatmap, head grid, model view, HTML"},
    {"diagnose", attn_cmd_diagnose, "what each attention head does (pattern table, chart)"},
    {"train", attn_cmd_train, "train the spam classifier on the corpus; test report next to NB"},
    {"eval", attn_cmd_eval, "evaluate a trained classifier on the test split (+ pictures)"},
    {"predict", attn_cmd_predict, "label and probability per e-mail file (- for stdin)"},
    {"ensemble", attn_cmd_ensemble,
     "models trained apart as one (the mean of their probabilities)"},
    {"quantize", attn_cmd_quantize, "int8 model: every Linear weight per output channel"},
    {"g2p", attn_cmd_g2p, "grapheme-to-phoneme on CMUdict: split, train, eval, predict"},
    {"lm", attn_cmd_lm, "language model on State of the Union addresses: train, generate, eval"},
    {"hf", attn_cmd_hf, "run a Hugging Face BERT / GPT-2 checkpoint; export the tokenizer"},
    {"version", attn_cmd_version, "print version and CPU features"},
};

static void print_features(const char *label, const attn_cpu_features *f) {
  printf("%s:%s%s%s%s%s%s%s%s%s%s%s%s%s%s\n", label, f->avx2 ? " avx2" : "", f->fma ? " fma" : "",
         f->f16c ? " f16c" : "", f->avx_vnni ? " avx_vnni" : "", f->avx512f ? " avx512f" : "",
         f->avx512bw ? " avx512bw" : "", f->avx512vl ? " avx512vl" : "",
         f->avx512dq ? " avx512dq" : "",
         f->avx512_bf16 ? (f->bf16_dot_fast ? " avx512_bf16" : " avx512_bf16(slow)") : "",
         f->avx512_fp16 ? " avx512_fp16" : "", f->avx512_vnni ? " avx512_vnni" : "",
         f->amx_bf16 ? " amx_bf16" : "", f->amx_int8 ? " amx_int8" : "", f->neon ? " neon" : "");
}

/* "caches: L1d 32 KiB, L2 512 KiB, L3 32 MiB" (those the CPU reports) */
static void print_caches(void) {
  static const char *const name[5] = {"", "L1d", "L2", "L3", "L4"};
  printf("caches:");
  int any = 0;
  for (int level = 1; level <= 4; level++) {
    const int64_t b = attn_cpu_cache_bytes(level);
    if (b <= 0) continue;
    const int mib = b >= (1 << 20) && b % (1 << 20) == 0;
    printf("%s %s %lld %s", any ? "," : "", name[level],
           (long long)(mib ? b >> 20 : b >= 1024 ? b >> 10 : b),
           mib ? "MiB" : b >= 1024 ? "KiB" : "B");
    any = 1;
  }
  printf("%s\n", any ? "" : " unknown");
}

int attn_cmd_version(int argc, char **argv) {
  cli_args a;
  cli_args_init(&a, argc, argv, 1, NULL);
  int r = cli_args_next(&a);
  if (r == CLI_HELP) {
    printf("usage: attn version\n"
           "  the version (also attn --version / -V: that line only), the ISA level in use and\n"
           "  why, the levels this CPU and build have, CPU features, cache sizes, threads,\n"
           "  and what --precision auto would consider on this machine.\n");
    return CLI_OK;
  }
  if (r == CLI_ARG) return cli_usage("unexpected argument '%s' (usage: attn version)", a.val);
  if (r != CLI_END) return CLI_USAGE;
  printf("attn %s\n", ATTN_VERSION);
  printf("isa: %s (%s)\nlevels:", attn_isa_name(attn_isa_active()), attn_isa_reason());
  for (int i = 0; i < ATTN_ISA_COUNT; i++)
    if (attn_isa_available((attn_isa)i)) printf(" %s", attn_isa_name((attn_isa)i));
  printf("\n");
  print_features("cpu", attn_cpu_detected());
  print_features("in use", attn_cpu());
  print_caches();
  printf("threads: %d\n", attn_get_num_threads());
  printf("mpi: %s\n", attn_dist_mpi_built() ? "yes (mpirun -np P attn train ...; docs/DISTRIBUTED.md)"
                                            : "no (built without MPI: make MPI=1)");
  /* What --precision auto would consider here; the choice itself is a probe
   * of the run's own model (attn train prints it): not run here, so that
   * version stays instant and does not guess a model's shapes. */
  printf("precision auto (a probe of the run's model picks; >= %.2fx f32 to leave f32):\n",
         ATTN_PREC_AUTO_MARGIN);
  for (int p = ATTN_PREC_F32; p <= ATTN_PREC_F16; p++) {
    attn_prec_info pi;
    attn_prec_info_get((attn_precision)p, &pi);
    printf("  %-4s %s: %s; %s\n", attn_precision_name(pi.prec),
           p == ATTN_PREC_F32 ? "always" : pi.candidate ? "candidate" : "not a candidate", pi.units,
           pi.why);
  }
  return 0;
}

/* ATTN_CPU names a level this CPU and build have (the library would fall
 * back to the best one; the tool refuses instead, so a benchmark or test
 * never runs another level than asked). */
static int check_isa_env(void) {
  const char *e = getenv("ATTN_CPU");
  attn_isa isa;
  if (!e || !*e || attn_isa_from_name(e, &isa) == ATTN_OK) return 0;
  cli_fail("ATTN_CPU");
  return CLI_USAGE;
}

#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *out) {
  fprintf(out, "usage: attn COMMAND [ARGS...]\n       attn --version | -V\n\ncommands:\n");
  for (size_t i = 0; i < N_COMMANDS; i++)
    fprintf(out, "  %-10s %s\n", commands[i].name,
            commands[i].summary ? commands[i].summary : cli_bench_summary());
  fprintf(out, "\n'attn COMMAND --help' describes each.\n"
               "exit status: 0 ok, 1 failure (a file, the data or the machine), 2 usage error\n"
               "(the command line: an unknown command or option, a bad or missing value).\n");
}

static int unknown_command(const char *name) {
  static const char *const options[] = {"--help", "--version"};
  const char *names[N_COMMANDS];
  for (size_t i = 0; i < N_COMMANDS; i++) names[i] = commands[i].name;
  const int opt = name[0] == '-';
  const char *near = opt ? cli_nearest(name, options, 2) : cli_nearest(name, names, N_COMMANDS);
  const char *what = opt ? "option" : "command";
  if (near) return cli_usage("unknown %s '%s'; did you mean '%s'?", what, name, near);
  cli_usage("unknown %s '%s'", what, name);
  usage(stderr);
  return CLI_USAGE;
}

int main(int argc, char **argv) {
  /* whole lines on stdout even into a file or pipe: a log taken with
   * `attn train > log 2>&1` never has a report line cut by a progress line
   * on stderr where stdout's block buffer happened to fill */
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 2) {
    usage(stderr);
    return CLI_USAGE;
  }
  if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
    usage(stdout);
    return CLI_OK;
  }
  if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version")) {
    printf("attn %s\n", ATTN_VERSION); /* the first line of attn version */
    return CLI_OK;
  }
  for (size_t i = 0; i < N_COMMANDS; i++)
    if (!strcmp(argv[1], commands[i].name)) {
      cli_set_command(commands[i].name);
      if (check_isa_env() || cli_check_threads_env()) return CLI_USAGE;
      int rc = commands[i].fn(argc - 1, argv + 1);
      release_static_data(); /* font caches, so LeakSanitizer sees no leaks */
      return rc;
    }
  return unknown_command(argv[1]);
}
