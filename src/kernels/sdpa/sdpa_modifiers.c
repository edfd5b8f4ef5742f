/* The SDPA modifiers and the kernels that run them (sdpa_modifiers.h). A new
 * modifier: its descriptor field (attn/sdpa.h), its row here, its rule where
 * its kind is applied (sdpa_modifiers.h) — for an element-wise or row-end
 * one, a unit of the score-modifier stage (mod_<name>.c, named in its row:
 * the stage finds its units here) — and its tests. */
#include <stdio.h>
#include <string.h>

#include "kernels/sdpa/sdpa_modifiers.h"
#include "kernels/sdpa/sdpa_stage.h"

/* the score-modifier stage's units (mod_<name>.c) */
extern const attn_score_unit attn_unit_softcap, attn_unit_sinks;

static int has_causal(const attn_sdpa_desc *d) { return d->causal != 0; }
static int has_prefix(const attn_sdpa_desc *d) { return d->prefix_lens != NULL; }
static int has_window(const attn_sdpa_desc *d) {
  return d->window_left >= 0 || d->window_right >= 0;
}
static int has_key_lens(const attn_sdpa_desc *d) { return d->key_lens != NULL; }
static int has_q_offset(const attn_sdpa_desc *d) { return d->q_offset != 0; }
static int has_q_offsets(const attn_sdpa_desc *d) { return d->q_offsets != NULL; }
static int has_bool_mask(const attn_sdpa_desc *d) { return d->bool_mask != NULL; }
static int has_add_mask(const attn_sdpa_desc *d) { return d->add_mask != NULL; }
static int has_alibi(const attn_sdpa_desc *d) { return d->alibi_slopes != NULL; }
static int has_rel_bias(const attn_sdpa_desc *d) { return d->rel_bias != NULL; }
static int has_shaw(const attn_sdpa_desc *d) { return d->shaw_k || d->shaw_v; }
static int has_block_mask(const attn_sdpa_desc *d) { return d->block_mask != NULL; }
static int has_softcap(const attn_sdpa_desc *d) { return d->softcap != 0.0f; }
static int has_sinks(const attn_sdpa_desc *d) { return d->sinks != NULL; }
static int has_dropout(const attn_sdpa_desc *d) { return d->dropout_p != 0.0f; }
static int has_mods(const attn_sdpa_desc *d) { return d->mods != NULL; }

#define ALL ATTN_SK_ALL
#define DENSE (ATTN_SK_ALL & ~ATTN_SK_VARLEN)
#define F32_LOOPS (ATTN_SK_MATH | ATTN_SK_FLASH | ATTN_SK_VARLEN)

static const attn_sdpa_modifier table[] = {
    /* masks: the key interval of each query row (attn_sdpa_key_range) */
    {"causal", "causal mask", has_causal, ALL, 0, NULL},
    {"prefix_lens", "prefix-LM", has_prefix, ALL, 0, NULL},
    {"window_left/window_right", "local window", has_window, ALL, 0, NULL},
    {"key_lens", "key padding", has_key_lens, DENSE, 1, NULL},
    {"q_offset", "query alignment", has_q_offset, DENSE, 1, NULL},
    {"q_offsets", "per-batch query alignment", has_q_offsets, ALL, 0, NULL},
    /* element masks */
    {"bool_mask", "boolean mask", has_bool_mask, DENSE, 1, NULL},
    {"add_mask", "additive mask", has_add_mask, DENSE, 1, NULL},
    {"block_mask", "block-sparse layout", has_block_mask, F32_LOOPS, 0, NULL},
    {"mods", "user score_mod / mask_mod", has_mods, ALL, 0, NULL},
    /* score modifiers */
    {"softcap", "logit softcap", has_softcap, ALL, 0, &attn_unit_softcap},
    {"alibi_slopes", "ALiBi", has_alibi, F32_LOOPS, 0, NULL},
    {"rel_bias", "T5 relative bias", has_rel_bias, F32_LOOPS, 0, NULL},
    {"shaw_k/shaw_v", "Shaw relative positions", has_shaw, F32_LOOPS, 0, NULL},
    /* the row's end and the probabilities */
    {"sinks", "attention sinks", has_sinks, ALL, 0, &attn_unit_sinks},
    {"dropout_p", "attention dropout", has_dropout, ATTN_SK_MATH | ATTN_SK_FLASH | ATTN_SK_F16, 0,
     NULL},
};

int attn_sdpa_modifier_count(void) { return (int)(sizeof table / sizeof table[0]); }

const attn_sdpa_modifier *attn_sdpa_modifier_at(int i) {
  return i >= 0 && i < attn_sdpa_modifier_count() ? &table[i] : NULL;
}

const char *attn_sdpa_kernel_names(unsigned k, char *buf, size_t n) {
  static const char *const names[] = {"math",       "f32 flash",  "bf16 flash",
                                      "fp16 flash", "int8 flash", "varlen"};
  size_t used = 0;
  buf[0] = 0;
  for (int i = 0; i < 6; i++)
    if (k & (1u << i) && used < n)
      used += (size_t)snprintf(buf + used, n - used, "%s%s", used ? ", " : "", names[i]);
  if (!used) snprintf(buf, n, "none");
  return buf;
}

attn_status attn_sdpa_modifiers_check(const attn_sdpa_desc *d, unsigned need, int any,
                                      const char *kernel) {
  for (int i = 0; i < attn_sdpa_modifier_count(); i++) {
    const attn_sdpa_modifier *m = &table[i];
    if (!m->present(d)) continue;
    const unsigned have = m->kernels & need;
    if (any ? have != 0 : have == need) continue;
    char where[128];
    if (m->dense_only && need == ATTN_SK_VARLEN)
      return attn_set_error(ATTN_EINVAL,
                            "sdpa varlen: %s (%s) has no meaning in the packed layout (lengths and "
                            "alignment come from cu_seqlens; q_offsets overrides the alignment)",
                            m->field, m->what);
    return attn_set_error(ATTN_EUNSUPPORTED,
                          "sdpa: %s (%s) is not supported by %s (it runs in: %s)", m->field,
                          m->what, kernel, attn_sdpa_kernel_names(m->kernels, where, sizeof where));
  }
  return ATTN_OK;
}
