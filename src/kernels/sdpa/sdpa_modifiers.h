/* The SDPA modifiers in one table (sdpa_modifiers.c): every descriptor field
 * that changes which keys a query sees or what its scores are, with the
 * kernels that run it. The entry (sdpa_entry.c) checks a call against the
 * table before routing, so a modifier a kernel lacks is refused up front
 * with one message form, naming the field, the kernel and where the
 * modifier does run; test_sdpa_modifiers checks the table against the
 * kernels themselves (each kernel, called directly, accepts exactly what
 * the table says).
 *
 * Where each kind of modifier is applied (docs/ARCHITECTURE.md):
 *   masks (causal, prefix_lens, window, key_lens, q_offset/q_offsets): one
 *     function, attn_sdpa_key_range (sdpa_internal.h): a key interval per
 *     query row that every loop (math rows, f32/bf16/int8 flash tiles,
 *     probabilities, varlen pieces) takes its tile bounds from;
 *   element masks (bool_mask, add_mask, block_mask, user mask_mod): per
 *     score inside the tile;
 *   element-wise score modifiers and row-end ones: the score-modifier
 *     stage (sdpa_stage.h), one unit per modifier (mod_<name>.c) that every
 *     loop calls through attn_stage_*; position terms (ALiBi, T5, Shaw)
 *     added to the score tile (sdpa_positions.c); user score_mod
 *     (sdpa_usermod.c); dropout on the probability tile. */
#ifndef ATTN_SDPA_MODIFIERS_H
#define ATTN_SDPA_MODIFIERS_H

#include "attn/sdpa.h"

struct attn_score_unit;

/* The kernels a modifier may run in (bits). */
enum {
  ATTN_SK_MATH = 1,   /* the f32 math path (also bf16/fp16 with path math) */
  ATTN_SK_FLASH = 2,  /* the f32 flash kernels */
  ATTN_SK_BF16 = 4,   /* the bf16 flash kernels (every path) */
  ATTN_SK_F16 = 8,    /* the fp16 flash kernels */
  ATTN_SK_I8 = 16,    /* the int8 flash forward */
  ATTN_SK_VARLEN = 32 /* the packed varlen layout (with the dtype's kernel) */
};
#define ATTN_SK_ALL 63

typedef struct {
  const char *field; /* the descriptor field(s), as the message names them */
  const char *what;
  int (*present)(const attn_sdpa_desc *d);
  unsigned kernels; /* ATTN_SK_* bits */
  /* 1: a field of the padded [B,H,L,D] layout with no meaning in the packed
   * varlen one (lengths and alignment come from cu_seqlens): ATTN_EINVAL
   * there, not ATTN_EUNSUPPORTED */
  int dense_only;
  /* the modifier's unit in the score-modifier stage (sdpa_stage.h; NULL:
   * applied elsewhere, see above) */
  const struct attn_score_unit *unit;
} attn_sdpa_modifier;

int attn_sdpa_modifier_count(void);
const attn_sdpa_modifier *attn_sdpa_modifier_at(int i);

/* ATTN_OK when every modifier d sets runs in all the kernels of `need`
 * (ATTN_SK_* bits; `any`: in at least one of them, as f32 auto runs flash
 * or else math), else ATTN_EUNSUPPORTED naming the field, the kernel
 * (`kernel`, e.g. "the bf16 flash kernel") and where it does run
 * (ATTN_EINVAL for a dense_only field asked of the varlen layout). */
attn_status attn_sdpa_modifiers_check(const attn_sdpa_desc *d, unsigned need, int any,
                                      const char *kernel);

/* "math, f32 flash, ..." for the bits of k, into buf. */
const char *attn_sdpa_kernel_names(unsigned k, char *buf, size_t n);

#endif
