/* The SDPA entry (attn/sdpa.h): attn_sdpa_forward / attn_sdpa_backward read
 * the call's element type, layout and path from attn_sdpa_args, check what
 * the descriptor alone cannot (the args' fields and their combinations), and
 * route to one kernel: f32 math or flash (the f32 choice at the end), the
 * bf16 / fp16 / int8 flash kernels, the packed varlen runner, or, for bf16 /
 * fp16 with path math, the f32 math path on widened copies
 * (sdpa_entry_widen.c). The kernels validate the descriptor themselves. */
#include <string.h>

#include "attn/sdpa_bf16.h"
#include "attn/sdpa_deprecated.h"
#include "attn/sdpa_f16.h"
#include "attn/sdpa_i8.h"
#include "attn/sdpa_probs.h"
#include "attn/tensor.h"
#include "kernels/sdpa/sdpa_entry.h"
#include "kernels/sdpa/sdpa_internal.h"
#include "kernels/sdpa/sdpa_modifiers.h"
#include "kernels/sdpa/sdpa_varlen_run.h"

static const char *const path_names[] = {"auto", "math", "flash", "portable", "simd", "amx", "f32"};
#define NPATHS ((int)(sizeof path_names / sizeof path_names[0]))

attn_status attn_sdpa_path_from_name(const char *name, attn_sdpa_path *out) {
  if (!name || !out) return attn_set_error(ATTN_EINVAL, "sdpa path: NULL argument");
  for (int i = 0; i < NPATHS; i++)
    if (!strcmp(name, path_names[i])) {
      *out = (attn_sdpa_path)i;
      return ATTN_OK;
    }
  return attn_set_error(
      ATTN_EINVAL, "sdpa path '%s' unknown (auto, math, flash, portable, simd, amx or f32)", name);
}

const char *attn_sdpa_path_name(attn_sdpa_path p) {
  return (int)p >= 0 && (int)p < NPATHS ? path_names[p] : "unknown";
}

static const char *dtype_word(int t) {
  switch (t) {
  case ATTN_F32: return "f32";
  case ATTN_BF16: return "bf16";
  case ATTN_F16: return "fp16";
  case ATTN_I8: return "int8";
  }
  return "?";
}

/* The low-precision kernels' own path for a, or -1 for math. */
static attn_lowp_path lowp_path(attn_sdpa_path p) {
  switch (p) {
  case ATTN_PATH_PORTABLE: return ATTN_LOWP_PORTABLE;
  case ATTN_PATH_SIMD: return ATTN_LOWP_SIMD;
  case ATTN_PATH_AMX: return ATTN_LOWP_AMX;
  case ATTN_PATH_F32: return ATTN_LOWP_F32;
  default: return ATTN_LOWP_AUTO;
  }
}

int attn_sdpa_path_available(int dtype, attn_sdpa_path path) {
  if ((int)path < 0 || (int)path >= NPATHS) return 0;
  switch (dtype) {
  case ATTN_F32: return path <= ATTN_PATH_FLASH;
  case ATTN_BF16: return path <= ATTN_PATH_FLASH || attn_sdpa_bf16_path_available(lowp_path(path));
  case ATTN_F16: return path <= ATTN_PATH_FLASH || attn_sdpa_f16_path_available(lowp_path(path));
  case ATTN_I8:
    return path != ATTN_PATH_MATH && path != ATTN_PATH_F32 &&
           attn_sdpa_i8_path_available(lowp_path(path));
  }
  return 0;
}

/* The args' own fields and the combinations no kernel has. */
static attn_status check_args(const attn_sdpa_desc *d, const attn_sdpa_args *a, int backward) {
  if (!d || !a) return attn_set_error(ATTN_EINVAL, "sdpa: NULL %s", !d ? "descriptor" : "args");
  if (a->dtype != ATTN_F32 && a->dtype != ATTN_BF16 && a->dtype != ATTN_F16 && a->dtype != ATTN_I8)
    return attn_set_error(ATTN_EINVAL,
                          "sdpa: args.dtype %d is not an attention element type (ATTN_F32, "
                          "ATTN_BF16, ATTN_F16 or ATTN_I8)",
                          a->dtype);
  if ((int)a->path < 0 || (int)a->path >= NPATHS)
    return attn_set_error(
        ATTN_EINVAL, "sdpa: args.path %d unknown (auto, math, flash, portable, simd, amx, f32)",
        (int)a->path);
  const char *dt = dtype_word(a->dtype);
  if (a->dtype == ATTN_I8 && backward)
    return attn_set_error(ATTN_EUNSUPPORTED,
                          "sdpa: int8 attention has no backward (it is for inference; train in "
                          "f32 or bf16)");
  /* the paths each element type has (bits 1 << attn_sdpa_path) */
  const unsigned A = 1u << ATTN_PATH_AUTO, M = 1u << ATTN_PATH_MATH, F = 1u << ATTN_PATH_FLASH,
                 P = 1u << ATTN_PATH_PORTABLE, S = 1u << ATTN_PATH_SIMD, X = 1u << ATTN_PATH_AMX,
                 W = 1u << ATTN_PATH_F32;
  const unsigned has = a->dtype == ATTN_F32    ? A | M | F
                       : a->dtype == ATTN_BF16 ? A | M | F | P | S | X | W
                       : a->dtype == ATTN_F16  ? A | M | F | P | S
                                               : A | F | P | S | X;
  if (!(has & (1u << a->path)))
    return attn_set_error(a->dtype == ATTN_F32 ? ATTN_EINVAL : ATTN_EUNSUPPORTED,
                          "sdpa: %s attention has no path '%s' (%s)%s", dt,
                          attn_sdpa_path_name(a->path),
                          a->dtype == ATTN_F32   ? "auto, math or flash; the others are the "
                                                   "low-precision kernels'"
                          : a->dtype == ATTN_F16 ? "auto, math, flash, portable or simd"
                          : a->dtype == ATTN_I8  ? "auto, flash, portable, simd or amx"
                                                 : "?",
                          a->dtype == ATTN_I8 && a->path == ATTN_PATH_MATH
                              ? "; its reference is the f32 math path on the same f32 q, k, v"
                              : "");
  if (a->probs_rows) {
    if (backward)
      return attn_set_error(ATTN_EINVAL, "sdpa: args.probs_rows is a forward's (the backward "
                                         "reads out and lse)");
    if (a->dtype != ATTN_F32 || a->varlen)
      return attn_set_error(ATTN_EUNSUPPORTED,
                            "sdpa: args.probs_rows recomputes f32 dense calls' probabilities "
                            "(this call: %s%s)",
                            dt, a->varlen ? ", packed varlen" : "");
    return ATTN_OK;
  }
  if (!backward && a->probs) {
    if (a->varlen)
      return attn_set_error(ATTN_EUNSUPPORTED,
                            "sdpa: probs are not returned for a packed varlen call");
    if (a->path != ATTN_PATH_AUTO && a->path != ATTN_PATH_MATH)
      return attn_set_error(ATTN_EUNSUPPORTED,
                            "sdpa: the %s %s path cannot return probs (they come from the math "
                            "path: path auto or math)",
                            dt, attn_sdpa_path_name(a->path));
    if (a->dtype == ATTN_I8)
      return attn_set_error(ATTN_EUNSUPPORTED, "sdpa: int8 attention cannot return probs");
  }
  return ATTN_OK;
}

/* bf16 / fp16 on the f32 math path (widened copies): path math, or auto
 * when the forward asks for probs. */
static int widened(const attn_sdpa_args *a, int backward) {
  return (a->dtype == ATTN_BF16 || a->dtype == ATTN_F16) &&
         (a->path == ATTN_PATH_MATH || (!backward && a->path == ATTN_PATH_AUTO && a->probs));
}

/* The descriptor's modifiers against the kernel the call routes to
 * (sdpa_modifiers.h): one refusal form for every kernel. */
static attn_status check_modifiers(const attn_sdpa_desc *d, const attn_sdpa_args *a, int backward) {
  unsigned need;
  int any = 0;
  const char *kernel;
  if (a->path == ATTN_PATH_MATH || widened(a, backward)) {
    need = ATTN_SK_MATH, kernel = "the math path";
  } else if (a->dtype == ATTN_F32) {
    any = a->path == ATTN_PATH_AUTO; /* flash, or else math */
    need = any ? ATTN_SK_FLASH | ATTN_SK_MATH : ATTN_SK_FLASH;
    kernel = any ? "f32 attention" : "the f32 flash kernel";
  } else if (a->dtype == ATTN_BF16) {
    need = ATTN_SK_BF16, kernel = "the bf16 flash kernel";
  } else if (a->dtype == ATTN_F16) {
    need = ATTN_SK_F16, kernel = "the fp16 flash kernel";
  } else {
    need = ATTN_SK_I8, kernel = "the int8 flash kernel";
  }
  attn_status st = attn_sdpa_modifiers_check(d, need, any, kernel);
  if (!st && a->varlen)
    st = attn_sdpa_modifiers_check(d, ATTN_SK_VARLEN, 0, "the packed varlen layout");
  return st;
}

/* f32 on the dense layout: sdpa_f32.c's choice (path = backend). */
static attn_status forward_f32(const attn_sdpa_desc *d, const attn_sdpa_args *a) {
  return attn_sdpa_forward_f32(d, (attn_backend)a->path, a->q, a->k, a->v, a->out, a->lse,
                               a->probs);
}

attn_status attn_sdpa_forward(const attn_sdpa_desc *d, const attn_sdpa_args *a) {
  attn_status st = check_args(d, a, 0);
  if (st) return st;
  if (a->probs_rows) /* chosen rows' probabilities from lse (sdpa_probs.c checks its modifiers) */
    return attn_sdpa_probs_rows_f32(d, a->q, a->k, a->lse, a->probs_rows, a->probs);
  if ((st = check_modifiers(d, a, 0))) return st;
  const attn_lowp_path lp = lowp_path(a->path);
  if (widened(a, 0)) return attn_sdpa_widened_run(d, a, 0);
  if (a->varlen) {
    switch (a->dtype) {
    case ATTN_F32:
      return attn_sdpa_varlen_forward(d, a->varlen, (attn_backend)a->path, a->q, a->k, a->v, a->out,
                                      a->lse);
    case ATTN_I8:
      return attn_sdpa_varlen_lowp_forward(ATTN_I8, lp, d, a->varlen, a->q, a->k, a->v, a->out,
                                           a->lse);
    default:
      return attn_sdpa_varlen_lowp_forward(a->dtype, lp, d, a->varlen, a->q, a->k, a->v, a->out,
                                           a->lse);
    }
  }
  switch (a->dtype) {
  case ATTN_F32: return forward_f32(d, a);
  case ATTN_BF16: return attn_sdpa_forward_bf16_path(lp, d, a->q, a->k, a->v, a->out, a->lse);
  case ATTN_F16: return attn_sdpa_forward_f16_path(lp, d, a->q, a->k, a->v, a->out, a->lse);
  default: return attn_sdpa_forward_i8_path(lp, d, a->q, a->k, a->v, a->out, a->lse);
  }
}

attn_status attn_sdpa_backward(const attn_sdpa_desc *d, const attn_sdpa_args *a) {
  attn_status st = check_args(d, a, 1);
  if (st || (st = check_modifiers(d, a, 1))) return st;
  const attn_lowp_path lp = lowp_path(a->path);
  if (widened(a, 1)) return attn_sdpa_widened_run(d, a, 1);
  if (a->varlen) {
    if (a->dtype == ATTN_F32)
      return attn_sdpa_varlen_backward(d, a->varlen, (attn_backend)a->path, a->q, a->k, a->v,
                                       a->out, a->lse, a->dout, a->dq, a->dk, a->dv);
    return attn_sdpa_varlen_lowp_backward(a->dtype, lp, d, a->varlen, a->q, a->k, a->v, a->out,
                                          a->lse, a->dout, a->dq, a->dk, a->dv);
  }
  switch (a->dtype) {
  case ATTN_F32:
    return attn_sdpa_backward_f32(d, (attn_backend)a->path, a->q, a->k, a->v, a->out, a->lse,
                                  a->dout, a->dq, a->dk, a->dv);
  case ATTN_BF16:
    return attn_sdpa_backward_bf16_path(lp, d, a->q, a->k, a->v, a->out, a->lse, a->dout, a->dq,
                                        a->dk, a->dv);
  default:
    return attn_sdpa_backward_f16_path(lp, d, a->q, a->k, a->v, a->out, a->lse, a->dout, a->dq,
                                       a->dk, a->dv);
  }
}

/* 0.1's probabilities call (attn/sdpa_probs.h, deprecated): the entry with
 * args.probs_rows */
attn_status attn_sdpa_probs_f32(const attn_sdpa_desc *d, const float *q, const float *k,
                                const float *lse, int64_t b, int64_t h, int64_t row0,
                                int64_t nrows, float *probs) {
  const attn_sdpa_rows rows = {b, h, row0, nrows};
  const attn_sdpa_args a = {.dtype = ATTN_F32, .q = q, .k = k, .lse = (float *)lse, .probs = probs,
                            .probs_rows = &rows};
  return attn_sdpa_forward(d, &a);
}
