/* `attn bench sdpa`: scaled dot-product attention timings per sequence
 * length — median of several runs, GFLOP/s (4·B·H·D·(allowed query-key
 * pairs) forward, 2.5x that backward), % of the fp32 FMA peak measured in the
 * same run, speed-up over the math backend where its [Lq, Lk] scratch fits,
 * and the peak resident memory of the case against its tensors; --json and
 * --plot (bench_sdpa_plot.c) write the same figures for machines and people. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "apps/tools/bench.h"
#include "apps/tools/bench_interleave.h"
#include "apps/tools/bench_sdpa_mods.h"
#include "apps/viz/bench_sdpa_plot.h"
#include "attn.h"
#include "kernels/sdpa/sdpa_internal.h"

enum { MAX_N = 32, MAX_RUNS = 15 };

/* math runs only while its scores for all heads (what it touches) stay below this */
static const double MATH_MAX_SCORES = 536870912.0; /* 2^29 floats: 2 GiB */

typedef struct {
  long long n;
  double flops, io_bytes;
  double med[2]; /* [0] chosen backend, [1] math (0: not run) */
  double cpu_s;  /* CPU seconds per run of the chosen backend (all threads) */
  double plain_med, plain_cpu_s; /* plain flash (no variants) on the same shape, 0: not run */
  int runs;
  double peak_mib[2]; /* process peak RSS during each backend's runs, MiB */
  double f32_med, f32_cpu_s; /* --dtype other than f32: f32 flash on the same shape */
  double builtin_med, builtin_cpu_s; /* --mod: the built-in equivalent, 0: not run */
  /* with references (plain, built-in, f32): all timed interleaved, A B A B
   * ..., over `rounds` rounds; the minimum CPU seconds of one run of each
   * (0: not run), whose ratios are vs_plain, vs_builtin */
  int rounds;
  double cpu_min_s, plain_cpu_min_s, builtin_cpu_min_s, f32_cpu_min_s;
} sdpa_result;

/* --dtype: f32 (any backend), or the flash of another type with the f32 flash
 * timed next to it: bf16 q, k, v (attn_sdpa_*_bf16, AMX), fp16 q, k, v
 * (attn_sdpa_*_f16, f32 arithmetic), int8 (attn_sdpa_forward_i8 on f32 q, k, v) */
typedef enum { DT_F32, DT_BF16, DT_F16, DT_I8 } sdpa_dtype;
static const char *const dtype_names[] = {"f32", "bf16", "fp16", "int8"};

typedef struct {
  int B, H, D, causal, backward, threads, no_math;
  long long window;
  attn_backend backend;
  /* variants: ALiBi, T5 relative bias, Shaw (max distance), block-sparse (block size) */
  int alibi, rel_bias, shaw, block;
  float softcap; /* logit softcap (0 off) */
  int sinks;     /* per-head attention sinks */
  sdpa_dtype dtype;
  int mod; /* --mod (attn_bench_mod_kind) */
  /* per-batch ALiBi slopes [B, H] (alibi_slopes_bstride = H); partial
   * rotary: RoPE on the first rotary_dim dims of q and k (0 off) before
   * each call, inside the timing */
  int alibi_batch, rotary_dim;
  float rotary;
  int rounds; /* --rounds: at least this many interleaved rounds with references */
} sdpa_opts;

static int has_variants(const sdpa_opts *o) {
  return o->alibi || o->rel_bias || o->shaw || o->block || o->softcap > 0 || o->sinks ||
         o->alibi_batch || o->rotary > 0;
}

static void sdpa_usage(FILE *out) {
  fprintf(out, "usage: attn bench sdpa [--n N...] [--batch B] [--heads H] [--dim D] [--causal]\n"
               "                       [--window W] [--backward] [--backend math|flash|auto]\n"
               "                       [--no-math] [--threads T] [--json FILE] [--plot FILE.png]\n"
               "                       [--rounds R]\n"
               "                       [--alibi] [--rel-bias] [--shaw [M]] [--block-sparse [BS]]\n"
               "                       [--softcap C] [--sinks] [--dtype f32|bf16|fp16|int8]\n"
               "                       [--mod causal|causal-noblock|window|alibi|softcap|alibi-row|\n"
               "                        softcap-row|softcap-fast|identity] [--alibi-batch]\n"
               "                       [--rotary FRAC]\n"
               "  --n N...       sequence lengths Lq = Lk (default 512 1024 2048 4096)\n"
               "  --batch B      batch (default 1); --heads H (default 8); --dim D (default 64)\n"
               "  --causal       causal mask; --window W: keys i-W..i+W (i-W..i with --causal)\n"
               "  --backward     time the backward (from a forward's out and lse)\n"
               "  --backend      default flash; math is also timed where its scratch fits\n"
               "                 (all heads' scores under 2 GiB) unless --no-math\n"
               "  --threads T    threads (default: all)\n"
               "  --alibi        ALiBi (standard slopes); --rel-bias: T5 bias, 32 buckets,\n"
               "                 max distance 128 (causal bucketing with --causal)\n"
               "  --shaw [M]     Shaw relative keys and values, max distance M (default 16)\n"
               "  --block-sparse [BS]  BigBird-like layout of BS-key blocks (default 64):\n"
               "                 local (1 block each side) + 1 global + 1 random block per row\n"
               "  --softcap C    logit softcap C * tanh(s / C) (Gemma 2: 50); --sinks: one sink\n"
               "                 logit per head (gpt-oss; backward: with its gradient)\n"
               "  --alibi-batch  ALiBi with per-batch slopes [B, H] (alibi_slopes_bstride = H;\n"
               "                 row b: the standard slopes times 2^(-b/B)); use with --batch B\n"
               "  --rotary FRAC  partial rotary: RoPE (half layout, theta 10000) on the first\n"
               "                 FRAC of each head's dims of q and k (rounded to an even count,\n"
               "                 at least 2) before every call, inside the timing (backward:\n"
               "                 also the inverse rotation of dq and dk); f32 only\n"
               "  with any variant, plain flash is also timed on the same shape and\n"
               "  vs_plain = CPU time of the case / CPU time of plain flash (backward: with\n"
               "  the table gradients)\n"
               "  vs_plain, vs_builtin, vs_f32cpu: the case and its references run\n"
               "                 interleaved (A B A B ..., at least --rounds R rounds,\n"
               "                 default 5, max 64, and 1 s per case), the ratio of their\n"
               "                 minimum CPU times of one run (more rounds: a steadier\n"
               "                 minimum on a busy machine)\n"
               "                 (plain_cpu_ms, builtin_cpu_ms: those minima; JSON:\n"
               "                 cpu_min_ms, plain_cpu_min_ms, builtin_cpu_min_ms, rounds)\n"
               "  --dtype bf16   bf16 q, k, v through attn_sdpa_forward/backward_bf16 (AMX,\n"
               "                 AVX512_BF16, else bf16 widened onto the f32 flash);\n"
               "                 the f32 flash is timed on the same shape: f32_ms, vs_f32 =\n"
               "                 f32 time / bf16 time, %%bf16 = GFLOP/s against the bf16\n"
               "                 dot-product peak of the unit (AMX or AVX512_BF16)\n"
               "  --dtype fp16   fp16 q, k, v through attn_sdpa_forward/backward_f16 (f32\n"
               "                 arithmetic, so %%peak is of the fp32 FMA peak as for f32);\n"
               "                 f32_ms, vs_f32 as for bf16 (no %%bf16)\n"
               "  --dtype int8   f32 q, k, v through attn_sdpa_forward_i8 (int8 q·kᵀ, bf16 P·V;\n"
               "                 forward only); f32_ms, vs_f32 as for bf16; %%bf16 as for bf16\n"
               "                 (the P·V half's rate; the int8 half's peak is 2x)\n"
               "  --mod NAME     the case's --causal, --window, --alibi or --softcap written\n"
               "                 as a user callback (attn/sdpa_mods.h) instead: causal,\n"
               "                 window: mask_mod with a 64x64 block mask (causal-noblock:\n"
               "                 without); alibi, softcap: score_mod (softcap with libm's\n"
               "                 tanhf; softcap-fast: with the row's rational tanh, scalar);\n"
               "                 alibi-row, softcap-row:\n"
               "                 score_mod_row (a vectorised loop per tile row; softcap with\n"
               "                 a rational tanh). The built-in is timed\n"
               "                 next to it: builtin_cpu_ms, vs_builtin = CPU time of the\n"
               "                 case / of the built-in. identity: a score_mod returning\n"
               "                 the score, against the same case without it: the per-pair\n"
               "                 dispatch alone (a callback's own cost is then its\n"
               "                 vs_builtin over identity's)\n"
               "  --json FILE    also write the results as JSON\n"
               "  --plot FILE    draw time and peak memory against N, both backends (PNG)\n"
               "GFLOP/s counts 4·B·H·D per allowed (query, key) pair forward, 2.5x backward.\n"
               "GF/cpu_s: the same work per CPU second of all threads, and %%peak1 that\n"
               "against the 1-thread peak: the kernel's efficiency, robust to a busy machine.\n"
               "peak_MiB is the process's peak resident memory during the runs (Linux\n"
               "VmHWM, reset per case); io_MiB the tensors (q, k, v, out, lse [, dout, grads]).\n");
}

static void fill(float *x, size_t n, unsigned seed) {
  unsigned s = seed * 2654435761u + 1u;
  for (size_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    x[i] = (float)((s >> 8) & 0xffff) / 32768.0f - 1.0f;
  }
}

/* Resets the kernel's peak-RSS mark; 0 if unsupported. */
static int reset_peak_rss(void) {
  FILE *f = fopen("/proc/self/clear_refs", "w");
  if (!f) return 0;
  int ok = fputs("5", f) >= 0;
  return fclose(f) == 0 && ok;
}

/* Peak resident set in MiB (VmHWM, else ru_maxrss). */
static double peak_rss_mib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  double kb = -1;
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, "VmHWM:", 6)) kb = atof(line + 6);
  if (f) fclose(f);
  if (kb < 0) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    kb = (double)ru.ru_maxrss;
  }
  return kb / 1024.0;
}

/* Allowed (query, key) pairs of one (b, h), the block layout included. */
static double allowed_pairs(const attn_sdpa_desc *d) {
  double n = 0;
  for (int64_t i = 0; i < d->Lq; i++) {
    int64_t lo, hi;
    attn_sdpa_key_range(d, 0, i, &lo, &hi);
    if (!d->block_mask) {
      if (hi > lo) n += (double)(hi - lo);
      continue;
    }
    const int64_t bs = d->block_size, nkb = (d->Lk + bs - 1) / bs;
    for (int64_t j = lo; j < hi; j++)
      n += d->block_mask[((i + d->q_offset) / bs) * nkb + j / bs] != 0;
  }
  return n;
}

/* The variant inputs of a case (tables, layout, table gradients). */
typedef struct {
  float *slopes, *rb, *sk, *sv, *grb, *gsk, *gsv, *sinks, *gsinks;
  uint8_t *layout;
} sdpa_variant_bufs;

static void free_variants(sdpa_variant_bufs *b) {
  free(b->slopes), free(b->rb), free(b->sk), free(b->sv), free(b->grb), free(b->gsk), free(b->gsv);
  free(b->sinks), free(b->gsinks);
  free(b->layout);
}

/* 0 or 1 (out of memory / bad sizes, message printed) */
static int set_variants(const sdpa_opts *o, attn_sdpa_desc *d, sdpa_variant_bufs *b) {
  memset(b, 0, sizeof *b);
  int bad = 0;
  if (o->alibi || o->alibi_batch) { /* [H], or [B, H]: row b times 2^(-b/B) */
    const int rows = o->alibi_batch ? o->B : 1;
    bad |= !(b->slopes = malloc((size_t)rows * o->H * sizeof(float)));
    if (!bad && attn_alibi_slopes(o->H, b->slopes)) bad = 1;
    for (int r = 1; !bad && r < rows; r++)
      for (int h = 0; h < o->H; h++)
        b->slopes[r * o->H + h] = b->slopes[h] * exp2f(-(float)r / (float)rows);
    d->alibi_slopes = b->slopes;
    d->alibi_slopes_bstride = o->alibi_batch ? o->H : 0;
  }
  if (o->rel_bias) {
    d->rel_buckets = 32;
    d->rel_max_distance = 128;
    d->rel_bidirectional = !o->causal;
    bad |= !(b->rb = malloc((size_t)o->H * 32 * sizeof(float)));
    bad |= !(b->grb = malloc((size_t)o->H * 32 * sizeof(float)));
    if (b->rb) fill(b->rb, (size_t)o->H * 32, 21);
    d->rel_bias = b->rb;
    if (o->backward) d->rel_bias_grad = b->grb;
  }
  if (o->shaw) {
    size_t nr = 2 * (size_t)o->shaw - 1, n = nr * (size_t)o->D;
    d->shaw_max = o->shaw;
    bad |= !(b->sk = malloc(n * sizeof(float))) || !(b->sv = malloc(n * sizeof(float)));
    bad |= !(b->gsk = malloc(n * sizeof(float))) || !(b->gsv = malloc(n * sizeof(float)));
    if (b->sk && b->sv) fill(b->sk, n, 22), fill(b->sv, n, 23);
    d->shaw_k = b->sk;
    d->shaw_v = b->sv;
    if (o->backward) d->shaw_k_grad = b->gsk, d->shaw_v_grad = b->gsv;
  }
  if (o->block) {
    int64_t nb = (d->Lk + o->block - 1) / o->block;
    bad |= !(b->layout = malloc((size_t)(nb * nb)));
    if (b->layout && attn_block_sparse_bigbird(b->layout, nb, nb, 1, 1, 1, 1, o->causal)) bad = 1;
    d->block_mask = b->layout;
    d->block_size = o->block;
  }
  d->softcap = o->softcap;
  if (o->sinks) {
    bad |= !(b->sinks = malloc((size_t)o->H * sizeof(float)));
    bad |= !(b->gsinks = malloc((size_t)o->H * sizeof(float)));
    if (b->sinks) fill(b->sinks, (size_t)o->H, 24);
    d->sinks = b->sinks;
    if (o->backward) d->sinks_grad = b->gsinks;
  }
  if (bad) fprintf(stderr, "attn bench sdpa: variant tables: %s\n", attn_last_error());
  return bad;
}

typedef struct {
  float *q, *k, *v, *out, *lse, *dout, *dq, *dk, *dv;
  uint16_t *qh, *kh, *vh; /* bf16 / fp16 copies (--dtype bf16 / fp16), else NULL */
  sdpa_dtype dtype;       /* what runs: qh.. for bf16 / fp16, q.. for f32 / int8 */
  int rot;                /* --rotary: rotary dims (0 off), q and k rotated into qr, kr */
  float *qr, *kr;
} sdpa_bufs;

/* --rotary: q, k [B, H, L, D] rotated into qr, kr (the SDPA's layout as
 * [B*H, L, 1, D]); with dq, dk: their inverse rotation, in place. */
static attn_status rotate(const attn_sdpa_desc *d, const sdpa_bufs *t, float *dq, float *dk) {
  const int64_t n = d->B * d->Hq;
  attn_status st = ATTN_OK;
  if (dq) {
    if (!(st = attn_rope_partial_backward_f32(dq, dq, n, d->Lq, 1, d->D, t->rot, 10000.0f, 0,
                                              ATTN_ROPE_HALF)))
      st = attn_rope_partial_backward_f32(dk, dk, n, d->Lk, 1, d->D, t->rot, 10000.0f, 0,
                                          ATTN_ROPE_HALF);
    return st;
  }
  if (!(st = attn_rope_partial_f32(t->q, t->qr, n, d->Lq, 1, d->D, t->rot, 10000.0f, 0,
                                   ATTN_ROPE_HALF)))
    st = attn_rope_partial_f32(t->k, t->kr, n, d->Lk, 1, d->D, t->rot, 10000.0f, 0,
                               ATTN_ROPE_HALF);
  return st;
}

static attn_status run_once(const attn_sdpa_desc *d, attn_backend be, int backward,
                            const sdpa_bufs *t) {
  attn_sdpa_args a = {
      .out = t->out, .lse = t->lse, .dout = t->dout, .dq = t->dq, .dk = t->dk, .dv = t->dv};
  switch (t->dtype) {
  case DT_I8:
    a.dtype = ATTN_I8, a.q = t->q, a.k = t->k, a.v = t->v;
    return attn_sdpa_forward(d, &a);
  case DT_BF16:
  case DT_F16:
    a.dtype = t->dtype == DT_BF16 ? ATTN_BF16 : ATTN_F16, a.q = t->qh, a.k = t->kh, a.v = t->vh;
    return backward ? attn_sdpa_backward(d, &a) : attn_sdpa_forward(d, &a);
  default: break;
  }
  attn_status st;
  a.path = (attn_sdpa_path)be, a.q = t->rot ? t->qr : t->q, a.k = t->rot ? t->kr : t->k, a.v = t->v;
  if (t->rot && (st = rotate(d, t, NULL, NULL))) return st;
  if (!backward) return attn_sdpa_forward(d, &a);
  st = attn_sdpa_backward(d, &a);
  return st || !t->rot ? st : rotate(d, t, t->dq, t->dk);
}

/* CPU seconds this process has used (all threads, user + system). */
static double cpu_seconds(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
         (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
}

/* Median seconds over runs (the first call warms up; a call over 2 s is the
 * only run), and the mean CPU seconds per run in *cpu_out. Returns < 0 on
 * failure (message printed). */
static double time_backend(const attn_sdpa_desc *d, attn_backend be, int backward,
                           const sdpa_bufs *t, int *runs_out, double *cpu_out) {
  double t0 = attn_bench_now(), c0 = cpu_seconds();
  attn_status st = run_once(d, be, backward, t);
  double first = attn_bench_now() - t0;
  *cpu_out = cpu_seconds() - c0;
  if (st) {
    fprintf(stderr, "attn bench sdpa: %s: %s\n", attn_backend_name(be), attn_last_error());
    return -1;
  }
  if (first > 2.0) {
    *runs_out = 1;
    return first;
  }
  int runs = first > 0 ? (int)(1.0 / first) : MAX_RUNS;
  runs = runs < 3 ? 3 : runs > MAX_RUNS ? MAX_RUNS : runs;
  double times[MAX_RUNS];
  c0 = cpu_seconds();
  for (int i = 0; i < runs; i++) {
    t0 = attn_bench_now();
    run_once(d, be, backward, t);
    times[i] = attn_bench_now() - t0;
  }
  *cpu_out = (cpu_seconds() - c0) / runs;
  *runs_out = runs;
  return attn_bench_median(times, runs);
}

/* The cases attn_bench_interleave runs: the case and its references. */
typedef struct {
  int n, backward;
  const attn_sdpa_desc *d[4];
  attn_backend be[4];
  const sdpa_bufs *t[4];
} timed_set;

static void add_timed(timed_set *ts, const attn_sdpa_desc *d, attn_backend be,
                      const sdpa_bufs *t) {
  ts->d[ts->n] = d, ts->be[ts->n] = be, ts->t[ts->n] = t;
  ts->n++;
}

static int run_timed(void *ctx, int c) {
  const timed_set *ts = ctx;
  if (!run_once(ts->d[c], ts->be[c], ts->backward, ts->t[c])) return 0;
  fprintf(stderr, "attn bench sdpa: %s: %s\n", attn_backend_name(ts->be[c]), attn_last_error());
  return 1;
}

static int run_case(const sdpa_opts *o, long long n, sdpa_result *r) {
  attn_sdpa_desc d;
  attn_sdpa_desc_init(&d, o->B, o->H, o->H, n, n, o->D, o->D);
  d.causal = o->causal;
  if (o->window >= 0) {
    d.window_left = o->window;
    d.window_right = o->causal ? -1 : o->window;
  }
  memset(r, 0, sizeof *r);
  r->n = n;
  const attn_sdpa_desc plain = d;
  sdpa_variant_bufs vb;
  attn_sdpa_desc builtin;
  attn_bench_mod mod;
  if (set_variants(o, &d, &vb) || attn_bench_mod_setup(o->mod, &d, &builtin, &mod)) {
    attn_bench_mod_free(&mod);
    free_variants(&vb);
    return 1;
  }
  double pairs = allowed_pairs(&builtin) * o->B * o->H;
  r->flops = 4.0 * o->D * pairs * (o->backward ? 2.5 : 1.0);
  size_t nt = (size_t)o->B * o->H * n * o->D, nl = (size_t)o->B * o->H * n;
  int ntens = o->backward ? 8 : 4;
  r->io_bytes = (double)sizeof(float) * ((double)nt * ntens + (double)nl);
  reset_peak_rss();
  sdpa_bufs t = {0};
  t.dtype = o->dtype;
  t.rot = o->rotary_dim;
  float **all[9] = {&t.q, &t.k, &t.v, &t.out, &t.dout, &t.dq, &t.dk, &t.dv, &t.lse};
  int bad = 0;
  for (int i = 0; i < 9; i++) {
    if (!o->backward && i >= 4 && i < 8) continue;
    size_t cnt = i == 8 ? nl : nt;
    *all[i] = malloc(cnt * sizeof(float));
    if (!*all[i])
      bad = 1;
    else if (i < 3 || i == 4)
      fill(*all[i], cnt, 11 + i);
  }
  if (t.rot && !bad) { /* the rotated q, k (of the plain timing too) */
    bad = !(t.qr = malloc(nt * sizeof(float))) || !(t.kr = malloc(nt * sizeof(float))) ||
          rotate(&d, &t, NULL, NULL);
  }
  int rc = 0;
  if (bad) {
    fprintf(stderr, "attn bench sdpa: out of memory for N=%lld\n", n);
    rc = 1;
  }
  const float *q0 = t.rot ? t.qr : t.q, *k0 = t.rot ? t.kr : t.k;
  if (!rc && o->backward &&
      attn_sdpa_forward(
          &d,
          &(attn_sdpa_args){
              .path = ATTN_PATH_FLASH, .q = q0, .k = k0, .v = t.v, .out = t.out, .lse = t.lse}) &&
      attn_sdpa_forward(
          &d,
          &(attn_sdpa_args){
              .path = ATTN_PATH_MATH, .q = q0, .k = k0, .v = t.v, .out = t.out, .lse = t.lse})) {
    fprintf(stderr, "attn bench sdpa: forward: %s\n", attn_last_error());
    rc = 1;
  }
  if (!rc && (o->dtype == DT_BF16 || o->dtype == DT_F16)) {
    size_t nb[3] = {nt, nt, nt};
    uint16_t **h[3] = {&t.qh, &t.kh, &t.vh};
    const float *src[3] = {t.q, t.k, t.v};
    for (int i = 0; i < 3 && !rc; i++)
      if (!(*h[i] = malloc(nb[i] * sizeof(uint16_t))))
        rc = 1;
      else if (o->dtype == DT_BF16)
        attn_f32_to_bf16_n(src[i], *h[i], (int64_t)nb[i]);
      else
        attn_f32_to_f16_n(src[i], *h[i], (int64_t)nb[i]);
    if (rc) fprintf(stderr, "attn bench sdpa: out of memory for N=%lld\n", n);
  }
  if (!rc) { /* the case, then its references, interleaved */
    sdpa_bufs f = t, pt = t;
    f.qh = f.kh = f.vh = NULL;
    f.dtype = DT_F32;
    pt.rot = 0; /* plain flash: same shape and masks, no rotation */
    timed_set ts = {.backward = o->backward};
    double *med[4] = {&r->med[0], NULL, NULL, NULL}, *cpu[4] = {&r->cpu_s, NULL, NULL, NULL};
    double *cmin[4] = {&r->cpu_min_s, NULL, NULL, NULL};
    add_timed(&ts, &d, o->backend, &t);
    if (o->dtype != DT_F32) { /* the f32 flash on the same shape */
      med[ts.n] = &r->f32_med, cpu[ts.n] = &r->f32_cpu_s, cmin[ts.n] = &r->f32_cpu_min_s;
      add_timed(&ts, &d, ATTN_BACKEND_FLASH, &f);
    }
    if (o->mod) { /* the built-in the callback replaces */
      med[ts.n] = &r->builtin_med, cpu[ts.n] = &r->builtin_cpu_s, cmin[ts.n] = &r->builtin_cpu_min_s;
      add_timed(&ts, &builtin, o->backend, &t);
    }
    if (has_variants(o)) {
      med[ts.n] = &r->plain_med, cpu[ts.n] = &r->plain_cpu_s, cmin[ts.n] = &r->plain_cpu_min_s;
      add_timed(&ts, &plain, ATTN_BACKEND_FLASH, &pt);
    }
    attn_bench_timing tm[4];
    /* references: >= 5 rounds, 1 s per case; alone: 3 to 15 runs, about 1 s */
    int rounds = attn_bench_interleave(ts.n, run_timed, &ts, ts.n > 1 ? o->rounds : 3,
                                       ts.n > 1 ? ATTN_BENCH_MAX_ROUNDS : MAX_RUNS, 1.0 * ts.n, tm);
    if (rounds < 0) {
      rc = 1;
    } else {
      for (int c = 0; c < ts.n; c++)
        *med[c] = tm[c].wall_med, *cpu[c] = tm[c].cpu_mean, *cmin[c] = tm[c].cpu_min;
      r->runs = rounds;
      r->rounds = ts.n > 1 ? rounds : 0;
    }
    r->peak_mib[0] = peak_rss_mib();
  }
  double scores = (double)o->B * o->H * (double)n * (double)n;
  if (!rc && !o->no_math && o->backend != ATTN_BACKEND_MATH && scores <= MATH_MAX_SCORES) {
    int mr;
    reset_peak_rss();
    double mc;
    r->med[1] = time_backend(&d, ATTN_BACKEND_MATH, o->backward, &t, &mr, &mc);
    r->peak_mib[1] = peak_rss_mib();
    if (r->med[1] < 0) rc = 1;
  }
  for (int i = 0; i < 9; i++)
    free(*all[i]);
  free(t.qh), free(t.kh), free(t.vh), free(t.qr), free(t.kr);
  attn_bench_mod_free(&mod);
  free_variants(&vb);
  return rc;
}

/* a / b, 0 where b was not run */
static double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

static int write_json(const char *file, const sdpa_opts *o, const sdpa_result *r, int n,
                      double peak, double peak1) {
  FILE *f = fopen(file, "w");
  if (!f) {
    perror(file);
    return 1;
  }
  fprintf(f,
          "{\"bench\": \"sdpa\", \"backend\": \"%s\", \"pass\": \"%s\", \"threads\": %d, "
          "\"batch\": %d, \"heads\": %d, \"dim\": %d, \"causal\": %d, \"window\": %lld, "
          "\"alibi\": %d, \"rel_bias\": %d, \"shaw\": %d, \"block_sparse\": %d, "
          "\"softcap\": %g, \"sinks\": %d, \"alibi_batch\": %d, \"rotary_dim\": %d, "
          "\"peak_gflops\": %.2f, \"peak_1thread_gflops\": %.2f, \"peak_isa\": \"%s\", "
          "\"results\": [\n",
          attn_backend_name(o->backend), o->backward ? "backward" : "forward", o->threads, o->B,
          o->H, o->D, o->causal, o->window, o->alibi, o->rel_bias, o->shaw, o->block,
          (double)o->softcap, o->sinks, o->alibi_batch, o->rotary_dim, peak, peak1,
          attn_bench_peak_isa());
  for (int i = 0; i < n; i++) {
    double gf = r[i].flops / r[i].med[0] * 1e-9;
    fprintf(f,
            "  {\"n\": %lld, \"runs\": %d, \"median_ms\": %.4f, \"gflops\": %.2f, "
            "\"pct_peak\": %.1f, \"cpu_ms\": %.4f, \"gflops_per_cpu_s\": %.2f, "
            "\"pct_peak_1thread_per_cpu_s\": %.1f, "
            "\"math_median_ms\": %.4f, \"speedup_vs_math\": %.3f, "
            "\"peak_mib\": %.1f, \"math_peak_mib\": %.1f, \"io_mib\": %.1f, "
            "\"plain_median_ms\": %.4f, \"plain_cpu_ms\": %.4f, \"cpu_vs_plain\": %.3f, "
            "\"dtype\": \"%s\", \"f32_median_ms\": %.4f, \"speedup_vs_f32\": %.3f, "
            "\"mod\": \"%s\", \"builtin_median_ms\": %.4f, \"cpu_vs_builtin\": %.3f, "
            "\"rounds\": %d, \"ratios\": \"min_cpu_interleaved\", \"cpu_min_ms\": %.4f, "
            "\"plain_cpu_min_ms\": %.4f, \"builtin_cpu_min_ms\": %.4f, "
            "\"f32_cpu_min_ms\": %.4f}%s\n",
            r[i].n, r[i].runs, 1e3 * r[i].med[0], gf, 100.0 * gf / peak, 1e3 * r[i].cpu_s,
            r[i].flops / r[i].cpu_s * 1e-9, 100.0 * r[i].flops / r[i].cpu_s * 1e-9 / peak1,
            1e3 * r[i].med[1], r[i].med[1] > 0 ? r[i].med[1] / r[i].med[0] : 0.0, r[i].peak_mib[0],
            r[i].peak_mib[1], r[i].io_bytes / 1048576.0, 1e3 * r[i].plain_med,
            1e3 * r[i].plain_cpu_s, ratio(r[i].cpu_min_s, r[i].plain_cpu_min_s),
            dtype_names[o->dtype], 1e3 * r[i].f32_med,
            r[i].f32_med > 0 ? r[i].f32_med / r[i].med[0] : 0.0, attn_bench_mod_name(o->mod),
            1e3 * r[i].builtin_med, ratio(r[i].cpu_min_s, r[i].builtin_cpu_min_s), r[i].rounds,
            1e3 * r[i].cpu_min_s, 1e3 * r[i].plain_cpu_min_s, 1e3 * r[i].builtin_cpu_min_s,
            1e3 * r[i].f32_cpu_min_s, i + 1 < n ? "," : "");
  }
  fprintf(f, "]}\n");
  return fclose(f) ? 1 : 0;
}

int attn_bench_sdpa_main(int argc, char **argv) {
  sdpa_opts o = {1, 8, 64, 0, 0, attn_get_num_threads(), 0, -1, ATTN_BACKEND_FLASH,
                 0, 0, 0, 0, 0.0f, 0, DT_F32, BENCH_MOD_NONE, 0, 0, 0.0f, 5};
  long long ns[MAX_N];
  int nn = 0;
  const char *json = NULL, *plot = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      sdpa_usage(stdout);
      return 0;
    } else if (!strcmp(a, "--n")) {
      int got = 0;
      while (i + 1 < argc && argv[i + 1][0] != '-' && nn < MAX_N) {
        char *end;
        ns[nn] = strtoll(argv[++i], &end, 10);
        if (*end || ns[nn] < 1 || ns[nn] > (1LL << 22)) goto bad;
        nn++, got++;
      }
      if (!got) goto bad;
    } else if (!strcmp(a, "--batch") && i + 1 < argc) {
      if ((o.B = atoi(argv[++i])) < 1) goto bad;
    } else if (!strcmp(a, "--heads") && i + 1 < argc) {
      if ((o.H = atoi(argv[++i])) < 1) goto bad;
    } else if (!strcmp(a, "--dim") && i + 1 < argc) {
      if ((o.D = atoi(argv[++i])) < 1 || o.D > 4096) goto bad;
    } else if (!strcmp(a, "--causal")) {
      o.causal = 1;
    } else if (!strcmp(a, "--window") && i + 1 < argc) {
      if ((o.window = atoll(argv[++i])) < 0) goto bad;
    } else if (!strcmp(a, "--backward")) {
      o.backward = 1;
    } else if (!strcmp(a, "--alibi")) {
      o.alibi = 1;
    } else if (!strcmp(a, "--softcap") && i + 1 < argc) {
      char *end;
      double c = strtod(argv[++i], &end);
      if (*end || !(c > 0) || !isfinite((float)c)) goto bad;
      o.softcap = (float)c;
    } else if (!strcmp(a, "--sinks")) {
      o.sinks = 1;
    } else if (!strcmp(a, "--alibi-batch")) {
      o.alibi_batch = 1;
    } else if (!strcmp(a, "--rotary") && i + 1 < argc) {
      char *end;
      double f = strtod(argv[++i], &end);
      if (*end || !(f > 0 && f <= 1)) goto bad;
      o.rotary = (float)f;
    } else if (!strcmp(a, "--rel-bias")) {
      o.rel_bias = 1;
    } else if (!strcmp(a, "--shaw") || !strcmp(a, "--block-sparse")) {
      int *dst = a[2] == 's' ? &o.shaw : &o.block, val = a[2] == 's' ? 16 : 64;
      if (i + 1 < argc && argv[i + 1][0] != '-')
        if ((val = atoi(argv[++i])) < 1 || val > (1 << 20)) goto bad;
      *dst = val;
    } else if (!strcmp(a, "--dtype") && i + 1 < argc) {
      const char *t = argv[++i];
      int k = 0;
      while (k < 4 && strcmp(t, dtype_names[k]))
        k++;
      if (k == 4) goto bad;
      o.dtype = (sdpa_dtype)k;
    } else if (!strcmp(a, "--mod") && i + 1 < argc) {
      if ((o.mod = attn_bench_mod_parse(argv[++i])) < 0) goto bad;
    } else if (!strcmp(a, "--rounds") && i + 1 < argc) {
      if ((o.rounds = atoi(argv[++i])) < 1 || o.rounds > ATTN_BENCH_MAX_ROUNDS) goto bad;
    } else if (!strcmp(a, "--no-math")) {
      o.no_math = 1;
    } else if (!strcmp(a, "--backend") && i + 1 < argc) {
      if (attn_backend_from_name(argv[++i], &o.backend)) goto bad;
    } else if (!strcmp(a, "--threads") && i + 1 < argc) {
      if ((o.threads = atoi(argv[++i])) < 1 || o.threads > 1024) goto bad;
    } else if (!strcmp(a, "--json") && i + 1 < argc) {
      json = argv[++i];
    } else if (!strcmp(a, "--plot") && i + 1 < argc) {
      plot = argv[++i];
    } else {
      goto bad;
    }
  }
  if (o.rotary > 0) { /* an even count of dims, 2..D */
    o.rotary_dim = 2 * (int)lround(o.rotary * o.D / 2.0);
    if (o.rotary_dim < 2) o.rotary_dim = 2;
    if (o.rotary_dim > o.D) o.rotary_dim = o.D & ~1;
    if (o.rotary_dim < 2 || o.dtype != DT_F32) {
      fprintf(stderr, "attn bench sdpa: --rotary needs --dtype f32 and --dim >= 2\n");
      return 2;
    }
  }
  if (o.dtype == DT_I8 && o.backward) {
    fprintf(stderr, "attn bench sdpa: --dtype int8 is forward only (inference): no --backward\n");
    return 2;
  }
  if (!nn) {
    static const long long def[] = {512, 1024, 2048, 4096};
    for (int i = 0; i < 4; i++)
      ns[nn++] = def[i];
  }
  int saved = attn_get_num_threads();
  double peak = attn_bench_peak_gflops(o.threads), peak1 = attn_bench_peak_gflops(1);
  attn_set_num_threads(o.threads);
  char cpu[256];
  attn_bench_cpu_name(cpu, sizeof cpu);
  printf("CPU: %s; level %s\n", cpu, attn_isa_name(attn_isa_active()));
  printf("sdpa %s, backend %s, B=%d H=%d D=%d%s", o.backward ? "backward" : "forward",
         o.dtype == DT_BF16  ? "bf16 flash"
         : o.dtype == DT_F16 ? "fp16 flash (f32 arithmetic)"
         : o.dtype == DT_I8  ? "int8 flash"
                             : attn_backend_name(o.backend),
         o.B, o.H, o.D, o.causal ? " causal" : "");
  if (o.window >= 0) printf(" window %lld", o.window);
  if (o.alibi) printf(" alibi");
  if (o.rel_bias) printf(" rel-bias");
  if (o.shaw) printf(" shaw %d", o.shaw);
  if (o.block) printf(" block-sparse %d", o.block);
  if (o.softcap > 0) printf(" softcap %g", (double)o.softcap);
  if (o.sinks) printf(" sinks");
  if (o.alibi_batch) printf(" alibi-batch");
  if (o.rotary_dim) printf(" rotary %d/%d", o.rotary_dim, o.D);
  if (o.mod) printf(" mod %s (user callback)", attn_bench_mod_name(o.mod));
  printf(", %d thread%s; fp32 FMA peak (%s) measured now: %.1f GFLOP/s (1 thread %.1f)\n",
         o.threads, o.threads > 1 ? "s" : "", attn_bench_peak_isa(), peak, peak1);
  /* the bf16 dot-product peak of the unit the bf16 tiles run on (AMX or
   * AVX512_BF16; int8: the P·V half's rate); fp16 and the bf16 "f32" path
   * run on f32 FMAs, so their %peak column is the f32 one */
  const int lowp = o.dtype != DT_F32, amx_kind = o.dtype == DT_BF16 || o.dtype == DT_I8;
  const char *bpath = attn_sdpa_bf16_path_name(ATTN_LOWP_AUTO);
  const int on_amx = !strcmp(bpath, "amx");
  double amx = !amx_kind ? 0
               : on_amx  ? attn_bench_amx_bf16_peak_gflops(o.threads)
                         : attn_bench_avx512_bf16_peak_gflops(o.threads);
  if (o.dtype == DT_BF16) printf("bf16 flash path: %s\n", bpath);
  if (amx_kind)
    printf("bf16 dot-product peak (%s) measured now: %.1f GFLOP/s (%%bf16 column)\n",
           on_amx ? "AMX" : amx > 0 ? "AVX512_BF16" : "none", amx);
  if (o.mod || has_variants(&o) || lowp)
    printf("vs_plain, vs_builtin, vs_f32cpu: the case and its references run interleaved "
           "(A B A B ..., >= 5 rounds = runs), the ratio of their minimum CPU times per run\n");
  printf("%7s %5s %11s %9s %6s %9s %7s %11s %8s %9s %8s%s%s%s%s\n", "N", "runs", "median_ms",
         "GFLOP/s", "%peak", "GF/cpu_s", "%peak1", "math_ms", "vs_math", "peak_MiB", "io_MiB",
         o.mod ? "  builtin_cpu_ms vs_builtin" : "", has_variants(&o) ? "  plain_cpu_ms vs_plain" : "",
         lowp ? "    f32_ms  vs_f32 vs_f32cpu" : "", amx_kind ? " %bf16" : "");
  sdpa_result res[MAX_N];
  int rc = 0, done = 0;
  for (int i = 0; i < nn; i++) {
    if (run_case(&o, ns[i], &res[i])) {
      rc = 1;
      break;
    }
    sdpa_result *r = &res[i];
    done++;
    double gf = r->flops / r->med[0] * 1e-9;
    char mt[32] = "-", vs[32] = "-";
    if (r->med[1] > 0) {
      snprintf(mt, sizeof mt, "%.2f", 1e3 * r->med[1]);
      snprintf(vs, sizeof vs, "x%.2f", r->med[1] / r->med[0]);
    }
    double gfc = r->flops / r->cpu_s * 1e-9;
    printf("%7lld %5d %11.2f %9.1f %6.1f %9.1f %7.1f %11s %8s %9.1f %8.1f", r->n, r->runs,
           1e3 * r->med[0], gf, 100.0 * gf / peak, gfc, 100.0 * gfc / peak1, mt, vs, r->peak_mib[0],
           r->io_bytes / 1048576.0);
    if (o.mod)
      printf("  %14.2f x%9.2f", 1e3 * r->builtin_cpu_min_s,
             ratio(r->cpu_min_s, r->builtin_cpu_min_s));
    if (r->plain_cpu_s > 0)
      printf("  %12.2f x%7.2f", 1e3 * r->plain_cpu_min_s, ratio(r->cpu_min_s, r->plain_cpu_min_s));
    if (lowp)
      printf(" %9.2f x%6.2f x%8.2f", 1e3 * r->f32_med, r->f32_med / r->med[0],
             ratio(r->f32_cpu_min_s, r->cpu_min_s));
    if (amx_kind) printf(" %5.1f", amx > 0 ? 100.0 * gf / amx : 0.0);
    printf("\n");
    fflush(stdout);
  }
  attn_set_num_threads(saved);
  if (json && write_json(json, &o, res, done, peak, peak1)) rc = 1;
  if (plot && done) {
    attn_sdpa_plot_point pts[MAX_N];
    for (int i = 0; i < done; i++) {
      pts[i].n = res[i].n;
      for (int b = 0; b < 2; b++) {
        pts[i].ms[b] = 1e3 * res[i].med[b];
        pts[i].mib[b] = res[i].med[b] > 0 ? res[i].peak_mib[b] : 0;
      }
    }
    char title[160];
    snprintf(title, sizeof title, "sdpa %s, B=%d H=%d D=%d%s%s, %d threads",
             o.backward ? "backward" : "forward", o.B, o.H, o.D, o.causal ? ", causal" : "",
             o.window >= 0 ? ", window" : "", o.threads);
    if (attn_bench_sdpa_plot(plot, title, attn_backend_name(o.backend), pts, done)) rc = 1;
  }
  return rc;
bad:
  sdpa_usage(stderr);
  return 2;
}
