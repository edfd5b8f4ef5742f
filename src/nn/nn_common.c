/* Shared helpers of the nn layer: buffer arenas, names, dropout streams,
 * activation names and parameter initialisers. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn_internal.h"

void attn_nn_arena_release(void **slot) {
  if (!slot || !*slot) return;
  nn_arena *a = *slot;
  for (int i = 0; i < a->count; i++) free(a->blocks[i]);
  free(a->blocks);
  free(a);
  *slot = NULL;
}

static void *arena_alloc(void **slot, int64_t n, size_t sz, int zero);

void *attn_nn_alloc(void **slot, int64_t n, size_t sz) { return arena_alloc(slot, n, sz, 1); }

void *attn_nn_alloc_uninit(void **slot, int64_t n, size_t sz) { return arena_alloc(slot, n, sz, 0); }

static void *arena_alloc(void **slot, int64_t n, size_t sz, int zero) {
  if (n < 0 || (uint64_t)n > (SIZE_MAX / 2) / (sz ? sz : 1)) {
    attn_set_error(ATTN_ENOMEM, "nn: buffer of %lld elements is too large", (long long)n);
    return NULL;
  }
  nn_arena *a = *slot;
  if (!a) {
    a = calloc(1, sizeof *a);
    if (!a) goto oom;
    *slot = a;
  }
  if (a->count == a->cap) {
    int nc = a->cap ? a->cap * 2 : 16;
    void **b = realloc(a->blocks, (size_t)nc * sizeof *b);
    if (!b) goto oom;
    a->blocks = b;
    a->cap = nc;
  }
  void *m = zero ? calloc((size_t)(n ? n : 1), sz) : malloc((size_t)(n ? n : 1) * sz);
  if (!m) goto oom;
  a->blocks[a->count++] = m;
  return m;
oom:
  attn_set_error(ATTN_ENOMEM, "nn: out of memory (%lld elements)", (long long)n);
  return NULL;
}

static float *scratch(int64_t n, int zero) {
  if (n < 0 || (uint64_t)n > SIZE_MAX / 8) {
    attn_set_error(ATTN_ENOMEM, "nn: scratch of %lld floats is too large", (long long)n);
    return NULL;
  }
  size_t k = (size_t)(n ? n : 1);
  float *m = zero ? calloc(k, sizeof(float)) : malloc(k * sizeof(float));
  if (!m) attn_set_error(ATTN_ENOMEM, "nn: out of memory (%lld floats)", (long long)n);
  return m;
}

float *attn_nn_scratch(int64_t n) { return scratch(n, 1); }

float *attn_nn_scratch_uninit(int64_t n) { return scratch(n, 0); }

/* Elementwise passes over fewer floats than this stay on one thread. */
enum { PAR_MIN_FLOATS = 65536 };

int attn_nn_pass_threads(int64_t n) { return n >= PAR_MIN_FLOATS ? attn_get_num_threads() : 1; }

void attn_nn_add(float *y, const float *x, int64_t n) {
#pragma omp parallel for simd num_threads(attn_nn_pass_threads(n)) schedule(static)
  for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

void attn_nn_sum(float *y, const float *a, const float *b, int64_t n) {
#pragma omp parallel for simd num_threads(attn_nn_pass_threads(n)) schedule(static)
  for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

uint64_t attn_nn_hash(const char *s, uint64_t h) {
  if (!h) h = 1469598103934665603ull;
  for (; s && *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

static uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t attn_nn_dropout_seed(const attn_nn_ctx *ctx, uint64_t site) {
  return splitmix64(ctx->seed ^ splitmix64(site ^ splitmix64(ctx->step)));
}

uint64_t attn_nn_dropout_offset(const attn_nn_ctx *ctx, int64_t n) {
  if (!ctx || ctx->shard_rows <= 0) return 0;
  return (uint64_t)(n / ctx->shard_rows) * (uint64_t)ctx->shard_row0;
}

int attn_nn_dropout_on(const attn_nn_ctx *ctx, float p) { return ctx && ctx->training && p > 0.0f; }

void attn_nn_heads_first(const float *y, float *x, int64_t B, int64_t n, int64_t H, int64_t hd) {
  for (int64_t b = 0; b < B; b++)
    for (int64_t t = 0; t < n; t++)
      for (int64_t h = 0; h < H; h++)
        memcpy(x + ((b * H + h) * n + t) * hd, y + ((b * n + t) * H + h) * hd,
               (size_t)hd * sizeof(float));
}

attn_status attn_nn_name(char *buf, const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la + lb >= ATTN_PARAM_NAME_MAX)
    return attn_set_error(ATTN_EINVAL, "parameter name '%.60s%.60s' is too long", a, b);
  memcpy(buf, a, la);
  memcpy(buf + la, b, lb + 1);
  return ATTN_OK;
}

static const struct {
  const char *name;
  attn_activation act;
} act_names[] = {{"relu", ATTN_ACT_RELU},     {"gelu", ATTN_ACT_GELU},
                 {"gelu_tanh", ATTN_ACT_GELU_TANH}, {"tanh", ATTN_ACT_TANH},
                 {"silu", ATTN_ACT_SILU},     {"swish", ATTN_ACT_SILU},
                 {"swiglu", ATTN_ACT_SWIGLU}, {"geglu", ATTN_ACT_GEGLU}};

attn_status attn_activation_from_name(const char *name, attn_activation *out) {
  for (size_t i = 0; name && i < sizeof act_names / sizeof act_names[0]; i++)
    if (!strcmp(name, act_names[i].name)) {
      *out = act_names[i].act;
      return ATTN_OK;
    }
  return attn_set_error(ATTN_EINVAL,
                        "activation '%.60s' is not relu, gelu, gelu_tanh, tanh, silu, swiglu or geglu",
                        name ? name : "(null)");
}

const char *attn_activation_name(attn_activation a) {
  for (size_t i = 0; i < sizeof act_names / sizeof act_names[0]; i++)
    if (act_names[i].act == a) return act_names[i].name;
  return "?";
}

int attn_activation_gated(attn_activation a) {
  return a == ATTN_ACT_SWIGLU || a == ATTN_ACT_GEGLU;
}

static attn_status check_index(const attn_params *p, int index, const char *fn) {
  if (!p || !p->data || index < 0 || index >= p->count)
    return attn_set_error(ATTN_EINVAL, "%s: parameter index %d invalid or params not allocated",
                          fn, index);
  return ATTN_OK;
}

attn_status attn_init_uniform(attn_params *p, int index, float bound, uint64_t seed) {
  attn_status st = check_index(p, index, "attn_init_uniform");
  if (st) return st;
  const attn_param_view *v = &p->views[index];
  uint64_t s = splitmix64(seed ^ attn_nn_hash(v->name, 0));
  float *d = attn_params_data(p, index);
  for (int64_t i = 0; i < v->numel; i++)
    d[i] = (2.0f * attn_rng_uniform(s, (uint64_t)i) - 1.0f) * bound;
  return ATTN_OK;
}

attn_status attn_init_const(attn_params *p, int index, float value) {
  attn_status st = check_index(p, index, "attn_init_const");
  if (st) return st;
  float *d = attn_params_data(p, index);
  for (int64_t i = 0; i < p->views[index].numel; i++) d[i] = value;
  return ATTN_OK;
}

attn_status attn_init_xavier(attn_params *p, int index, uint64_t seed) {
  attn_status st = check_index(p, index, "attn_init_xavier");
  if (st) return st;
  const attn_param_view *v = &p->views[index];
  if (v->ndim != 2)
    return attn_set_error(ATTN_EINVAL, "attn_init_xavier: '%s' is not 2-d", v->name);
  double a = sqrt(6.0 / (double)(v->shape[0] + v->shape[1]));
  return attn_init_uniform(p, index, (float)a, seed);
}
