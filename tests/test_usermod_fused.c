/* User score modifiers in the fused whole tiles of the f32 flash forward
 * (attn_flash_mod.user, src/kernels/sdpa/sdpa_usermod_fused.c): wherever the
 * level's kernel set has tile_forward_mod, score_mod and score_mod_row
 * reach the fused tiles (counted) and give the same bits as the steps
 * (the same set without tile_forward_mod: logits, attn_usermod_tile,
 * softmax_update, p·v): whole and partial tiles (causal, q_offset of
 * either sign, Lk off the 64-key grid), GQA, Dv != D, a callback that
 * returns -inf for some pairs; with mask_mod, softcap or ALiBi built in,
 * the hook stays off (their order against the callback is the steps'). */
#include <stdint.h>

#include "attn/sdpa_mods.h"
#include "harness.h"
#include "kernels/kern.h"
#include "kernels/flash/sdpa_flash.h"
#include "usermod_callbacks.h"

static float drop_some(float s, int64_t b, int64_t h, int64_t q, int64_t kv, void *u) {
  (void)b, (void)h, (void)u;
  return (q + 3 * kv) % 7 == 2 ? -INFINITY : 0.5f * s;
}

/* ALiBi of usermod_callbacks.h as a row op */
static void alibi_row(float *s, int64_t n, int64_t b, int64_t h, int64_t q, int64_t kv0, void *u) {
  for (int64_t c = 0; c < n; c++)
    s[c] = alibi_score(s[c], b, h, q, kv0 + c, u);
}

static const attn_flash_ops *real;
static long hooked_calls, all_calls;
static void counting(const attn_flash_mod *mod, int G, int64_t D, int64_t Dv, const float *q,
                     int64_t ldq, const float *kt, const float *v, int64_t ldv, float scale,
                     float *s, float *o, int64_t ldo, float *m, float *l, const float *ktn,
                     const float *vn, int64_t ldvn) {
  /* the tiles run on every thread: the counts are atomic (a plain ++ lost
   * increments under ASan on a busy machine, 1 run in 4) */
  __atomic_add_fetch(&hooked_calls, mod->user != NULL, __ATOMIC_RELAXED);
  __atomic_add_fetch(&all_calls, 1, __ATOMIC_RELAXED);
  real->tile_forward_mod(mod, G, D, Dv, q, ldq, kt, v, ldv, scale, s, o, ldo, m, l, ktn, vn, ldvn);
}

static void fill(float *x, int64_t n, unsigned seed) {
  unsigned s = seed * 2654435761u + 7u;
  for (int64_t i = 0; i < n; i++) {
    s = s * 1664525u + 1013904223u;
    x[i] = (float)((s >> 8) & 0xffff) / 16384.0f - 2.0f;
  }
}

typedef struct {
  int B, Hq, Hkv, Lq, Lk, D, Dv, causal, q_offset, kind; /* kind: 0 alibi, 1 softcap, 2 drop, 3 row */
  int builtin; /* 0 none, 1 softcap, 2 ALiBi, 3 a mask_mod: the hook stays off */
} fcase;

static void run_case(const fcase *c, const attn_flash_ops *counted, const attn_flash_ops *steps,
                     unsigned seed) {
  attn_sdpa_desc d;
  attn_sdpa_desc_init(&d, c->B, c->Hq, c->Hkv, c->Lq, c->Lk, c->D, c->Dv);
  d.causal = c->causal, d.q_offset = c->q_offset;
  float slopes[8];
  CHECK_OK(attn_alibi_slopes(c->Hq, slopes));
  mctx u = {.q_offset = c->q_offset, .slopes = slopes, .H = c->Hq, .cap = 4.0f};
  attn_sdpa_mods mods = {.user = &u};
  if (c->kind == 0) /* (the derivatives: the backward's, unused here) */
    mods.score_mod = alibi_score, mods.score_mod_grad = one_grad,
    mods.score_mod_param_grad = alibi_param_grad;
  if (c->kind == 1) mods.score_mod = softcap_score, mods.score_mod_grad = softcap_grad;
  if (c->kind == 2) mods.score_mod = drop_some;
  if (c->kind == 3) mods.score_mod_row = alibi_row;
  if (c->builtin == 1) d.softcap = 20.0f;
  if (c->builtin == 2) d.alibi_slopes = slopes;
  if (c->builtin == 3) mods.mask_mod = causal_mask;
  d.mods = &mods;
  const int64_t nq = (int64_t)c->B * c->Hq * c->Lq * c->D, nk = (int64_t)c->B * c->Hkv * c->Lk * c->D,
                nv = (int64_t)c->B * c->Hkv * c->Lk * c->Dv, no = (int64_t)c->B * c->Hq * c->Lq * c->Dv,
                nl = (int64_t)c->B * c->Hq * c->Lq;
  float *q = malloc(nq * sizeof(float)), *k = malloc(nk * sizeof(float)),
        *v = malloc(nv * sizeof(float));
  float *o[2] = {calloc(no, sizeof(float)), calloc(no, sizeof(float))};
  float *l[2] = {calloc(nl, sizeof(float)), calloc(nl, sizeof(float))};
  fill(q, nq, seed), fill(k, nk, seed + 1), fill(v, nv, seed + 2);
  hooked_calls = all_calls = 0;
  for (int x = 0; x < 2; x++)
    CHECK_OK(attn_sdpa_forward_flash_ops(x ? steps : counted, &d, q, k, v, o[x], l[x]));
  if (c->builtin)
    CHECK(hooked_calls == 0);
  else
    CHECK(hooked_calls > 0 && hooked_calls == all_calls);
  CHECK(!memcmp(o[0], o[1], (size_t)no * sizeof(float)));
  CHECK(!memcmp(l[0], l[1], (size_t)nl * sizeof(float)));
  if (h_case_failed) printf("  ^ case Lq %d Lk %d kind %d builtin %d\n", c->Lq, c->Lk, c->kind, c->builtin);
  free(q), free(k), free(v), free(o[0]), free(o[1]), free(l[0]), free(l[1]);
}

static void test_fused_user_matches_steps(void) {
  const attn_flash_ops *a = attn_kern_get()->flash;
  if (!a->tile_forward_mod) {
    SKIP("kernel set %s has no fused modifier tiles", a->name);
    return;
  }
  attn_flash_ops steps = *a, counted = *a;
  steps.tile_forward_mod = NULL;
  counted.tile_forward_mod = counting;
  real = a;
  const fcase cs[] = {
      {1, 2, 2, 200, 256, 64, 64, 0, 0, 0, 0},   {2, 4, 2, 150, 130, 40, 24, 1, 0, 0, 0},
      {1, 2, 1, 300, 320, 64, 64, 1, 20, 1, 0},  {1, 2, 2, 260, 200, 32, 48, 1, -60, 2, 0},
      {2, 2, 2, 200, 256, 64, 64, 0, 0, 3, 0},   {1, 2, 2, 150, 192, 16, 16, 1, 0, 3, 0},
      {1, 2, 2, 150, 192, 64, 64, 0, 0, 0, 1},   {1, 2, 2, 150, 192, 64, 64, 0, 0, 0, 2},
      {1, 2, 2, 150, 192, 64, 64, 0, 0, 0, 3}};
  for (unsigned t = 0; t < sizeof cs / sizeof cs[0]; t++)
    run_case(&cs[t], &counted, &steps, 40 + t);
}

int main(void) {
  RUN(test_fused_user_matches_steps);
  HARNESS_END();
}
