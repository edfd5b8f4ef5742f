/* The Unicode classes GPT-2's pre-tokenizer pattern names: \p{L} (letters),
 * \p{N} (numbers) and \s (white space), as code point ranges generated from
 * the Python `regex` module that OpenAI's encoder.py matches with
 * (tools/gen_unicode_classes.py writes unicode_tables.c). Internal. */
#ifndef ATTN_APPS_UNICODE_CLASSES_H
#define ATTN_APPS_UNICODE_CLASSES_H

#include <stdint.h>

typedef struct {
  uint32_t lo, hi; /* inclusive */
} attn_uc_range;

extern const attn_uc_range attn_uc_letter[], attn_uc_number[], attn_uc_space[];
extern const int attn_uc_letter_n, attn_uc_number_n, attn_uc_space_n;

typedef enum { ATTN_UC_OTHER = 0, ATTN_UC_LETTER, ATTN_UC_NUMBER, ATTN_UC_SPACE } attn_uc_class;

/* The class of code point cp (ATTN_UC_OTHER for anything not in the three,
 * including values above U+10FFFF). */
attn_uc_class attn_uc_classify(uint32_t cp);

#endif
