/* The kernels' interface to nn/ and train/ (iface.h): the active level's
 * kernels, read from its table (kern.h). */
#include "kernels/iface.h"
#include "kernels/kern.h"

attn_adam_fn attn_kernels_adam(void) { return attn_kern_get()->row.adam; }

attn_f32_to_f16_fn attn_kernels_f32_to_f16(void) { return attn_kern_get()->row.f32_to_f16; }

attn_dequant_row_fn attn_kernels_dequant_row(void) { return attn_kern_get()->row.dequant_row; }

attn_bf16_epi_piece_fn attn_kernels_bf16_epi_piece(void) {
  return attn_kern_get()->lowp.bf16_epi_piece;
}

attn_bf16_convert_rows_fn attn_kernels_bf16_convert_rows(void) {
  return attn_kern_get()->lowp.bf16_convert_rows;
}
