/* attn bench: the subcommand table (`attn bench NAME ...`) and measurements
 * shared by the benches. Each bench is `int attn_bench_<name>_main(argc,
 * argv)` with argv[0] = NAME, returning the exit status (0 ok, 1 failure,
 * 2 usage). To add one: declare it here and add a row to attn_bench_table. */
#ifndef ATTN_APPS_BENCH_H
#define ATTN_APPS_BENCH_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  const char *name;
  int (*main)(int argc, char **argv);
  const char *summary;
} attn_bench_entry;

int attn_bench_peak_main(int argc, char **argv);
int attn_bench_gemm_main(int argc, char **argv);
int attn_bench_sdpa_main(int argc, char **argv);
int attn_bench_train_main(int argc, char **argv);
int attn_bench_lowp_main(int argc, char **argv);
int attn_bench_allreduce_main(int argc, char **argv);
int attn_bench_varlen_main(int argc, char **argv);
int attn_bench_membw_main(int argc, char **argv);
int attn_bench_decode_main(int argc, char **argv);

static const attn_bench_entry attn_bench_table[] = {
    {"peak", attn_bench_peak_main, "fp32 FMA peak of this machine, 1 thread and all threads"},
    {"gemm", attn_bench_gemm_main, "f32 GEMM: median time, GFLOP/s, % of peak, vs reference"},
    {"sdpa", attn_bench_sdpa_main, "SDPA forward/backward: time, GFLOP/s, % of peak, vs math, memory"},
    {"train", attn_bench_train_main, "classifier training tokens/s (vs PyTorch with --torch)"},
    {"lowp", attn_bench_lowp_main, "bf16/fp16/int8 peaks (AVX512_BF16, VNNI, AMX), GEMM and Linear"},
    {"allreduce", attn_bench_allreduce_main, "gradient all-reduce GB/s under mpirun (attn's rank-ordered, MPI's)"},
    {"varlen", attn_bench_varlen_main, "packed variable-length SDPA (cu_seqlens) vs the padded batch"},
    {"membw", attn_bench_membw_main, "memory read bandwidth (STREAM-style), 1 thread and all threads"},
    {"decode", attn_bench_decode_main, "decode attention over a KV cache: GB/s of K/V vs membw, tokens/s"},
};

/* fp32 FMA peak in GFLOP/s with `threads` threads (0 = all): a register-
 * resident FMA loop with independent accumulators (of the active ISA level:
 * AVX-512, AVX2+FMA, else scalar C), best of ten ~20 ms runs. Measured
 * once per thread count per process, then cached. */
double attn_bench_peak_gflops(int threads);
/* One ~5 ms run of the same loop, not cached: the FMA rate of this moment
 * (the core's clock and the host's other load move it between minutes). */
double attn_bench_peak_now_gflops(int threads);
/* The same loop's flops per CPU-second of the process x threads (fastest
 * run): the peak without the time other processes took on a busy machine. */
double attn_bench_peak_cpu_gflops(int threads);
/* Name of the instruction set attn_bench_peak_gflops uses ("avx512", ...). */
const char *attn_bench_peak_isa(void);

/* AMX bf16 (TDPBF16PS) peak in GFLOP/s with `threads` threads, measured
 * once and cached (bench_lowp.c); 0 where AMX is unavailable. */
double attn_bench_amx_bf16_peak_gflops(int threads);
/* AVX512_BF16 (VDPBF16PS) peak, the same way; 0 where unavailable. */
double attn_bench_avx512_bf16_peak_gflops(int threads);
/* Memory read bandwidth in GB/s with `threads` threads (0 = all): a
 * STREAM-style read of a buffer (512 MiB, or attn_bench_membw_set_mib),
 * best of 8 runs, cached per thread count (bench_membw.c). */
double attn_bench_membw_gbs(int threads);
void attn_bench_membw_set_mib(int mib);
/* A buffer of `bytes` bytes (rounded up to 256) first touched by `threads`
 * threads (0 = all), for attn_bench_read_once; free() it. */
float *attn_bench_read_buffer(size_t bytes, int threads);
/* Seconds for `threads` threads to read it once, in equal slices as
 * attn_bench_membw_gbs reads: the bandwidth of this moment, to pair with a
 * measurement of the same bytes (attn bench decode's %bw_p). */
double attn_bench_read_once(const float *x, size_t bytes, int threads);
/* The same buffer read in chunks of `chunk` bytes (rounded up to 64) in a
 * shuffled order, each thread its share of the order, prefetched as the
 * decode loop prefetches: `ahead` bytes further along (0: a chunk), and the
 * first 4 lines of each region of `region` bytes of a chunk (0: none) twice
 * that far. A paged KV cache's memory cost with pages that size. */
double attn_bench_membw_chunked_gbs(int threads, int64_t chunk, int64_t ahead, int64_t region);
/* "AMD EPYC ..., N logical CPUs" from /proc/cpuinfo ("unknown CPU" elsewhere). */
void attn_bench_cpu_name(char *buf, size_t n);
/* Monotonic wall clock in seconds. */
double attn_bench_now(void);
/* Median of n values (sorts v in place). */
double attn_bench_median(double *v, int n);

#endif
