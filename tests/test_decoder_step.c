/* Incremental decoding (attn_decoder_step and its cache) against the full
 * teacher-forced attn_decoder_forward with a causal target mask: stacks of
 * layers, pre- and post-norm, padded memory (mem_lens), several decoder rows
 * per memory row (a beam), prefixes of several positions at once, the
 * cross-attention probabilities, reordering (beam bookkeeping), and the
 * errors. Every backend; tests/run.sh runs the program at every ISA level.
 *
 * Tolerance: the reference is the math backend's full forward; the step
 * sums the same terms but through GEMMs of other shapes (B rows instead of
 * B*L) and, on flash, another softmax order: |step - full| <= 2e-5 +
 * 2e-4 |full| on layer outputs (values O(1), two layers deep), and 1e-5 +
 * 1e-4 |full| on probabilities. */
#include <stdint.h>

#include "harness.h"

#define E 16
#define NH 4
#define MAXL 3

typedef struct {
  attn_params p;
  attn_decoder_layer m[MAXL];
  int layers;
  int64_t B, B_mem, L, Lm;
  float *tgt, *mem;
  int32_t lens[8];
} fixture;

static void setup(fixture *f, int layers, int norm_first, int64_t B_mem, int64_t G, int64_t L,
                  int64_t Lm, int padded) {
  memset(f, 0, sizeof *f);
  f->layers = layers, f->B_mem = B_mem, f->B = B_mem * G, f->L = L, f->Lm = Lm;
  attn_params_init(&f->p);
  attn_layer_config c = {.d_model = E,
                         .nhead = NH,
                         .dim_feedforward = 32,
                         .dropout = 0.1f,
                         .activation = ATTN_ACT_GELU,
                         .layer_norm_eps = 1e-5f,
                         .norm_first = norm_first,
                         .bias = 1};
  for (int l = 0; l < layers; l++) {
    char name[32];
    snprintf(name, sizeof name, "layers.%d.", l);
    CHECK_OK(attn_decoder_declare(&f->m[l], &f->p, name, &c));
  }
  CHECK_OK(attn_params_alloc(&f->p));
  for (int l = 0; l < layers; l++)
    CHECK_OK(attn_decoder_init(&f->m[l], &f->p, ATTN_INIT_TORCH, 7 + l));
  f->tgt = malloc(f->B * L * E * sizeof(float));
  f->mem = malloc(B_mem * Lm * E * sizeof(float));
  fill_uniform(f->tgt, f->B * L * E, 3, -1, 1);
  fill_uniform(f->mem, B_mem * Lm * E, 4, -1, 1);
  for (int64_t b = 0; b < B_mem; b++)
    f->lens[b] = (int32_t)(padded ? Lm - (b * 2) % Lm : Lm);
}

static void teardown(fixture *f) {
  attn_params_free(&f->p);
  free(f->tgt);
  free(f->mem);
}

/* The full forward of the stack on tgt [B, L, E] (math backend), memory row
 * b / G for decoder row b; out [B, L, E]; probs (may be NULL) the last
 * layer's cross-attention probabilities [B, H, L, Lm]. */
static void full_forward(const fixture *f, const float *tgt, float *out, float *probs) {
  const int64_t B = f->B, L = f->L, Lm = f->Lm, G = f->B / f->B_mem, n = B * L * E;
  float *mem = malloc(B * Lm * E * sizeof(float)), *x = malloc(n * sizeof(float));
  uint8_t *kpm = malloc(B * Lm);
  for (int64_t b = 0; b < B; b++) {
    memcpy(mem + b * Lm * E, f->mem + b / G * Lm * E, Lm * E * sizeof(float));
    for (int64_t j = 0; j < Lm; j++)
      kpm[b * Lm + j] = j >= f->lens[b / G];
  }
  attn_nn_ctx ctx = {.backend = ATTN_BACKEND_MATH};
  attn_mha_masks tm = {.causal = 1}, mm = {.key_padding_bool = kpm};
  memcpy(x, tgt, n * sizeof(float));
  for (int l = 0; l < f->layers; l++) {
    attn_decoder_saved s = {0};
    CHECK_OK(attn_decoder_forward(&f->m[l], &f->p, &ctx, &s, x, mem, B, L, Lm, &tm, &mm, out));
    for (int64_t b = 0; probs && l == f->layers - 1 && b < B; b++)
      for (int64_t h = 0; h < NH; h++)
        CHECK_OK(attn_mha_probs(&f->m[l].multihead_attn, &s.ca, b, h, 0, L,
                                probs + (b * NH + h) * L * Lm));
    memcpy(x, out, n * sizeof(float));
    attn_decoder_saved_free(&s);
  }
  free(mem);
  free(x);
  free(kpm);
}

/* positions [t0, t0+n) of tgt through the stack: out [B, L, E] and probs
 * [B, H, L, Lm] (may be NULL) receive those positions */
static void step(const fixture *f, attn_decoder_cache *c, attn_backend be, const float *tgt,
                 int64_t t0, int64_t n, float *out, float *probs) {
  const int64_t B = f->B, L = f->L, Lm = f->Lm;
  float *x = malloc(B * n * E * sizeof(float)), *y = malloc(B * n * E * sizeof(float));
  float *pr = malloc(B * NH * n * Lm * sizeof(float));
  for (int64_t b = 0; b < B; b++)
    memcpy(x + b * n * E, tgt + (b * L + t0) * E, n * E * sizeof(float));
  attn_nn_ctx ctx = {.backend = be, .training = 1}; /* training is ignored: no dropout */
  for (int l = 0; l < f->layers; l++) {
    CHECK_OK(attn_decoder_step(&f->m[l], &f->p, &ctx, c, l, x, n, y, pr));
    memcpy(x, y, B * n * E * sizeof(float));
  }
  for (int64_t b = 0; b < B; b++) {
    memcpy(out + (b * L + t0) * E, y + b * n * E, n * E * sizeof(float));
    for (int64_t h = 0; probs && h < NH; h++)
      memcpy(probs + ((b * NH + h) * L + t0) * Lm, pr + (b * NH + h) * n * Lm,
             n * Lm * sizeof(float));
  }
  free(x);
  free(y);
  free(pr);
}

static const attn_backend backends[] = {ATTN_BACKEND_MATH, ATTN_BACKEND_FLASH, ATTN_BACKEND_AUTO};

/* the whole target step by step (first a prefix of `prefix` positions in one
 * call) equals the full forward, outputs and last-layer probabilities */
static void run_case(int layers, int norm_first, int64_t B_mem, int64_t G, int padded,
                     int64_t prefix) {
  fixture f;
  setup(&f, layers, norm_first, B_mem, G, 7, 5, padded);
  const int64_t n = f.B * f.L * E, np = f.B * NH * f.L * f.Lm;
  float *want = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
  float *pwant = malloc(np * sizeof(float)), *pgot = malloc(np * sizeof(float));
  full_forward(&f, f.tgt, want, pwant);
  for (size_t i = 0; i < sizeof backends / sizeof *backends; i++) {
    attn_decoder_cache c;
    CHECK_OK(attn_decoder_cache_init(&c, &f.m[0], layers, f.B, 2)); /* grows past 2 */
    attn_nn_ctx ctx = {.backend = backends[i]};
    CHECK_OK(attn_decoder_cache_set_memory(&c, f.m, &f.p, &ctx, f.mem, f.B_mem, f.Lm,
                                           padded ? f.lens : NULL));
    memset(got, 0, n * sizeof(float));
    step(&f, &c, backends[i], f.tgt, 0, prefix, got, pgot);
    for (int64_t t = prefix; t < f.L; t++)
      step(&f, &c, backends[i], f.tgt, t, 1, got, pgot);
    CHECK(attn_decoder_cache_len(&c) == f.L);
    CHECK_CLOSE("step out", got, want, n, 2e-5, 2e-4);
    CHECK_CLOSE("cross probs", pgot, pwant, np, 1e-5, 1e-4);
    attn_decoder_cache_free(&c);
  }
  free(want), free(got), free(pwant), free(pgot);
  teardown(&f);
}

static void test_one_layer_post_norm_matches_full_forward(void) { run_case(1, 0, 2, 1, 0, 1); }
static void test_one_layer_pre_norm_matches_full_forward(void) { run_case(1, 1, 2, 1, 0, 1); }
static void test_stack_of_three_matches_full_forward(void) {
  run_case(3, 0, 2, 1, 0, 1);
  run_case(3, 1, 2, 1, 0, 1);
}
static void test_padded_memory_matches_key_padding_mask(void) {
  run_case(2, 0, 3, 1, 1, 1);
  run_case(2, 1, 3, 1, 1, 1);
}
static void test_beam_rows_share_one_memory_row(void) {
  run_case(2, 0, 2, 3, 1, 1);
  run_case(2, 1, 3, 2, 1, 1);
}
static void test_prefix_of_several_positions_at_once(void) {
  run_case(2, 1, 2, 2, 1, 4);
  run_case(2, 0, 1, 1, 0, 7);
}

/* a cache of f's two layers, memory set, positions [0, t) decoded into got */
static void start(const fixture *f, attn_decoder_cache *c, attn_backend be, int64_t t, float *got) {
  CHECK_OK(attn_decoder_cache_init(c, &f->m[0], 2, f->B, 0));
  attn_nn_ctx ctx = {.backend = be};
  CHECK_OK(attn_decoder_cache_set_memory(c, f->m, &f->p, &ctx, f->mem, f->B_mem, f->Lm, f->lens));
  step(f, c, be, f->tgt, 0, t, got, NULL);
}

/* after 3 steps, reorder: new row b continues old row src[b]'s history; the
 * result equals the full forward on the spliced targets */
static void test_reorder_continues_the_chosen_histories(void) {
  fixture f;
  setup(&f, 2, 1, 2, 3, 6, 4, 1);
  const int64_t t_split = 3, n = f.B * f.L * E;
  const int64_t src[6] = {2, 2, 0, 4, 3, 3}; /* within each memory row's 3 rows */
  float *spliced = malloc(n * sizeof(float)), *want = malloc(n * sizeof(float));
  float *got = malloc(n * sizeof(float));
  for (int64_t b = 0; b < f.B; b++)
    for (int64_t t = 0; t < f.L; t++)
      memcpy(spliced + (b * f.L + t) * E, f.tgt + ((t < t_split ? src[b] : b) * f.L + t) * E,
             E * sizeof(float));
  full_forward(&f, spliced, want, NULL);
  for (size_t i = 0; i < sizeof backends / sizeof *backends; i++) {
    attn_decoder_cache c;
    start(&f, &c, backends[i], t_split, got);
    CHECK_OK(attn_decoder_cache_reorder(&c, src));
    for (int64_t t = t_split; t < f.L; t++)
      step(&f, &c, backends[i], f.tgt, t, 1, got, NULL);
    for (int64_t b = 0; b < f.B; b++) /* only the positions after the split are comparable */
      CHECK_CLOSE("after reorder", got + (b * f.L + t_split) * E, want + (b * f.L + t_split) * E,
                  (f.L - t_split) * E, 2e-5, 2e-4);
    attn_decoder_cache_free(&c);
  }
  free(spliced), free(want), free(got);
  teardown(&f);
}

/* after 3 steps, keep memory rows 1 and 2 of 3 (a beam drops its finished
 * sentence 0): the kept rows go on as in the full forward (their padded
 * memory lengths, cross K/V of both layers and histories moved down) */
static void test_keep_drops_finished_rows(void) {
  fixture f;
  setup(&f, 2, 0, 3, 2, 6, 4, 1);
  const int64_t t_split = 3, n = f.B * f.L * E, G = 2, keep[2] = {1, 2};
  float *want = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
  float *sub = malloc(n * sizeof(float));
  full_forward(&f, f.tgt, want, NULL);
  fixture g = f; /* the kept rows alone: decoder rows 2..5 */
  g.B = 2 * G, g.B_mem = 2, g.tgt = sub;
  memcpy(sub, f.tgt + G * f.L * E, g.B * f.L * E * sizeof(float));
  for (size_t i = 0; i < sizeof backends / sizeof *backends; i++) {
    attn_decoder_cache c;
    start(&f, &c, backends[i], t_split, got);
    const int64_t twice[2] = {1, 1}, beyond[2] = {1, 3};
    CHECK_ERR(attn_decoder_cache_keep(&c, twice, 2), ATTN_EINVAL);
    CHECK_ERR(attn_decoder_cache_keep(&c, beyond, 2), ATTN_EINVAL);
    CHECK_ERR(attn_decoder_cache_keep(&c, keep, 0), ATTN_EINVAL);
    CHECK_OK(attn_decoder_cache_keep(&c, keep, 2));
    CHECK(c.B == 4 && c.B_mem == 2 && c.mem_lens[0] == f.lens[1] && c.mem_lens[1] == f.lens[2]);
    for (int64_t t = t_split; t < f.L; t++)
      step(&g, &c, backends[i], g.tgt, t, 1, got, NULL);
    for (int64_t b = 0; b < g.B; b++)
      CHECK_CLOSE("after keep", got + (b * f.L + t_split) * E,
                  want + ((b + G) * f.L + t_split) * E, (f.L - t_split) * E, 2e-5, 2e-4);
    attn_decoder_cache_free(&c);
  }
  free(want), free(got), free(sub);
  teardown(&f);
}

/* reset forgets the steps and keeps the memory: decoding again gives the same */
static void test_reset_keeps_memory(void) {
  fixture f;
  setup(&f, 2, 0, 2, 1, 4, 5, 1);
  const int64_t n = f.B * f.L * E;
  float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
  attn_decoder_cache c;
  CHECK_OK(attn_decoder_cache_init(&c, &f.m[0], 2, f.B, 4));
  CHECK_OK(attn_decoder_cache_set_memory(&c, f.m, &f.p, NULL, f.mem, f.B_mem, f.Lm, f.lens));
  step(&f, &c, ATTN_BACKEND_AUTO, f.tgt, 0, f.L, a, NULL);
  attn_decoder_cache_reset(&c);
  CHECK(attn_decoder_cache_len(&c) == 0);
  for (int64_t t = 0; t < f.L; t++)
    step(&f, &c, ATTN_BACKEND_AUTO, f.tgt, t, 1, b, NULL);
  CHECK_CLOSE("after reset", b, a, n, 2e-5, 2e-4);
  attn_decoder_cache_free(&c);
  attn_decoder_cache_free(&c); /* twice is harmless */
  free(a), free(b);
  teardown(&f);
}

/* restart: a new batch on the same storage (fewer rows: no allocation),
 * decoded to the same bits as on a fresh cache; more rows than reserved, or
 * a cache grown past its reserve, are reserved anew */
static void test_restart_reuses_storage(void) {
  fixture f;
  setup(&f, 2, 0, 2, 2, 4, 5, 1);
  const int64_t n = f.B * f.L * E;
  float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
  fixture g = f; /* memory row 1 alone, its two decoder rows */
  g.B = 2, g.B_mem = 1, g.mem = f.mem + f.Lm * E, g.tgt = f.tgt + 2 * f.L * E, g.lens[0] = f.lens[1];
  attn_decoder_cache fresh, c;
  CHECK_OK(attn_decoder_cache_init(&fresh, &f.m[0], 2, g.B, f.L));
  CHECK_OK(attn_decoder_cache_set_memory(&fresh, f.m, &f.p, NULL, g.mem, 1, f.Lm, g.lens));
  for (int64_t t = 0; t < f.L; t++)
    step(&g, &fresh, ATTN_BACKEND_AUTO, g.tgt, t, 1, a, NULL);
  CHECK_OK(attn_decoder_cache_init(&c, &f.m[0], 2, f.B, f.L));
  CHECK_OK(attn_decoder_cache_set_memory(&c, f.m, &f.p, NULL, f.mem, f.B_mem, f.Lm, f.lens));
  for (int64_t t = 0; t < f.L; t++)
    step(&f, &c, ATTN_BACKEND_AUTO, f.tgt, t, 1, b, NULL);
  const float *k0 = c.self[0].k;
  CHECK_OK(attn_decoder_cache_restart(&c, g.B));
  CHECK(c.B == 2 && c.B_mem == 0 && attn_decoder_cache_len(&c) == 0 && c.self[0].k == k0);
  float x[4 * E] = {0}, y[4 * E];
  CHECK_ERR(attn_decoder_step(&f.m[0], &f.p, NULL, &c, 0, x, 1, y, NULL), ATTN_EINVAL);
  CHECK_OK(attn_decoder_cache_set_memory(&c, f.m, &f.p, NULL, g.mem, 1, f.Lm, g.lens));
  for (int64_t t = 0; t < f.L; t++)
    step(&g, &c, ATTN_BACKEND_AUTO, g.tgt, t, 1, b, NULL);
  CHECK(!memcmp(a, b, (size_t)(g.B * f.L * E) * sizeof(float)));
  CHECK_OK(attn_decoder_cache_restart(&c, 8)); /* more rows than reserved */
  CHECK(c.B == 8 && c.rows_alloc == 8 && c.self[1].B == 8 && c.self[1].cap == f.L);
  CHECK_ERR(attn_decoder_cache_restart(&c, 0), ATTN_EINVAL);
  attn_decoder_cache_free(&c);
  CHECK_ERR(attn_decoder_cache_restart(&c, 2), ATTN_EINVAL); /* no cache */
  CHECK_OK(attn_decoder_cache_init(&c, &f.m[0], 2, f.B, 2)); /* grows past 2 steps */
  CHECK_OK(attn_decoder_cache_set_memory(&c, f.m, &f.p, NULL, f.mem, f.B_mem, f.Lm, f.lens));
  for (int64_t t = 0; t < f.L; t++)
    step(&f, &c, ATTN_BACKEND_AUTO, f.tgt, t, 1, b, NULL);
  CHECK(c.self[0].cap > 2);
  CHECK_OK(attn_decoder_cache_restart(&c, g.B));
  CHECK(c.self[0].cap == 2 && c.self[0].len == 0 && c.self[0].B == g.B);
  attn_decoder_cache_free(&fresh);
  attn_decoder_cache_free(&c);
  free(a), free(b);
  teardown(&f);
}

static void test_errors_name_the_problem(void) {
  fixture f;
  setup(&f, 2, 0, 2, 2, 3, 4, 0);
  attn_decoder_cache c = {0};
  float x[4 * E] = {0}, y[4 * E];
  CHECK_ERR(attn_decoder_step(&f.m[0], &f.p, NULL, &c, 0, x, 1, y, NULL), ATTN_EINVAL);
  CHECK_ERR(attn_decoder_cache_init(&c, &f.m[0], 0, 4, 0), ATTN_EINVAL);
  CHECK_OK(attn_decoder_cache_init(&c, &f.m[0], 2, 4, 0));
  /* no memory yet */
  CHECK_ERR(attn_decoder_step(&f.m[0], &f.p, NULL, &c, 0, x, 1, y, NULL), ATTN_EINVAL);
  CHECK_ERR(attn_decoder_cache_set_memory(&c, f.m, &f.p, NULL, f.mem, 3, f.Lm, NULL),
            ATTN_EINVAL); /* 3 does not divide 4 */
  int32_t bad[2] = {4, 5};
  CHECK_ERR(attn_decoder_cache_set_memory(&c, f.m, &f.p, NULL, f.mem, 2, f.Lm, bad), ATTN_EINVAL);
  CHECK_OK(attn_decoder_cache_set_memory(&c, f.m, &f.p, NULL, f.mem, 2, f.Lm, NULL));
  CHECK_ERR(attn_decoder_step(&f.m[0], &f.p, NULL, &c, 2, x, 1, y, NULL), ATTN_EINVAL);
  CHECK_ERR(attn_decoder_step(&f.m[0], &f.p, NULL, &c, 0, x, 0, y, NULL), ATTN_EINVAL);
  CHECK_OK(attn_decoder_step(&f.m[0], &f.p, NULL, &c, 0, x, 1, y, NULL));
  const int64_t across[4] = {2, 1, 0, 3}, out_of_range[4] = {0, 1, 2, 4}, ok[4] = {1, 1, 3, 2};
  CHECK_ERR(attn_decoder_cache_reorder(&c, across), ATTN_EINVAL);
  CHECK_ERR(attn_decoder_cache_reorder(&c, out_of_range), ATTN_EINVAL);
  CHECK_OK(attn_decoder_cache_reorder(&c, ok));
  attn_decoder_cache_free(&c);
  teardown(&f);
}

int main(void) {
  RUN(test_one_layer_post_norm_matches_full_forward);
  RUN(test_one_layer_pre_norm_matches_full_forward);
  RUN(test_stack_of_three_matches_full_forward);
  RUN(test_padded_memory_matches_key_padding_mask);
  RUN(test_beam_rows_share_one_memory_row);
  RUN(test_prefix_of_several_positions_at_once);
  RUN(test_reorder_continues_the_chosen_histories);
  RUN(test_keep_drops_finished_rows);
  RUN(test_reset_keeps_memory);
  RUN(test_restart_reuses_storage);
  RUN(test_errors_name_the_problem);
  HARNESS_END();
}
