/* `attn bench decode`: decode attention (attn_decode_forward) over a KV
 * cache per cache dtype and length Lk: the K/V bytes read per second
 * against the memory read bandwidth measured in the same run (`attn bench
 * membw`), tokens per second, a paged cache (its pages in shuffled order,
 * as a pool is after a while) against the contiguous one, and 1 thread
 * against T (the split-KV speed-up). Medians of several timed runs, each
 * of enough calls for ~10 ms. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps/tools/bench.h"
#include "attn.h"

enum { MAX_LK = 16, MAX_RUNS = 31, NTYPES = 10 };
/* keys of the decode loop's block (kernels/decode/decode_ukr.h's ATTN_DECODE_NB) */
enum { DECODE_BLOCK = 32 };

typedef struct {
  int B, Lq, Hq, Hkv, D, threads, runs, page_size, paged, single;
  long long lk[MAX_LK];
  int nlk;
  int dtypes[NTYPES], ndt; /* indices into all_types */
} dec_opts;

/* "int8f": the int8 cache with P·V in f32 (attn_decode_desc.int8_pv_f32); "int8r", "f16r",
 * "bf16r": the cache in rows (ATTN_KV_ROWS), where "int8", "f16" and "bf16" take the
 * library's layout (tiled where the level has its kernels); "bf16f": the bf16 cache in the
 * library's layout with scores and P·V in f32 (attn_decode_desc.bf16_f32 = 1), "bf16d": with
 * the level's bf16 dot products, fast or not (bf16_f32 = 2) */
static const int all_types[NTYPES] = {ATTN_F32, ATTN_F16, ATTN_BF16, ATTN_I8,   ATTN_I8,
                                      ATTN_I8,  ATTN_F16, ATTN_BF16, ATTN_BF16, ATTN_BF16};
static const char *const type_names[NTYPES] = {"f32",   "f16",  "bf16",  "int8",  "int8f",
                                               "int8r", "f16r", "bf16r", "bf16f", "bf16d"};

static void dec_usage(FILE *out) {
  fprintf(out, "usage: attn bench decode [--lk N...]\n"
               "                         [--dtype "
               "f32|f16|bf16|int8|int8f|int8r|f16r|bf16r|bf16f|bf16d ...]\n"
               "                         [--lq Q]\n"
               "                         [--heads HQ] [--kv-heads HKV] [--dim D] [--batch B]\n"
               "                         [--threads T] [--page-size P] [--no-paged] [--no-single]\n"
               "                         [--runs R] [--membw-mib M]\n"
               "  Decode attention: Q new queries (default 1) per sequence, HQ query heads (32)\n"
               "  over HKV KV heads (8), head dim D (128), B sequences (1), over a cache of\n"
               "  Lk tokens (default 1024 4096 8192 16384 32768 65536), per cache dtype (all).\n"
               "  Columns: median ms per call with T threads (default all), K/V GB/s (the bytes\n"
               "  of the cache the call reads, int8 scales included) and %% of the memory read\n"
               "  bandwidth measured now with T threads; %%bw_p: the same against a read of\n"
               "  the membw buffer right after each run (the median over the runs); %%fma_p:\n"
               "  the call's flops (2 per query row, key or value and element) per second over\n"
               "  the fp32 FMA loop's rate timed right after each run (attn bench peak's loop):\n"
               "  the share of this moment's compute ceiling, which an int8 cache meets before\n"
               "  the bandwidth on AVX2 (docs/DECODE.md); tokens/s (B Q / time); a paged cache\n"
               "  of P-token pages (16) in shuffled order and its time over the contiguous one,\n"
               "  next to pg_ceil: the memory's own time for reading in shuffled chunks of one\n"
               "  page of one head's rows, prefetched as the decode loop prefetches, over\n"
               "  reading in order (attn bench membw --chunk; one measurement each: as noisy\n"
               "  as the machine's bandwidth);\n"
               "  1 thread's time and T threads' speed-up over it (split-KV); xLLC: the cache\n"
               "  over the CPU's last-level cache (-: unknown): below about 1 a call reads much\n"
               "  of the cache from there, not from memory, and the %%bw columns can pass 100.\n"
               "  int8f: the int8\n"
               "  cache with P·V in f32 (int8_pv_f32); int8r, f16r, bf16r: the cache in rows,\n"
               "  where int8, f16 and bf16 are in the library's layout (tiled where the level\n"
               "  has its kernels); bf16f: the bf16 cache with scores and P·V in f32 (bf16_f32\n"
               "  1); bf16d: with the level's bf16 dot products, where bf16 takes them only if\n"
               "  they are fast here (bf16_f32 2; attn_cpu_features.bf16_dot_fast); none of\n"
               "  these in the default list.\n");
}

/* What a timing measures beside the calls, right after each run: one read
 * of rd (rbytes, a buffer much larger than the caches; it also leaves the
 * last-level cache without the KV cache before each run) and a ~5 ms run of
 * the FMA loop (attn_bench_peak_now_gflops). bw: the median over the runs
 * of the calls' bytes per second (cbytes per call) over the read's, the
 * fraction of this moment's memory bandwidth the calls reach, robust to the
 * host's bandwidth moving between runs; fma: the median of the calls' flops
 * per second (cflops: 2 per query row, key or value and element) over the
 * loop's, the share of this moment's compute ceiling. */
typedef struct {
  const float *rd;
  size_t rbytes;
  double cbytes, cflops;
  double bw, fma; /* out */
} paired_reads;

/* median seconds per call; pr (or NULL): the paired measurements above */
static double time_calls(const attn_decode_desc *d, const attn_kv_view *v, const float *q,
                         float *out, int threads, int runs, paired_reads *pr) {
  attn_set_num_threads(threads);
  double t0 = attn_bench_now();
  if (attn_decode_forward(d, v, q, out, NULL)) return -1;
  double one = attn_bench_now() - t0;
  int reps = one > 0.01 ? 1 : (int)(0.01 / (one > 1e-7 ? one : 1e-7)) + 1;
  double t[MAX_RUNS], bw[MAX_RUNS], fma[MAX_RUNS];
  for (int r = 0; r < runs; r++) {
    t0 = attn_bench_now();
    for (int k = 0; k < reps; k++)
      attn_decode_forward(d, v, q, out, NULL);
    t[r] = (attn_bench_now() - t0) / reps;
    if (!pr) continue;
    bw[r] = pr->cbytes / t[r] /
            ((double)pr->rbytes / attn_bench_read_once(pr->rd, pr->rbytes, threads));
    fma[r] = pr->cflops / t[r] / (attn_bench_peak_now_gflops(threads) * 1e9);
  }
  if (pr) pr->bw = attn_bench_median(bw, runs), pr->fma = attn_bench_median(fma, runs);
  return attn_bench_median(t, runs);
}

/* a cache of o->B sequences of maxlk tokens (random rows, appended in pieces) */
static attn_kvc *fill_cache(const dec_opts *o, int dtype, long long maxlk, int page_size,
                            int layout) {
  attn_kvc_config cfg = {.dtype = dtype,
                         .B = o->B,
                         .Hkv = o->Hkv,
                         .D = o->D,
                         .Dv = o->D,
                         .max_len = maxlk,
                         .page_size = page_size,
                         .layout = layout};
  attn_kvc *c;
  if (attn_kvc_create(&c, &cfg)) return NULL;
  enum { PIECE = 256 };
  float *x = malloc((size_t)o->Hkv * PIECE * o->D * sizeof(float));
  if (!x) {
    attn_kvc_free(c);
    return NULL;
  }
  unsigned s = 12345u;
  for (int b = 0; b < o->B; b++)
    for (long long t = 0; t < maxlk; t += PIECE) {
      const long long n = maxlk - t < PIECE ? maxlk - t : PIECE;
      for (long long i = 0; i < (long long)o->Hkv * n * o->D; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)((s >> 8) & 0xffff) / 32768.0f - 1.0f;
      }
      if (attn_kvc_append(c, b, x, x, n)) {
        free(x);
        attn_kvc_free(c);
        return NULL;
      }
    }
  free(x);
  return c;
}

int attn_bench_decode_main(int argc, char **argv) {
  dec_opts o = {.B = 1,
                .Lq = 1,
                .Hq = 32,
                .Hkv = 8,
                .D = 128,
                .threads = attn_get_num_threads(),
                .runs = 7,
                .page_size = 16,
                .paged = 1,
                .single = 1};
  int mib = 512;
  const char *last = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    last = a;
    if (!strcmp(a, "--lk")) {
      int got = 0;
      while (i + 1 < argc && argv[i + 1][0] != '-') {
        long long n = atoll(argv[++i]);
        if (n < 1 || n > (1LL << 30) || o.nlk == MAX_LK) goto bad;
        o.lk[o.nlk++] = n, got++;
      }
      if (!got) goto bad;
    } else if (!strcmp(a, "--dtype")) {
      int got = 0;
      while (i + 1 < argc && argv[i + 1][0] != '-') {
        const char *t = argv[++i];
        int k = 0;
        while (k < NTYPES && strcmp(t, type_names[k]) && !(k == 1 && !strcmp(t, "fp16")))
          k++;
        if (k == NTYPES || o.ndt == NTYPES) goto bad;
        o.dtypes[o.ndt++] = k, got++;
      }
      if (!got) goto bad;
    } else if (!strcmp(a, "--lq") && i + 1 < argc) {
      if ((o.Lq = atoi(argv[++i])) < 1 || o.Lq > ATTN_DECODE_MAX_LQ) goto bad;
    } else if (!strcmp(a, "--heads") && i + 1 < argc) {
      if ((o.Hq = atoi(argv[++i])) < 1 || o.Hq > 1024) goto bad;
    } else if (!strcmp(a, "--kv-heads") && i + 1 < argc) {
      if ((o.Hkv = atoi(argv[++i])) < 1 || o.Hkv > 1024) goto bad;
    } else if (!strcmp(a, "--dim") && i + 1 < argc) {
      if ((o.D = atoi(argv[++i])) < 1 || o.D > 4096) goto bad;
    } else if (!strcmp(a, "--batch") && i + 1 < argc) {
      if ((o.B = atoi(argv[++i])) < 1 || o.B > 4096) goto bad;
    } else if (!strcmp(a, "--threads") && i + 1 < argc) {
      if ((o.threads = atoi(argv[++i])) < 1 || o.threads > 1024) goto bad;
    } else if (!strcmp(a, "--runs") && i + 1 < argc) {
      if ((o.runs = atoi(argv[++i])) < 1 || o.runs > MAX_RUNS) goto bad;
    } else if (!strcmp(a, "--page-size") && i + 1 < argc) {
      if ((o.page_size = atoi(argv[++i])) < 1 || o.page_size > (1 << 20)) goto bad;
    } else if (!strcmp(a, "--membw-mib") && i + 1 < argc) {
      if ((mib = atoi(argv[++i])) < 1 || mib > (1 << 20)) goto bad;
    } else if (!strcmp(a, "--no-paged")) {
      o.paged = 0;
    } else if (!strcmp(a, "--no-single")) {
      o.single = 0;
    } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      dec_usage(stdout);
      return 0;
    } else {
      goto bad;
    }
  }
  if (o.Hq % o.Hkv) {
    fprintf(stderr, "attn bench decode: --heads %d is not a multiple of --kv-heads %d\n", o.Hq,
            o.Hkv);
    return 2;
  }
  if (!o.nlk) {
    static const long long def[] = {1024, 4096, 8192, 16384, 32768, 65536};
    for (int i = 0; i < 6; i++)
      o.lk[o.nlk++] = def[i];
  }
  if (!o.ndt)
    for (int i = 0; i < 4; i++)
      o.dtypes[o.ndt++] = i;
  long long maxlk = 0;
  for (int i = 0; i < o.nlk; i++)
    if (o.lk[i] > maxlk) maxlk = o.lk[i];

  const int saved = attn_get_num_threads();
  char cpu[256];
  attn_bench_cpu_name(cpu, sizeof cpu);
  attn_bench_membw_set_mib(mib);
  const double bw = attn_bench_membw_gbs(o.threads), bw1 = attn_bench_membw_gbs(1);
  printf("CPU: %s; level %s\n", cpu, attn_isa_name(attn_isa_active()));
  printf("decode: B=%d, Lq=%d, %d query heads over %d KV heads, D=%d, %d thread%s\n", o.B, o.Lq,
         o.Hq, o.Hkv, o.D, o.threads, o.threads > 1 ? "s" : "");
  printf("memory read bandwidth measured now (attn bench membw, %d MiB): %d threads %.1f GB/s, "
         "1 thread %.1f GB/s\n",
         mib, o.threads, bw, bw1);
  /* the last-level cache (sysfs, else sysconf; 0 where neither says) */
  const long long llc = (long long)attn_cpu_llc_bytes();
  if (llc > 0) printf("last-level cache: %.1f MiB (xLLC: the cache over it)\n", llc / 1048576.0);
  printf("%5s %7s %9s %9s %7s %6s %6s %6s %9s %9s %7s %7s %9s %7s %7s %5s\n", "dtype", "Lk",
         "cache_MiB", "ms", "GB/s", "%bw", "%bw_p", "%fma_p", "tok/s", "paged_ms", "paged/c",
         "pg_ceil", "ms_1thr", "GB/s_1", "split_x", "xLLC");
  /* the paired read (%bw_p): a buffer of the membw size (512 MiB unless
   * --membw-mib says otherwise) */
  const size_t rbytes = (size_t)mib << 20;
  float *rd = attn_bench_read_buffer(rbytes, o.threads);
  float *q = malloc((size_t)o.B * o.Hq * o.Lq * o.D * sizeof(float));
  float *out = malloc((size_t)o.B * o.Hq * o.Lq * o.D * sizeof(float));
  int32_t *lens = malloc((size_t)o.B * sizeof(int32_t));
  int rc = 0;
  if (!rd || !q || !out || !lens) {
    fprintf(stderr, "attn bench decode: out of memory\n");
    rc = 1;
    goto done;
  }
  for (long long i = 0; i < (long long)o.B * o.Hq * o.Lq * o.D; i++)
    q[i] = (float)((i * 7919) % 2001) / 1000.0f - 1.0f;
  for (int t = 0; t < o.ndt; t++) {
    const int dt = all_types[o.dtypes[t]];
    const char *tn = type_names[o.dtypes[t]];
    const int layout = o.dtypes[t] >= 5 && o.dtypes[t] <= 7 ? ATTN_KV_ROWS : 0;
    attn_kvc *cc = fill_cache(&o, dt, maxlk, 0, layout);
    attn_kvc *pc = o.paged ? fill_cache(&o, dt, maxlk, o.page_size, layout) : NULL;
    int32_t *table = NULL;
    attn_kv_view cv, pv;
    memset(&pv, 0, sizeof pv);
    if (!cc || (o.paged && !pc)) {
      fprintf(stderr, "attn bench decode: %s cache: %s\n", tn, attn_last_error());
      attn_kvc_free(cc), attn_kvc_free(pc);
      rc = 1;
      break;
    }
    attn_kvc_view(cc, &cv);
    if (pc) { /* the pool's pages in a shuffled order: no stream the prefetcher follows */
      attn_kvc_view(pc, &pv);
      const int64_t nt = o.B * pv.block_table_stride;
      table = malloc((size_t)nt * sizeof(int32_t));
      if (!table) {
        rc = 1;
        attn_kvc_free(cc), attn_kvc_free(pc);
        break;
      }
      for (int64_t i = 0; i < nt; i++)
        table[i] = (int32_t)i;
      unsigned s = 777u;
      for (int64_t i = nt - 1; i > 0; i--) {
        s = s * 1664525u + 1013904223u;
        const int64_t j = (int64_t)(s >> 4) % (i + 1);
        int32_t x = table[i];
        table[i] = table[j], table[j] = x;
      }
      pv.block_table = table;
    }
    attn_decode_desc d;
    attn_decode_desc_init(&d, o.B, o.Hq, o.Hkv, o.Lq, o.D, o.D, dt);
    d.int8_pv_f32 = o.dtypes[t] == 4;
    d.bf16_f32 = o.dtypes[t] == 8 ? 1 : o.dtypes[t] == 9 ? 2 : 0;
    const double elt = dt == ATTN_F32 ? 4 : dt == ATTN_I8 ? 1 : 2;
    /* what the memory system itself loses on pages: the buffer read in
     * shuffled chunks of one page of one head's K (or V) rows, prefetched as
     * the decode loop does (a block ahead; the first lines of each page, or of
     * each 4 KiB of it but for int8, two blocks ahead), against in order */
    double pg_ceil = 0;
    if (pc) {
      const int64_t page = (int64_t)(o.page_size * o.D * elt);
      const double cbw =
          attn_bench_membw_chunked_gbs(o.threads, page, (int64_t)(DECODE_BLOCK * o.D * elt),
                                       dt == ATTN_I8 || page < 4096 ? page : 4096);
      pg_ceil = cbw > 0 ? bw / cbw : 0;
    }
    for (int i = 0; i < o.nlk; i++) {
      for (int b = 0; b < o.B; b++)
        lens[b] = (int32_t)o.lk[i];
      cv.seq_lens = lens;
      pv.seq_lens = lens;
      const double rows = (double)o.B * (double)o.lk[i] * o.Hkv;
      const double bytes = rows * (2.0 * o.D * elt + (dt == ATTN_I8 ? 8.0 : 0.0));
      /* each query row's multiply-adds with each key's D and each value's D elements */
      paired_reads pr = {.rd = rd,
                         .rbytes = rbytes,
                         .cbytes = bytes,
                         .cflops = 2.0 * o.B * o.Hq * o.Lq * (double)o.lk[i] * 2.0 * o.D};
      const double tm = time_calls(&d, &cv, q, out, o.threads, o.runs, &pr);
      if (tm < 0) {
        fprintf(stderr, "attn bench decode: %s\n", attn_last_error());
        rc = 1;
        break;
      }
      const double gbs = bytes / tm * 1e-9;
      printf("%5s %7lld %9.1f %9.4g %7.2f %6.1f %6.1f %6.1f %9.1f", tn, o.lk[i], bytes / 1048576.0,
             tm * 1e3, gbs, 100.0 * gbs / bw, 100.0 * pr.bw, 100.0 * pr.fma,
             (double)o.B * o.Lq / tm);
      if (pc) {
        const double tp = time_calls(&d, &pv, q, out, o.threads, o.runs, NULL);
        printf(" %9.4g %7.3f %7.3f", tp * 1e3, tp / tm, pg_ceil);
      } else {
        printf(" %9s %7s %7s", "-", "-", "-");
      }
      if (o.single && o.threads > 1) {
        const double t1 = time_calls(&d, &cv, q, out, 1, o.runs, NULL);
        printf(" %9.4g %7.2f %7.2f", t1 * 1e3, bytes / t1 * 1e-9, t1 / tm);
      } else {
        printf(" %9s %7s %7s", "-", "-", "-");
      }
      if (llc > 0)
        printf(" %5.2f\n", bytes / (double)llc);
      else
        printf(" %5s\n", "-");
      fflush(stdout);
    }
    free(table);
    attn_kvc_free(cc);
    attn_kvc_free(pc);
    if (rc) break;
  }
done:
  attn_set_num_threads(saved);
  free(rd), free(q), free(out), free(lens);
  return rc;
bad:
  fprintf(stderr,
          "attn bench decode: bad argument near '%s' (--lk 1..2^30, at most %d; --runs 1..%d; "
          "--dtype one of f32 f16 bf16 int8 int8f int8r f16r bf16r bf16f bf16d)\n",
          last ? last : "", MAX_LK, MAX_RUNS);
  dec_usage(stderr);
  return 2;
}
