/* `attn bench varlen`: packed variable-length SDPA (attn/sdpa_varlen.h)
 * against the padded batch that holds the same sequences (key_lens and
 * bottom-right q_offsets, Lq = Lk = the longest), forward and backward,
 * f32 flash (or --dtype bf16 / fp16 / int8: that flash kernel, padded and
 * packed). Median wall time of --reps runs each, tokens/s and the speedup.
 * Only the valid rows of both carry the same numbers; the padded batch also
 * computes its padding query rows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/tools/bench.h"
#include "attn.h"

enum { MAXSEQ = 64 };

static void usage(FILE *out) {
  fprintf(
      out,
      "usage: attn bench varlen [--lens L1,L2,...] [--heads H] [--dim D] [--causal]\n"
      "                         [--reps N] [--backend flash|math|auto]\n"
      "                         [--dtype f32|bf16|fp16|int8] [--threads N]\n"
      "Packed variable-length attention (cu_seqlens) vs the padded batch of the same\n"
      "sequences (key_lens + bottom-right q_offsets), forward and backward.\n"
      "  --lens    sequence lengths (queries = keys; default 64,2048,300,1024,128,700,1500,200)\n"
      "  --heads   heads (default 8)      --dim   head dim (default 64)\n"
      "  --causal  causal attention        --reps  timed runs each (default 5)\n"
      "  --dtype   f32 (default; --backend), or the bf16 / fp16 flash kernels (forward\n"
      "            and backward) or int8 flash (forward only) on both sides\n"
      "  --threads threads (default: all cores this process may use, or $ATTN_NUM_THREADS)\n");
}

/* --dtype: the f32 backends, or another type's flash kernel */
typedef enum { DT_F32, DT_BF16, DT_F16, DT_I8 } vb_dtype;
static const char *const dtype_names[] = {"f32", "bf16", "fp16", "int8"};

typedef struct {
  int64_t n, H, D, maxlen, total;
  vb_dtype dtype;
  int64_t lens[MAXSEQ];
  int causal, reps;
  attn_backend be;
} vb_opts;

static int parse(int argc, char **argv, vb_opts *o) {
  const int64_t dflt[8] = {64, 2048, 300, 1024, 128, 700, 1500, 200};
  memset(o, 0, sizeof *o);
  o->n = 8, o->H = 8, o->D = 64, o->reps = 5, o->be = ATTN_BACKEND_FLASH;
  memcpy(o->lens, dflt, sizeof dflt);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--causal")) {
      o->causal = 1;
      continue;
    }
    if (!v) break;
    i++;
    if (!strcmp(a, "--lens")) {
      o->n = 0;
      for (char *s = (char *)v, *end; *s && o->n < MAXSEQ; s = *end ? end + 1 : end) {
        long long x = strtoll(s, &end, 10);
        if (end == s || x < 0 || x > (1 << 20) || (*end && *end != ',')) return -1;
        o->lens[o->n++] = x;
      }
    } else if (!strcmp(a, "--heads")) {
      o->H = atoll(v);
    } else if (!strcmp(a, "--dim")) {
      o->D = atoll(v);
    } else if (!strcmp(a, "--reps")) {
      o->reps = atoi(v);
    } else if (!strcmp(a, "--threads")) {
      char *end;
      long t = strtol(v, &end, 10);
      if (end == v || *end || t < 1 || t > 4096) return -1;
      attn_set_num_threads((int)t);
    } else if (!strcmp(a, "--backend")) {
      if (attn_backend_from_name(v, &o->be)) return -1;
    } else if (!strcmp(a, "--dtype")) {
      int k = 0;
      while (k < 4 && strcmp(v, dtype_names[k]))
        k++;
      if (k == 4) return -1;
      o->dtype = (vb_dtype)k;
    } else {
      return -1;
    }
  }
  if (o->n < 1 || o->H < 1 || o->D < 1 || o->reps < 1 || o->reps > 1000) return -1;
  for (int64_t s = 0; s < o->n; s++) {
    o->total += o->lens[s];
    if (o->lens[s] > o->maxlen) o->maxlen = o->lens[s];
  }
  return 1;
}

/* Median seconds of reps runs of forward (and backward when bwd). */
typedef struct {
  const attn_sdpa_desc *d;
  const attn_sdpa_varlen *vl; /* NULL: the padded batch */
  attn_backend be;
  float *q, *k, *v, *out, *lse, *dout, *dq, *dk, *dv;
  vb_dtype dtype;
  uint16_t *q16, *k16, *v16; /* bf16 / fp16 copies of q, k, v */
} vb_run;

/* One call: f32 on the run's backend; bf16 / fp16 / int8 on their kernel's best path. */
static attn_status once(const vb_run *r, int bwd) {
  attn_sdpa_args a = {.varlen = r->vl,
                      .q = r->q,
                      .k = r->k,
                      .v = r->v,
                      .out = r->out,
                      .lse = r->lse,
                      .dout = r->dout,
                      .dq = r->dq,
                      .dk = r->dk,
                      .dv = r->dv};
  switch (r->dtype) {
  case DT_F32: a.path = (attn_sdpa_path)r->be; break;
  case DT_I8: a.dtype = ATTN_I8; break;
  default:
    a.dtype = r->dtype == DT_BF16 ? ATTN_BF16 : ATTN_F16;
    a.q = r->q16, a.k = r->k16, a.v = r->v16;
  }
  return bwd ? attn_sdpa_backward(r->d, &a) : attn_sdpa_forward(r->d, &a);
}

static double timed(const vb_run *r, int bwd, int reps, attn_status *st) {
  double t[1000];
  if ((*st = once(r, 0)) || (bwd && (*st = once(r, 1)))) return 0; /* warm-up, fills out/lse */
  for (int i = 0; i < reps; i++) {
    double t0 = attn_bench_now();
    if ((*st = once(r, bwd))) return 0;
    t[i] = attn_bench_now() - t0;
  }
  return attn_bench_median(t, reps);
}

static void fill(float *x, int64_t n, unsigned seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < n; i++) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x[i] = (float)((s >> 40) & 0xFFFF) / 32768.0f - 1.0f;
  }
}

int attn_bench_varlen_main(int argc, char **argv) {
  vb_opts o;
  int p = parse(argc, argv, &o);
  if (p == 0) return 0;
  if (p < 0) {
    fprintf(stderr, "attn bench varlen: bad arguments\n");
    usage(stderr);
    return 2;
  }
  const int64_t B = o.n, H = o.H, D = o.D, L = o.maxlen, T = o.total;
  const int64_t npad = B * H * L * D, npack = T * H * D;
  float *buf = calloc((size_t)(9 * npad + 9 * npack + 2 * B * H * L + 16), sizeof(float));
  uint16_t *half = calloc((size_t)(3 * npad + 3 * npack + 16), sizeof(uint16_t));
  int32_t *cu = calloc((size_t)B + 1, sizeof(int32_t)), *kl = calloc((size_t)B, sizeof(int32_t));
  int64_t *qo = calloc((size_t)B, sizeof(int64_t));
  if (!buf || !cu || !kl || !qo || !half) {
    fprintf(stderr, "attn bench varlen: out of memory\n");
    free(buf), free(cu), free(kl), free(qo), free(half);
    return 1;
  }
  float *x = buf;
  vb_run pad = {0}, var = {0};
  float **pp[9] = {&pad.q, &pad.k, &pad.v, &pad.out, &pad.dout, &pad.dq, &pad.dk, &pad.dv, &pad.lse};
  float **vp[9] = {&var.q, &var.k, &var.v, &var.out, &var.dout, &var.dq, &var.dk, &var.dv, &var.lse};
  for (int i = 0; i < 9; i++) {
    *pp[i] = x, x += i == 8 ? B * H * L : npad;
    *vp[i] = x, x += i == 8 ? T * H : npack;
  }
  for (int64_t s = 0; s < B; s++) {
    cu[s + 1] = cu[s] + (int32_t)o.lens[s];
    kl[s] = (int32_t)o.lens[s];
    qo[s] = 0; /* queries = keys: bottom-right = top-left */
  }
  fill(pad.q, npad, 1), fill(pad.k, npad, 2), fill(pad.v, npad, 3), fill(pad.dout, npad, 4);
  fill(var.q, npack, 1), fill(var.k, npack, 2), fill(var.v, npack, 3), fill(var.dout, npack, 4);
  pad.dtype = var.dtype = o.dtype;
  if (o.dtype == DT_BF16 || o.dtype == DT_F16) { /* 16-bit copies of q, k, v */
    vb_run *runs[2] = {&pad, &var};
    uint16_t *h = half;
    for (int r = 0; r < 2; r++) {
      const int64_t n = r ? npack : npad;
      float *src[3] = {runs[r]->q, runs[r]->k, runs[r]->v};
      uint16_t **dst[3] = {&runs[r]->q16, &runs[r]->k16, &runs[r]->v16};
      for (int t = 0; t < 3; t++, h += n) {
        *dst[t] = h;
        if (o.dtype == DT_BF16)
          attn_f32_to_bf16_n(src[t], h, n);
        else
          attn_f32_to_f16_n(src[t], h, n);
      }
    }
  }
  attn_sdpa_desc dp, dv;
  attn_sdpa_desc_init(&dp, B, H, H, L, L, D, D);
  dp.causal = o.causal;
  dp.key_lens = kl;
  dp.q_offsets = qo;
  dv = dp;
  dv.key_lens = NULL;
  dv.q_offsets = NULL;
  const attn_sdpa_varlen vl = {cu, cu, T, T};
  pad.d = &dp, pad.be = o.be;
  var.d = &dv, var.vl = &vl, var.be = o.be;
  printf("# varlen: %lld sequences (%lld tokens, longest %lld), H %lld, D %lld, %s, %s %s, %d "
         "thread%s\n",
         (long long)B, (long long)T, (long long)L, (long long)H, (long long)D,
         o.causal ? "causal" : "full", dtype_names[o.dtype],
         o.dtype == DT_F32 ? attn_backend_name(o.be) : "flash", attn_get_num_threads(),
         attn_get_num_threads() == 1 ? "" : "s");
  int rc = 0;
  for (int bwd = 0; bwd < (o.dtype == DT_I8 ? 1 : 2) && !rc; bwd++) {
    attn_status s1, s2;
    double tp = timed(&pad, bwd, o.reps, &s1), tv = timed(&var, bwd, o.reps, &s2);
    if (s1 || s2) {
      fprintf(stderr, "attn bench varlen: %s\n", attn_last_error());
      rc = 1;
      break;
    }
    printf("%-8s padded %9.3f ms (%8.0f tok/s)  varlen %9.3f ms (%8.0f tok/s)  speedup %.2fx\n",
           bwd ? "backward" : "forward", 1e3 * tp, (double)T / tp, 1e3 * tv, (double)T / tv,
           tp / tv);
  }
  if (!rc && o.dtype == DT_I8) printf("backward n/a (int8 flash is forward only)\n");
  free(buf), free(cu), free(kl), free(qo), free(half);
  return rc;
}
