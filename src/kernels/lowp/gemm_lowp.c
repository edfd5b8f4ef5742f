/* Low-precision GEMM driver (bf16 / fp16 / int8): the BLIS-style loop nest
 * of gemm.c — thread grid over C, ic by mc (a~ packed once per k block), pc
 * by kc, jc by nc (b~ in L2), micro-tiles — with packers that convert while
 * packing (f32 -> bf16, bf16 / f16 -> f32) into the layout each micro-kernel
 * wants (gemm_lowp_internal.h), or with the kernel's own packer. Micro-kernels
 * write a whole mr x nr tile of 32-bit accumulators; an epilogue stores it
 * into C (f32 alpha/beta, s32, or a fused dequantization); a kernel with
 * ukr_c writes the plain f32 alpha/beta result of a whole tile into C
 * itself (edge tiles, at the matrix's last rows and columns whatever the
 * thread count, go through the tile). Each element of C is computed by one thread over
 * the same k blocks in the same order (kc depends on K only), so results do
 * not depend on the thread count. */
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm/gemm_grid.h"
#include "kernels/lowp/gemm_lowp_internal.h"
#include "kernels/kern.h"
#include "kernels/util.h"

#ifdef _OPENMP
#include <omp.h>
#endif


static size_t type_size(attn_lowp_type t) {
  return t == LOWP_F32 || t == LOWP_F32R ? 4 : t == LOWP_BF16 || t == LOWP_F16 ? 2 : 1;
}

/* n elements of src (type in, contiguous) converted to out, into dst. */
static void convert_run(const void *src, attn_lowp_type in, int64_t n, attn_lowp_type out,
                        void *dst) {
  const attn_row_ops *ro = &attn_kern_get()->row;
  if (in == out) {
    memcpy(dst, src, (size_t)n * type_size(in));
  } else if (in == LOWP_F32R && out == LOWP_F32) { /* through bf16 */
    ro->f32_round_bf16(src, dst, n);
  } else if (in == LOWP_F32R && out == LOWP_BF16) {
    ro->f32_to_bf16(src, dst, n);
  } else if (out == LOWP_F32 && in == LOWP_BF16) {
    ro->bf16_to_f32(src, dst, n);
  } else if (out == LOWP_F32 && in == LOWP_F16) {
    ro->f16_to_f32(src, dst, n);
  } else if (out == LOWP_BF16 && in == LOWP_F32) {
    ro->f32_to_bf16(src, dst, n);
  } else { /* u8 <-> s8 never mixed by the callers; bytes copied */
    memcpy(dst, src, (size_t)n);
  }
}

/* Copies n elements of size es from s (contiguous) to d with a stride of
 * `stride` elements. Either side may be unaligned (memcpy of a constant
 * size compiles to one move). */
static void scatter(const void *s, void *d, int64_t n, int64_t stride, size_t es) {
  const char *a = s;
  char *b = d;
  if (es == 8)
    for (int64_t i = 0; i < n; i++) memcpy(b + i * stride * 8, a + i * 8, 8);
  else if (es == 4)
    for (int64_t i = 0; i < n; i++) memcpy(b + i * stride * 4, a + i * 4, 4);
  else if (es == 2)
    for (int64_t i = 0; i < n; i++) memcpy(b + i * stride * 2, a + i * 2, 2);
  else
    for (int64_t i = 0; i < n; i++) b[i * stride] = a[i];
}

/* out[r] = the g runs t (run i at t + i*ld elements, g*es = 4 bytes)
 * interleaved: element r of run i in bits [i*8*es, (i+1)*8*es) of word r. */
static void interleave(const void *t, int g, int64_t ld, int64_t n, uint32_t *out) {
  void (*fast)(const void *, int, int64_t, int64_t, uint32_t *) = attn_kern_get()->lowp.interleave;
  if (fast) {
    fast(t, g, ld, n, out);
    return;
  }
  if (g == 2) {
    const uint16_t *a = t, *b = a + ld;
    for (int64_t r = 0; r < n; r++) out[r] = (uint32_t)a[r] | (uint32_t)b[r] << 16;
  } else {
    const uint8_t *a = t, *b = a + ld, *c = b + ld, *d = c + ld;
    for (int64_t r = 0; r < n; r++)
      out[r] = (uint32_t)a[r] | (uint32_t)b[r] << 8 | (uint32_t)c[r] << 16 | (uint32_t)d[r] << 24;
  }
}


/* Panels of w rows for rows [r0, r0+nrows) and depth [p0, p0+kc) of src,
 * each kcp deep (layout in gemm_lowp_internal.h); tmp holds
 * 4 * max(kcp, nrows) bytes. A group of g depth steps of one row is
 * G = g * es bytes: moved as one 16-, 32- or 64-bit word, or with memcpy
 * when larger. Source rows are read front to back: where op(X)'s rows are
 * strided (depth contiguous) one panel row at a time, else one depth step
 * (or group) across all nrows at once, so no panel reads a narrow column
 * of a wide matrix. */
static void pack(const attn_lowp_src *s, int64_t r0, int64_t nrows, int64_t p0, int64_t kc,
                 int64_t kcp, int w, int g, attn_lowp_type out, void *dst, void *tmp) {
  const size_t es = type_size(out), ies = type_size(s->type), G = (size_t)g * es;
  const size_t panel_size = (size_t)w * (size_t)kcp * es;
  const char *x = s->x;
  const int64_t ng = attn_ceil_div(kc, g); /* groups holding data */
  for (int64_t rr = 0; rr < nrows; rr += w)
    if (nrows - rr < w || kc < kcp) memset((char *)dst + (size_t)(rr / w) * panel_size, 0, panel_size);
  if (s->sp == 1) { /* contiguous along depth: one run per row */
    const int64_t nfull = kc / g; /* whole groups; a partial one is padded */
    for (int64_t r = 0; r < nrows; r++) {
      const char *src = x + ((r0 + r) * s->sr + p0) * (int64_t)ies, *run = src;
      if (s->type != out) {
        convert_run(src, s->type, kc, out, tmp);
        run = tmp;
      }
      char *d = (char *)dst + (size_t)(r / w) * panel_size + (size_t)(r % w) * G;
      if (G == 2 || G == 4 || G == 8)
        scatter(run, d, nfull, w, G);
      else if (G == 64) /* AMX rows: a constant size the compiler inlines */
        for (int64_t q = 0; q < nfull; q++) memcpy(d + (size_t)(q * w) * 64, run + q * 64, 64);
      else
        for (int64_t q = 0; q < nfull; q++) memcpy(d + (size_t)(q * w) * G, run + q * G, G);
      if (nfull < ng) /* the rest of the depth, zero-padded (the panel is zeroed) */
        memcpy(d + (size_t)(nfull * w) * G, run + nfull * G, (size_t)(kc - nfull * g) * es);
    }
  } else if (G == 4 && g > 1) { /* g depth steps of one column make one 32-bit word */
    for (int64_t q = 0; q < ng; q++) {
      for (int i = 0; i < g; i++) {
        char *ti = (char *)tmp + (size_t)i * (size_t)nrows * es;
        if (q * g + i < kc)
          convert_run(x + ((p0 + q * g + i) * s->sp + r0) * (int64_t)ies, s->type, nrows, out, ti);
        else
          memset(ti, 0, (size_t)nrows * es);
      }
      for (int64_t rr = 0; rr < nrows; rr += w)
        interleave((char *)tmp + (size_t)rr * es, g, nrows, attn_min64(w, nrows - rr),
                   (uint32_t *)((char *)dst + (size_t)(rr / w) * panel_size + (size_t)(q * w) * G));
    }
  } else if (g == 32 && w == 32 && out == LOWP_BF16 &&
             (s->type == LOWP_BF16 || s->type == LOWP_F32R) && attn_kern_get()->lowp.pack_t32) {
    /* AMX A panels of a transposed operand (the dW GEMMs): 16 x 16 transposes */
    attn_kern_get()->lowp.pack_t32(x + (p0 * s->sp + r0) * (int64_t)ies, s->type == LOWP_F32R,
                                   s->sp, nrows, kc, kcp, dst);
  } else { /* contiguous along rows: one depth step across all rows at a time */
    for (int64_t p = 0; p < kc; p++) {
      convert_run(x + ((p0 + p) * s->sp + r0) * (int64_t)ies, s->type, nrows, out, tmp);
      for (int64_t rr = 0; rr < nrows; rr += w) {
        char *d = (char *)dst + (size_t)(rr / w) * panel_size + (size_t)((p / g) * w * g + p % g) * es;
        if (g == 1)
          memcpy(d, (char *)tmp + (size_t)rr * es, (size_t)attn_min64(w, nrows - rr) * es);
        else
          scatter((char *)tmp + (size_t)rr * es, d, attn_min64(w, nrows - rr), g, es);
      }
    }
  }
}

typedef struct {
  const attn_lowp_kernel *kr;
  const attn_lowp_src *A, *B;
  const attn_lowp_epi *epi;
  int64_t M, N, K;
  int64_t kc, kcp_max; /* depth of one k block; its padded size */
  int64_t mc, nc;
  int tm, tn;
  int64_t mp, np;
} plan;

enum { TILE_MAX = 32 * 32 };

static void chunk(const plan *g, int64_t m0, int64_t m1, int64_t n0, int64_t n1, char *abuf,
                  char *bbuf, void *tmp) {
  const attn_lowp_kernel *kr = g->kr;
  const int mr = kr->mr, nr = kr->nr;
  const size_t esa = type_size(kr->pa), esb = type_size(kr->pb);
  const attn_lowp_epi *e = g->epi;
  const int direct = e->f32_direct && kr->ukr_c && !kr->int_acc;
  uint32_t tile[TILE_MAX] __attribute__((aligned(64)));
  if (kr->begin) kr->begin();
  for (int64_t ic = m0; ic < m1; ic += g->mc) {
    int64_t mc = attn_min64(g->mc, m1 - ic);
    for (int64_t pc = 0; pc < g->K; pc += g->kc) {
      int64_t kc = attn_min64(g->kc, g->K - pc);
      int64_t kcp = g->B->packed ? g->B->kp : attn_round_up(kc, kr->kgroup);
      if (!kr->pack || !kr->pack(g->A, ic, mc, pc, kc, kcp, mr, abuf))
        pack(g->A, ic, mc, pc, kc, kcp, mr, kr->ga, kr->pa, abuf, tmp);
      for (int64_t jc = n0; jc < n1; jc += g->nc) {
        int64_t nc = attn_min64(g->nc, n1 - jc);
        const char *bp = bbuf; /* prepacked: the panels of columns jc.. */
        if (g->B->packed)
          bp = (const char *)g->B->packed + (size_t)(jc * kcp) * esb;
        else if (!kr->pack || !kr->pack(g->B, jc, nc, pc, kc, kcp, nr, bbuf))
          pack(g->B, jc, nc, pc, kc, kcp, nr, kr->gb, kr->pb, bbuf, tmp);
        for (int64_t ir = 0; ir < mc; ir += mr) {
          const char *ap = abuf + (size_t)(ir * kcp) * esa;
          int64_t rows = attn_min64(mr, mc - ir);
          for (int64_t jr = 0; jr < nc; jr += nr) {
            const char *b = bp + (size_t)(jr * kcp) * esb;
            int64_t cols = attn_min64(nr, nc - jr);
            if (direct && rows == mr && cols == nr) { /* whole tile: straight into C */
              float *c = (float *)e->C + (ic + ir) * e->ldc + jc + jr;
              kr->ukr_c(kcp, (const float *)ap, (const float *)b, c, e->ldc, e->alpha,
                        pc == 0 ? e->beta : 1.0f);
              continue;
            }
            if (rows == 1 && kr->ukr_row)
              kr->ukr_row(kcp, ap, b, tile);
            else
              kr->ukr(kcp, ap, b, tile);
            e->fn(e, tile, nr, ic + ir, jc + jr, rows, cols, pc == 0);
          }
        }
      }
    }
  }
  if (kr->end) kr->end();
}

static void chunk_range(const plan *g, int t, int64_t *m0, int64_t *m1, int64_t *n0,
                        int64_t *n1) {
  attn_gemm_grid_chunk(g->M, g->N, g->mp, g->np, g->tm, g->tn, g->kr->mr, g->kr->nr, t, m0, m1,
                       n0, n1);
}

attn_status attn_lowp_gemm_run(const attn_lowp_kernel *kr, const attn_lowp_src *A,
                               const attn_lowp_src *B, int64_t M, int64_t N, int64_t K,
                               const attn_lowp_epi *epi, int single_block) {
  plan g = {kr, A, B, epi, M, N, K, 0, 0, 0, 0, 1, 1, attn_ceil_div(M, kr->mr), attn_ceil_div(N, kr->nr)};
  /* k blocks: K split evenly into blocks of at most kr->kc, each a multiple
   * of kgroup except the last (padded) */
  g.kc = single_block ? K : attn_round_up(attn_ceil_div(K, attn_ceil_div(K, kr->kc)), kr->kgroup);
  g.kcp_max = attn_round_up(g.kc, kr->kgroup);
  if (B->packed) {
    if (!single_block || B->pnr != kr->nr || B->pg != kr->gb || B->kp % kr->kgroup ||
        B->kp < K)
      return attn_set_error(ATTN_EINVAL, "gemm %s: prepacked B (nr %d, g %d, depth %lld) does "
                            "not fit this kernel", kr->name, B->pnr, B->pg, (long long)B->kp);
    g.kcp_max = B->kp;
  }
  int nt = attn_gemm_grid_plan(M, N, K, g.mp, g.np, kr->mr, kr->nr, kr->mc,
                               attn_get_num_threads(), 524288.0, &g.tm, &g.tn);
  int64_t rows = attn_ceil_div(g.mp, g.tm) * kr->mr, cols = attn_ceil_div(g.np, g.tn) * kr->nr;
  g.mc = attn_ceil_div(attn_ceil_div(rows, attn_ceil_div(rows, kr->mc)), kr->mr) * kr->mr;
  g.nc = attn_min64(attn_round_up(kr->nc, kr->nr), cols);
  size_t asize = (size_t)attn_round_up(g.mc * g.kcp_max * (int64_t)type_size(kr->pa), 64);
  size_t bsize = (size_t)attn_round_up(g.nc * g.kcp_max * (int64_t)type_size(kr->pb), 64);
  size_t tsize = (size_t)attn_round_up(4 * attn_max64(attn_max64(g.kcp_max, g.mc), attn_max64(g.nc, 64)) + 64, 64);
  size_t per_thread = asize + bsize + tsize;
  char *buf = aligned_alloc(64, per_thread * (size_t)nt);
  if (!buf)
    return attn_set_error(ATTN_ENOMEM, "gemm %s: cannot allocate %zu bytes of packing buffers",
                          kr->name, per_thread * (size_t)nt);
#ifdef _OPENMP
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
  {
    int t = 0, T = 1;
#ifdef _OPENMP
    t = omp_get_thread_num();
    T = omp_get_num_threads();
#endif
    char *abuf = buf + (size_t)t * per_thread, *bbuf = abuf + asize, *tmp = bbuf + bsize;
    for (int c = t; c < nt; c += T) {
      int64_t m0, m1, n0, n1;
      chunk_range(&g, c, &m0, &m1, &n0, &n1);
      if (m0 < m1 && n0 < n1) chunk(&g, m0, m1, n0, n1, abuf, bbuf, tmp);
    }
  }
  free(buf);
  return ATTN_OK;
}

void attn_lowp_epi_f32(const attn_lowp_epi *e, const void *t, int ldt, int64_t i0, int64_t j0,
                       int64_t rows, int64_t cols, int first) {
  const float *tile = t;
  float alpha = e->alpha, beta = first ? e->beta : 1.0f;
  for (int64_t r = 0; r < rows; r++) {
    float *c = (float *)e->C + (i0 + r) * e->ldc + j0;
    const float *tr = tile + r * ldt;
    if (beta == 0.0f)
      for (int64_t j = 0; j < cols; j++) c[j] = alpha * tr[j];
    else
      for (int64_t j = 0; j < cols; j++) c[j] = alpha * tr[j] + beta * c[j];
  }
}

void attn_lowp_epi_s32(const attn_lowp_epi *e, const void *t, int ldt, int64_t i0, int64_t j0,
                       int64_t rows, int64_t cols, int first) {
  const int32_t *tile = t;
  for (int64_t r = 0; r < rows; r++) {
    int32_t *c = (int32_t *)e->C + (i0 + r) * e->ldc + j0;
    const int32_t *tr = tile + r * ldt;
    if (first)
      memcpy(c, tr, sizeof(int32_t) * (size_t)cols);
    else /* unsigned add: two's-complement wrap without UB (never reached for K <= max) */
      for (int64_t j = 0; j < cols; j++) c[j] = (int32_t)((uint32_t)c[j] + (uint32_t)tr[j]);
  }
}

attn_status attn_lowp_validate(const char *fn, int transa, int transb, int64_t M, int64_t N,
                               int64_t K, const void *A, int64_t lda, const void *B, int64_t ldb,
                               const void *C, int64_t ldc) {
  if (M < 0 || N < 0 || K < 0)
    return attn_set_error(ATTN_EINVAL, "%s: negative size M=%lld N=%lld K=%lld", fn,
                          (long long)M, (long long)N, (long long)K);
  if (M == 0 || N == 0) return ATTN_OK;
  if (!C) return attn_set_error(ATTN_EINVAL, "%s: C is NULL", fn);
  if (K > 0 && !A) return attn_set_error(ATTN_EINVAL, "%s: A is NULL", fn);
  if (K > 0 && !B) return attn_set_error(ATTN_EINVAL, "%s: B is NULL", fn);
  int64_t wa = transa ? M : K, wb = transb ? K : N;
  if (K > 0 && lda < wa)
    return attn_set_error(ATTN_EINVAL, "%s: lda=%lld < %lld (row width of A%s)", fn,
                          (long long)lda, (long long)wa, transa ? ", stored K x M" : "");
  if (K > 0 && ldb < wb)
    return attn_set_error(ATTN_EINVAL, "%s: ldb=%lld < %lld (row width of B%s)", fn,
                          (long long)ldb, (long long)wb, transb ? ", stored N x K" : "");
  if (ldc < N)
    return attn_set_error(ATTN_EINVAL, "%s: ldc=%lld < N=%lld", fn, (long long)ldc,
                          (long long)N);
  return ATTN_OK;
}

attn_lowp_src attn_lowp_src_a(const void *A, attn_lowp_type t, int transa, int64_t lda) {
  attn_lowp_src s = {A, t, transa ? 1 : lda, transa ? lda : 1, NULL, 0, 0, 0};
  return s;
}

attn_lowp_src attn_lowp_src_b(const void *B, attn_lowp_type t, int transb, int64_t ldb) {
  attn_lowp_src s = {B, t, transb ? ldb : 1, transb ? 1 : ldb, NULL, 0, 0, 0};
  return s;
}

attn_status attn_lowp_prepack_b(const attn_lowp_src *B, int64_t N, int64_t K, int nr, int g,
                                int64_t kp, attn_lowp_type out, void *dst) {
  void *tmp = malloc((size_t)(4 * attn_max64(attn_max64(kp, N), nr) + 64));
  if (!tmp) return attn_set_error(ATTN_ENOMEM, "prepack: cannot allocate a row of %lld", (long long)kp);
  pack(B, 0, N, 0, K, kp, nr, g, out, dst, tmp);
  free(tmp);
  return ATTN_OK;
}

/* ---- f32-output GEMMs (bf16, fp16) ---------------------------------------- */
attn_status attn_lowp_gemm_f32out(const char *fn, const char *dtype, attn_lowp_path path,
                                  int transa, int transb, int64_t M, int64_t N, int64_t K,
                                  float alpha, const void *A, attn_lowp_type ta, int64_t lda,
                                  const void *B, attn_lowp_type tb, int64_t ldb, float beta,
                                  float *C, int64_t ldc) {
  attn_status st = attn_lowp_validate(fn, transa, transb, M, N, K, A, lda, B, ldb, C, ldc);
  if (st != ATTN_OK) return st;
  const attn_lowp_kernel *kr;
  st = attn_lowp_select(path, dtype, &kr);
  if (st != ATTN_OK) return st;
  if (M == 0 || N == 0) return ATTN_OK;
  if (K == 0) { /* C = beta * C */
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
    return ATTN_OK;
  }
  attn_lowp_src a = attn_lowp_src_a(A, ta, transa, lda), b = attn_lowp_src_b(B, tb, transb, ldb);
  attn_lowp_epi e = {attn_lowp_epi_f32, C, ldc, alpha, beta, NULL, 1};
  if (attn_kern_get()->lowp.epi_f32) e.fn = attn_kern_get()->lowp.epi_f32;
  return attn_lowp_gemm_run(kr, &a, &b, M, N, K, &e, 0);
}
