/* Internal to the dispatch module: what the CPU has and which ISA level runs
 * (cpu.c), apart from the kernel tables of each level (dispatch.c, kern.h).
 * The public queries (attn_cpu_detected, attn_isa_name) are in attn/kernels.h. */
#ifndef ATTN_KERNELS_CPU_H
#define ATTN_KERNELS_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "attn/kernels.h"

/* The CPU has the level's instructions (the build may still lack its code). */
int attn_cpu_has_level(attn_isa isa, const attn_cpu_features *f);
/* The features a level may use: those of its instruction set, and at the
 * AVX-512 level everything the CPU has. */
attn_cpu_features attn_cpu_level_features(attn_isa isa);

/* available[ATTN_ISA_COUNT]: the levels the CPU and the build have (the
 * kernel tables, dispatch.c). The best of them (generic when no vector level
 * is). */
attn_isa attn_cpu_best_level(const int *available);
/* "generic, avx2, avx512": the available levels, for messages */
void attn_cpu_level_list(const int *available, char *buf, size_t n);
/* A level by name ("native": the best): 0 with *out set, 1 for an unknown
 * name, 2 for a level this CPU or build lacks. */
int attn_cpu_parse_level(const char *name, const int *available, attn_isa *out);
/* The level to run: the best available, or the one ATTN_CPU asks for (an
 * unknown or unavailable value falls back to the best); why, in reason. */
attn_isa attn_cpu_pick_level(const int *available, char *reason, size_t n);

/* The AMX tile permission (Linux: arch_prctl(ARCH_REQ_XCOMP_PERM,
 * XTILEDATA)), requested on the first call only, thread-safe: 1 when granted.
 * attn_amx_ready() (kernels/arch/amx/amx.h) asks it when the active level's
 * table has AMX kernels. */
int attn_amx_permission(void);

/* The decode kernels' prefetch hint (attn_decode_block.pf_l2) for a call
 * reading `bytes` of cache: 1 (into L2 only) on an Intel CPU when the cache
 * is more than a third of the last-level cache (shared with the other
 * cores; measured on an Intel Xeon, docs/DECODE.md: from memory the L2 hint
 * read 81-88 % of the bandwidth against 74-76 % for L1's, with 64 MiB of
 * 260 in L3 1.1-1.4x slower), else 0. ATTN_DECODE_PF=l1 or l2 forces one;
 * hints never change a result. */
int attn_cpu_decode_pf_l2(int64_t bytes);
/* a sysfs cache size ("32K", "512K", "32768K", "32M"; a number alone:
 * bytes) in bytes, -1 if it is none (tests) */
int64_t attn_cpu_cache_size_parse(const char *s);
/* the rule itself (tests) */
int attn_decode_pf_l2_rule(int intel, int64_t llc_bytes, int64_t bytes);
/* tests: -1 the rule, 0 L1, 1 L2 (not while other threads run kernels) */
void attn_cpu_set_decode_pf(int mode);

#endif
