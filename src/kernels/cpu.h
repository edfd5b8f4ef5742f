/* Internal to the dispatch module: what the CPU has and which ISA level runs
 * (cpu.c), apart from the kernel tables of each level (dispatch.c, kern.h).
 * The public queries (attn_cpu_detected, attn_isa_name) are in attn/kernels.h. */
#ifndef ATTN_KERNELS_CPU_H
#define ATTN_KERNELS_CPU_H

#include <stddef.h>

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

#endif
