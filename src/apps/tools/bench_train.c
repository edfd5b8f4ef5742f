/* attn bench train: training throughput of the classifier (apps/classifier.h)
 * on random batches, the same model, batch and data distribution as
 * tools/bench_train_torch.py (ids uniform in [0, vocab), lengths uniform in
 * [seq/2, seq], padding masks, AdamW, dropout 0), and tokens/s counted the
 * same way (batch * seq per step). With --torch SCRIPT it runs PyTorch too
 * (f32 and bf16 autocast, as PyTorch runs best here) and prints the ratio.
 * With --ckpt it compares gradient checkpointing with the normal path:
 * activation bytes held for backward and time per step. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apps/tools/bench.h"
#include "apps/classifier/classifier.h"
#include "apps/classifier/classifier_precision.h"
#include "apps/train/dist_run.h"

typedef struct {
  int64_t vocab, dim, heads, ff, layers, seq, batch;
  int steps, threads, ckpt_compare;
  const char *torch;
  attn_backend backend;
  attn_precision prec; /* --precision: also run this one after f32 (F32: f32 only) */
  int rounds;          /* with --precision: f32 and P alternated this many times, best kept */
  int prec_auto;       /* --precision auto: P is the probe's choice (f32: f32 only) */
  attn_dist *dist;     /* under mpirun -np P > 1: each rank a 1/P shard of every batch,
                        * gradients summed as attn train sums them (apps/dist.h) */
  double *wait_share;  /* with dist: the share of the steps' time blocked in communication */
  int varlen_compare;  /* --varlen: f32 padded, then f32 packed (attn_clf.varlen on) */
  int varlen;          /* the model's attn_clf.varlen in run() */
} bt_opts;

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static attn_status dist_ready(void *d, int64_t lo) { return attn_dist_grad_ready(d, lo); }

static void config_of(const bt_opts *o, attn_clf_config *c) {
  attn_clf_config_default(c);
  c->vocab = o->vocab;
  c->d_model = o->dim;
  c->heads = o->heads;
  c->ff = o->ff;
  c->layers = o->layers;
  c->max_len = o->seq;
  c->dropout = 0.0f;
}

/* --precision auto: the probe attn train runs, on ~1024 tokens of rows like
 * the bench's (lengths uniform in [seq/2, seq]); sets o->prec. */
static attn_status choose_auto(bt_opts *o) {
  attn_clf_config c;
  config_of(o, &c);
  int64_t B = 1024 / (o->seq * 3 / 4) + 1, L = o->seq;
  if (B > o->batch) B = o->batch;
  int32_t *ids = malloc((size_t)(B * L) * sizeof(int32_t)), *lens = malloc((size_t)B * sizeof(int32_t));
  int *y = malloc((size_t)B * sizeof(int));
  attn_status st = ids && lens && y ? ATTN_OK : attn_set_error(ATTN_ENOMEM, "bench train: out of memory");
  uint64_t s = 2;
  for (int64_t i = 0; !st && i < B * L; i++) ids[i] = (int32_t)(rng_next(&s) % (uint64_t)o->vocab);
  for (int64_t b = 0; !st && b < B; b++) {
    lens[b] = (int32_t)(L / 2 + (int64_t)(rng_next(&s) % (uint64_t)(L - L / 2 + 1)));
    y[b] = (int)(rng_next(&s) % 2);
  }
  attn_prec_info bf;
  attn_prec_info_get(ATTN_PREC_BF16, &bf);
  attn_precision cand = ATTN_PREC_BF16;
  attn_prec_probe_opts po = {o->backend, 0, 0, ATTN_QAT_ACT_TENSOR, 0, 0, 0};
  attn_prec_probe_result r;
  if (!st) st = attn_prec_probe(&c, &po, ids, lens, y, B, L, &cand, bf.candidate ? 1 : 0, &r);
  if (!st) {
    char why[320];
    o->prec = attn_prec_auto_choose(&r, 0, why, sizeof why);
    printf("precision: %s (%s; probe %.2f s on %lld x %lld tokens)\n", attn_precision_name(o->prec),
           why, r.seconds, (long long)B, (long long)L);
  }
  free(ids);
  free(lens);
  free(y);
  return st;
}

/* Runs 1 warm-up + steps training steps; *sec the mean step time (wall),
 * *cpu the mean process CPU time per step (all threads: robust to other
 * load on a shared machine),
 * *bytes the activation bytes held for backward, *peak with the transient. */
static attn_status run(const bt_opts *o, int ckpt, attn_precision prec, double *sec, double *cpu,
                       size_t *bytes, size_t *peak) {
  attn_clf_config c;
  config_of(o, &c);
  attn_clf m;
  attn_adam opt;
  memset(&opt, 0, sizeof opt);
  attn_status st = attn_clf_create(&m, &c);
  if (st) return st;
  st = attn_clf_init(&m, 0);
  m.varlen = o->varlen;
  attn_adam_config ac = attn_adam_defaults(ATTN_ADAMW);
  if (!st) st = attn_adam_init(&opt, &m.p, &ac);
  int64_t B = o->batch, L = o->seq;
  int32_t *ids = malloc((size_t)(B * L) * sizeof(int32_t)), *lens = malloc((size_t)B * sizeof(int32_t));
  int32_t *y = malloc((size_t)B * sizeof(int32_t));
  float *dl = malloc((size_t)(B * 2) * sizeof(float));
  double *t = malloc((size_t)(o->steps + 1) * sizeof(double));
  if (!ids || !lens || !y || !dl || !t) st = attn_set_error(ATTN_ENOMEM, "bench train: out of memory");
  uint64_t s = 1;
  for (int64_t i = 0; !st && i < B * L; i++) ids[i] = (int32_t)(rng_next(&s) % (uint64_t)o->vocab);
  for (int64_t b = 0; !st && b < B; b++) {
    lens[b] = (int32_t)(L / 2 + (int64_t)(rng_next(&s) % (uint64_t)(L - L / 2 + 1)));
    y[b] = (int32_t)(rng_next(&s) % 2);
  }
  attn_clf_acts a;
  memset(&a, 0, sizeof a);
  double c0 = 0, w0 = 0;
  for (int k = 0; !st && k <= o->steps; k++) {
    if (k == 1) c0 = cpu_now();
    double t0 = attn_bench_now();
    attn_nn_ctx ctx = {.backend = o->backend, .training = 1, .seed = 0, .step = (uint64_t)k,
                       .precision = prec};
    if (k == 1) w0 = attn_dist_wait_seconds(o->dist);
    int64_t lo = 0, hi = B;  // this rank's shard (all of it in one process)
    attn_dist_shard_rows(B, attn_dist_size(o->dist), attn_dist_rank(o->dist), &lo, &hi);
    if (o->dist) st = attn_dist_step_begin(o->dist, m.p.grad, m.p.numel);
    attn_params_zero_grad(&m.p);
    if (!st && hi > lo)
      st = attn_clf_forward(&m, &ctx, ckpt, &a, ids + lo * L, lens + lo, hi - lo, L, NULL);
    if (!st && hi > lo)
      st = attn_cross_entropy_norm_f32(a.logits, y + lo, hi - lo, 2, -1, 0.0f, B, NULL, dl);
    if (!st && hi > lo) st = attn_clf_backward_ready(&m, &a, dl, o->dist ? dist_ready : NULL, o->dist);
    if (!st && o->dist) st = attn_dist_shard_done(o->dist, 0.0);
    if (!st && o->dist) st = attn_dist_step_end(o->dist, NULL);
    if (!st) st = attn_adam_step(&opt, &m.p, 1e-3);
    t[k] = attn_bench_now() - t0;
  }
  if (!st) {
    *sec = 0;
    for (int k = 1; k <= o->steps; k++) *sec += t[k];
    *sec /= o->steps;
    *cpu = (cpu_now() - c0) / o->steps;
    *bytes = a.saved_bytes;
    *peak = a.peak_bytes;
    if (o->wait_share) *o->wait_share = (attn_dist_wait_seconds(o->dist) - w0) / (*sec * o->steps);
  }
  attn_clf_acts_free(&a);
  free(ids);
  free(lens);
  free(y);
  free(dl);
  free(t);
  attn_adam_free(&opt);
  attn_clf_free(&m);
  return st;
}

static int usage(FILE *f) {
  fprintf(f,
          "usage: attn bench train [--vocab V] [--dim E] [--heads H] [--ff F] [--layers N]\n"
          "                        [--seq L] [--batch B] [--steps S] [--threads T]\n"
          "                        [--backend auto|math|flash] [--torch SCRIPT] [--ckpt] [--varlen]\n"
          "                        [--precision auto|f32|bf16|fp16 [--rounds R]]\n"
          "  defaults: the demo model (8000, 128, 8, 512, 2), seq 256, batch 32, 10 steps, 2 threads\n"
          "  --torch SCRIPT  also run tools/bench_train_torch.py (python3) with OpenBLAS and ATen\n"
          "                  set to the same ISA level (SkylakeX/avx512, Haswell/avx2, generic)\n"
          "                  with the same shapes and print the ratio\n"
          "  --ckpt          compare --checkpoint-activations with the normal path (memory, time)\n"
          "  --varlen        also run f32 on packed batches (the real tokens only, varlen\n"
          "                  attention) on the same batches and print the ratio\n"
          "  --precision P   also run mixed precision P (Linears etc. in P, f32 master weights)\n"
          "                  after f32 in the same run and print the ratio; --rounds R: f32 and P\n"
          "                  alternated R times (a shared machine), the best of each kept;\n"
          "                  auto: the probe of attn train --precision auto picks P (f32: f32 only)\n"
          "  mpirun -np P attn bench train ...: P processes, each 1/P of every batch (rows), the\n"
          "                  gradients summed as attn train does (docs/DISTRIBUTED.md): tokens/s of\n"
          "                  the whole batch and the share of time blocked in communication\n");
  return f == stdout ? 0 : 2;
}

/* Runs the torch script and reads "torch-<prec> tokens/s X cpu Y" lines:
 * tokens per wall second and per process CPU second. */
static void run_torch(const bt_opts *o, double f32[2], double bf16[2]) {
  char cmd[2048];
  /* PyTorch on the same instruction set as attn's active level */
  attn_isa isa = attn_isa_active();
  const char *blas = isa == ATTN_ISA_AVX512 ? "SkylakeX" : isa == ATTN_ISA_AVX2 ? "Haswell" : "Prescott";
  const char *aten = isa == ATTN_ISA_AVX512 ? "avx512" : isa == ATTN_ISA_AVX2 ? "avx2" : "default";
  if (isa == ATTN_ISA_NEON) blas = "ARMV8", aten = "default";
  snprintf(cmd, sizeof cmd,
           "OPENBLAS_CORETYPE=%s ATEN_CPU_CAPABILITY=%s OPENBLAS_NUM_THREADS=%d "
           "/usr/bin/python3 %s --vocab %lld --dim %lld --heads %lld --ff %lld --layers %lld "
           "--seq %lld --batch %lld --steps %d --threads %d 2>&1",
           blas, aten, o->threads, o->torch, (long long)o->vocab, (long long)o->dim, (long long)o->heads,
           (long long)o->ff, (long long)o->layers, (long long)o->seq, (long long)o->batch, o->steps,
           o->threads);
  FILE *p = popen(cmd, "r");
  if (!p) {
    fprintf(stderr, "attn bench train: cannot run %s\n", o->torch);
    return;
  }
  char line[512];
  while (fgets(line, sizeof line, p)) {
    double v, c = 0;
    if (sscanf(line, "torch-f32 tokens/s %lf cpu %lf", &v, &c) >= 1) f32[0] = v, f32[1] = c;
    else if (sscanf(line, "torch-bf16 tokens/s %lf cpu %lf", &v, &c) >= 1) bf16[0] = v, bf16[1] = c;
    else fputs(line, stderr);
  }
  pclose(p);
}

/* Under mpirun: f32 steps of the whole batch cut over the ranks; rank 0 prints. */
static int bench_dist(bt_opts *o, attn_dist *d) {
  int P = attn_dist_size(d);
  if (o->batch < P) {
    fprintf(stderr, "attn bench train: --batch %lld over %d processes: each needs a row\n",
            (long long)o->batch, P);
    return 1;
  }
  attn_set_num_threads(o->threads);
  double sec = 0, cpu = 0, share = 0;
  size_t bytes = 0, peak = 0;
  o->dist = d;
  o->wait_share = &share;
  attn_status st = run(o, 0, ATTN_PREC_F32, &sec, &cpu, &bytes, &peak);
  int64_t worst = (int64_t)(share * 1e6);  // the rank that waited most
  if (!st) st = attn_dist_max_i64(d, &worst);
  if (st) {
    fprintf(stderr, "attn bench train: %s\n", attn_last_error());
    return 1;
  }
  printf("model: vocab %lld, d_model %lld, %lld heads, ff %lld, %lld layers; batch %lld x %lld tokens "
         "over %d processes x %d threads, %d steps\n",
         (long long)o->vocab, (long long)o->dim, (long long)o->heads, (long long)o->ff,
         (long long)o->layers, (long long)o->batch, (long long)o->seq, P, o->threads, o->steps);
  printf("attn-f32-dp%d tokens/s %.1f  (%.1f ms/step; waiting in communication: %.1f %% of the "
         "step on rank 0, %.1f %% at most)\n", P, (double)(o->batch * o->seq) / sec, 1e3 * sec,
         100.0 * share, 1e-4 * (double)worst);
  return 0;
}

int attn_bench_train_main(int argc, char **argv) {
  bt_opts o = {8000, 128, 8, 512, 2, 256, 32, 10, 2, 0, NULL, ATTN_BACKEND_AUTO, ATTN_PREC_F32, 1, 0, NULL, NULL, 0, 0};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(stdout);
    if (!strcmp(a, "--ckpt")) {
      o.ckpt_compare = 1;
      continue;
    }
    if (!strcmp(a, "--varlen")) {
      o.varlen_compare = 1;
      continue;
    }
    if (!v) return usage(stderr);
    i++;
    if (!strcmp(a, "--torch")) {
      o.torch = v;
      continue;
    }
    if (!strcmp(a, "--backend")) {
      if (attn_backend_from_name(v, &o.backend)) return usage(stderr);
      continue;
    }
    if (!strcmp(a, "--precision")) {
      o.prec_auto = !strcmp(v, "auto");
      if (!o.prec_auto && attn_precision_from_name(v, &o.prec)) return usage(stderr);
      continue;
    }
    char *end;
    long long x = strtoll(v, &end, 10);
    if (*end || x <= 0) return usage(stderr);
    if (!strcmp(a, "--vocab")) o.vocab = x;
    else if (!strcmp(a, "--dim")) o.dim = x;
    else if (!strcmp(a, "--heads")) o.heads = x;
    else if (!strcmp(a, "--ff")) o.ff = x;
    else if (!strcmp(a, "--layers")) o.layers = x;
    else if (!strcmp(a, "--seq")) o.seq = x;
    else if (!strcmp(a, "--batch")) o.batch = x;
    else if (!strcmp(a, "--steps")) o.steps = (int)x;
    else if (!strcmp(a, "--threads")) o.threads = (int)x;
    else if (!strcmp(a, "--rounds")) o.rounds = (int)x;
    else return usage(stderr);
  }
  if (o.seq < 2) return usage(stderr);
  attn_dist *d = NULL;
  if (attn_dist_run_open(&d, 0, "bench train")) return 1;
  if (attn_dist_size(d) > 1) return attn_dist_run_close(d, bench_dist(&o, d), "bench train");
  attn_dist_close(d);
  attn_set_num_threads(o.threads);
  printf("model: vocab %lld, d_model %lld, %lld heads, ff %lld, %lld layers; batch %lld x %lld tokens, "
         "%d steps, %d threads\n",
         (long long)o.vocab, (long long)o.dim, (long long)o.heads, (long long)o.ff, (long long)o.layers,
         (long long)o.batch, (long long)o.seq, o.steps, o.threads);
  if (o.prec_auto && choose_auto(&o)) {
    fprintf(stderr, "attn bench train: %s\n", attn_last_error());
    return 1;
  }
  double sec = 0, cpu = 0;
  size_t bytes = 0, peak = 0;
  if (run(&o, 0, ATTN_PREC_F32, &sec, &cpu, &bytes, &peak)) {
    fprintf(stderr, "attn bench train: %s\n", attn_last_error());
    return 1;
  }
  double tps = (double)(o.batch * o.seq) / sec;
  printf("attn-f32 tokens/s %.1f  tokens/CPU-s %.1f  (%.1f ms/step, %.1f ms CPU/step, "
         "activations %.1f MB)\n",
         tps, (double)(o.batch * o.seq) / cpu, 1e3 * sec, 1e3 * cpu, bytes / 1e6);
  fflush(stdout);
  if (o.prec != ATTN_PREC_F32) {
    const char *pn = attn_precision_name(o.prec);
    double psec = 0, pcpu = 0;
    size_t pb = 0, pp = 0;
    for (int r = 0; r < o.rounds; r++) {
      double s1 = 0, c1 = 0;
      if (r > 0) {  // f32 again, alternating with P; the best of each is kept
        if (run(&o, 0, ATTN_PREC_F32, &s1, &c1, &bytes, &peak)) {
          fprintf(stderr, "attn bench train: %s\n", attn_last_error());
          return 1;
        }
        printf("attn-f32 tokens/s %.1f  tokens/CPU-s %.1f  (round %d)\n",
               (double)(o.batch * o.seq) / s1, (double)(o.batch * o.seq) / c1, r + 1);
        if (s1 < sec) sec = s1;
        if (c1 < cpu) cpu = c1;
      }
      if (run(&o, 0, o.prec, &s1, &c1, &pb, &pp)) {
        fprintf(stderr, "attn bench train: %s\n", attn_last_error());
        return 1;
      }
      printf("attn-%s tokens/s %.1f  tokens/CPU-s %.1f  (%.1f ms/step, %.1f ms CPU/step, "
             "activations %.1f MB)\n",
             pn, (double)(o.batch * o.seq) / s1, (double)(o.batch * o.seq) / c1, 1e3 * s1,
             1e3 * c1, pb / 1e6);
      fflush(stdout);
      if (r == 0 || s1 < psec) psec = s1;
      if (r == 0 || c1 < pcpu) pcpu = c1;
    }
    tps = (double)(o.batch * o.seq) / sec;
    printf("ratio attn-%s / attn-f32: %.2fx (wall), %.2fx (CPU time)%s\n", pn, sec / psec,
           cpu / pcpu, o.rounds > 1 ? "  (best of each)" : "");
    fflush(stdout);
  }
  if (o.varlen_compare) {  // the same batches (seeded), packed: tokens/s as above (batch x seq)
    double sec2 = 0, cpu2 = 0;
    size_t b2 = 0, p2 = 0;
    o.varlen = ATTN_CLF_VARLEN_ON;
    attn_status vst = run(&o, 0, ATTN_PREC_F32, &sec2, &cpu2, &b2, &p2);
    o.varlen = ATTN_CLF_VARLEN_OFF;
    if (vst) {
      fprintf(stderr, "attn bench train: %s\n", attn_last_error());
      return 1;
    }
    printf("attn-f32-varlen tokens/s %.1f  tokens/CPU-s %.1f  (%.1f ms/step, %.1f ms CPU/step, "
           "activations %.1f MB)\n",
           (double)(o.batch * o.seq) / sec2, (double)(o.batch * o.seq) / cpu2, 1e3 * sec2,
           1e3 * cpu2, b2 / 1e6);
    printf("ratio attn-f32-varlen / attn-f32: %.2fx (wall), %.2fx (CPU time)\n", sec / sec2,
           cpu / cpu2);
    fflush(stdout);
  }
  if (o.ckpt_compare) {
    double sec2 = 0, cpu2 = 0;
    size_t b2 = 0, p2 = 0;
    if (run(&o, 1, ATTN_PREC_F32, &sec2, &cpu2, &b2, &p2)) {
      fprintf(stderr, "attn bench train: %s\n", attn_last_error());
      return 1;
    }
    printf("attn-f32-ckpt tokens/s %.1f  (%.1f ms/step, %.1f ms CPU/step, activations %.1f MB held, "
           "%.1f MB peak with one layer recomputed)\n",
           (double)(o.batch * o.seq) / sec2, 1e3 * sec2, 1e3 * cpu2, b2 / 1e6, p2 / 1e6);
    printf("checkpointing: activation memory %.2fx less (%.2fx counting the peak), time %.2fx wall, "
           "%.2fx CPU\n",
           (double)bytes / (double)b2, (double)bytes / (double)p2, sec2 / sec, cpu2 / cpu);
  }
  if (o.torch) {
    double f32[2] = {0, 0}, bf16[2] = {0, 0}, ctps = (double)(o.batch * o.seq) / cpu;
    double bsec = 0, bcpu = 0;  // attn with bf16 Linear GEMMs (f32 master weights), like autocast
    size_t bb = 0, bp = 0;
    int have_bf16 = run(&o, 0, ATTN_PREC_BF16, &bsec, &bcpu, &bb, &bp) == ATTN_OK;
    double btps = have_bf16 ? (double)(o.batch * o.seq) / bsec : 0, bctps = have_bf16 ? (double)(o.batch * o.seq) / bcpu : 0;
    run_torch(&o, f32, bf16);
    printf("%-11s %12s %16s\n", "", "tokens/s", "tokens/CPU-s");
    printf("%-11s %12.1f %16.1f\n", "attn-f32", tps, ctps);
    if (have_bf16) printf("%-11s %12.1f %16.1f\n", "attn-bf16", btps, bctps);
    if (f32[0] > 0) printf("%-11s %12.1f %16.1f\n", "torch-f32", f32[0], f32[1]);
    if (bf16[0] > 0) printf("%-11s %12.1f %16.1f\n", "torch-bf16", bf16[0], bf16[1]);
    if (f32[0] > 0)
      printf("ratio attn-f32 / torch-f32: %.2fx (wall), %.2fx (CPU time)\n", tps / f32[0],
             f32[1] > 0 ? ctps / f32[1] : 0.0);
    if (bf16[0] > 0)
      printf("ratio attn-f32 / torch-bf16: %.2fx (wall), %.2fx (CPU time)\n", tps / bf16[0],
             bf16[1] > 0 ? ctps / bf16[1] : 0.0);
    if (bf16[0] > 0 && have_bf16)
      printf("ratio attn-bf16 / torch-bf16: %.2fx (wall), %.2fx (CPU time)\n", btps / bf16[0],
             bf16[1] > 0 ? bctps / bf16[1] : 0.0);
    if (f32[0] <= 0) {
      fprintf(stderr, "attn bench train: no torch figures (is python3-torch installed?)\n");
      return 1;
    }
  }
  return 0;
}
