/* GPT-2 generation (apps/hf/hf_generate.h, attn hf generate): the tiny
 * GPT-2 with a tokenizer of tests/golden/hf/gpt2gen (tools/golden_hf.py)
 * against torch's full forward at every step in float64: the prompt's ids,
 * the greedy continuation and each step's logits; the KV-cached decoder
 * against attn's own full forward for prompts fed in pieces; the same bits
 * for any thread count and for the paged f32 cache; the f16 / int8 caches
 * near; stopping at eos; errors; the CLI. */
#include <unistd.h>

#include "apps/hf/hf_generate.h"
#include "apps/text/gpt2_bpe.h"
#include "harness.h"
#include "tool_run.h"

#define DIR "tests/golden/hf/gpt2gen"
#define STEPS 24
/* int8 weights against the f32 reference: the quantization of 7 Linears
 * per position through 2 layers (logits of magnitude ~10; 0.20 measured) */
#define INT8_ATOL 0.4

static char bin[1024];

static const char *tok_bytes(const void *tok, int32_t id, size_t *len) {
  return attn_gpt2_bpe_token(tok, id, len);
}

typedef struct {
  attn_hf *h;
  attn_gpt2_bpe *tok;
  attn_st *e;
  const int32_t *prompt, *greedy;
  int64_t np;
  const float *logits; /* [STEPS, V] */
} fixture;

static int load(fixture *f) {
  memset(f, 0, sizeof *f);
  CHECK_OK(attn_hf_load(DIR, &f->h));
  CHECK_OK(attn_gpt2_bpe_load_dir(DIR, &f->tok));
  CHECK_OK(attn_st_load("tests/golden/hf/gpt2gen_expected.safetensors", &f->e));
  if (!f->h || !f->tok || !f->e) return 0;
  const attn_tensor *p = attn_st_get(f->e, "prompt_ids"), *g = attn_st_get(f->e, "greedy_ids");
  const attn_tensor *l = attn_st_get(f->e, "step_logits");
  CHECK(p && g && l && attn_tensor_numel(g) == STEPS &&
        attn_tensor_numel(l) == STEPS * f->h->c.vocab_size);
  if (!p || !g || !l) return 0;
  f->prompt = p->data, f->greedy = g->data, f->logits = l->data;
  f->np = attn_tensor_numel(p);
  return 1;
}

static void unload(fixture *f) {
  attn_hf_free(f->h);
  attn_gpt2_bpe_free(f->tok);
  attn_st_free(f->e);
}

static void test_prompt_tokens_and_config(void) {
  fixture f;
  if (!load(&f)) goto out;
  const char *text = attn_st_meta(f.e, "prompt");
  CHECK(text != NULL);
  int32_t *ids = NULL;
  size_t n = 0;
  if (text) CHECK_OK(attn_gpt2_bpe_encode(f.tok, text, strlen(text), &ids, &n));
  CHECK((int64_t)n == f.np && !memcmp(ids, f.prompt, n * sizeof *ids));
  free(ids);
  CHECK(f.h->eos_token_id == f.h->c.vocab_size - 1 && f.h->bos_token_id == f.h->eos_token_id);
  CHECK(attn_gpt2_bpe_vocab_size(f.tok) == f.h->c.vocab_size);
out:
  unload(&f);
}

static void test_greedy_matches_reference(void) {
  fixture f;
  if (!load(&f)) goto out;
  attn_lm_sampling s;
  attn_lm_sampling_default(&s);
  s.temperature = 0;
  attn_lm_generation g;
  CHECK_OK(attn_hf_generate(f.h, f.prompt, f.np, STEPS, &s, NULL, ATTN_HF_WEIGHTS_F32, -1, 0, NULL,
                            NULL, &g));
  CHECK(g.n == STEPS && g.context == f.np + STEPS);
  int same = g.n == STEPS;
  for (int64_t i = 0; same && i < STEPS; i++)
    same = g.ids[i] == f.greedy[i];
  CHECK(same);
  attn_lm_generation_free(&g);
out:
  unload(&f);
}

/* the prompt, then the reference's greedy ids one by one: each step's
 * logits against torch's; returns the logits [STEPS, V] (free()) */
static float *step_logits_w(const fixture *f, const attn_lm_kv_spec *kv, attn_hf_weights w,
                            double atol, double rtol) {
  const int64_t V = f->h->c.vocab_size;
  float *out = malloc((size_t)(STEPS * V) * sizeof *out);
  attn_hf_decoder d;
  CHECK_OK(attn_hf_decoder_init(&d, f->h, kv, w, 0));
  CHECK_OK(attn_hf_decoder_step(&d, f->prompt, f->np, NULL, out, NULL));
  for (int t = 1; t < STEPS; t++)
    CHECK_OK(attn_hf_decoder_step(&d, &f->greedy[t - 1], 1, NULL, out + t * V, NULL));
  CHECK(attn_hf_decoder_len(&d) == f->np + STEPS - 1);
  CHECK_CLOSE("step logits", out, f->logits, STEPS * V, atol, rtol);
  attn_hf_decoder_free(&d);
  return out;
}

static float *step_logits(const fixture *f, const attn_lm_kv_spec *kv, double atol, double rtol) {
  return step_logits_w(f, kv, ATTN_HF_WEIGHTS_F32, atol, rtol);
}

static void test_step_logits_every_cache(void) {
  fixture f;
  if (!load(&f)) goto out;
  const int64_t n = STEPS * f.h->c.vocab_size;
  /* f32: rounding only (2 layers, E 32); f16 / bf16 / int8 keys and values:
   * their rounding through 2 layers (logits of magnitude ~10). Measured at
   * every level: 6e-6, 1.7e-3, 1.2e-2, 3.8e-2 */
  static const struct {
    const char *name;
    double atol;
  } caches[] = {{"f32", 1e-4},    {"f32-paged", 1e-4}, {"f16", 2e-2},
                {"bf16", 1.5e-1}, {"int8", 1.5e-1},    {"int8-paged", 1.5e-1}};
  float *ref = NULL;
  for (size_t c = 0; c < sizeof caches / sizeof caches[0]; c++) {
    attn_lm_kv_spec kv;
    CHECK_OK(
        attn_lm_kv_spec_parse(caches[c].name, !strcmp(caches[c].name, "int8-paged") ? 5 : -1, &kv));
    float *got = step_logits(&f, &kv, caches[c].atol, 1e-4);
    if (c == 0) ref = got;
    if (c == 1) CHECK(!memcmp(ref, got, (size_t)n * sizeof *got)); /* paged f32: same bits */
    if (c) free(got);
  }
  free(ref);
out:
  unload(&f);
}

/* int8 weights (every Linear and the LM head, activations per row): the
 * logits near torch's f32 ones, and the greedy continuation's tokens mostly
 * the same */
static void test_int8_weights(void) {
  fixture f;
  if (!load(&f)) goto out;
  float *got = step_logits_w(&f, NULL, ATTN_HF_WEIGHTS_INT8, INT8_ATOL, 1e-2);
  attn_hf_decoder d;
  CHECK_OK(attn_hf_decoder_init(&d, f.h, NULL, ATTN_HF_WEIGHTS_INT8, 0));
  CHECK(d.work.ql && attn_qlinear_set_count(d.work.ql) == 6 * f.h->c.num_layers + 1);
  attn_hf_decoder_free(&d);
  /* the argmax where torch's lead is clear */
  const int64_t V = f.h->c.vocab_size;
  int agree = 0, clear = 0;
  for (int t = 0; t < STEPS; t++) {
    const float *r = f.logits + t * V, *g = got + t * V;
    int64_t br = 0, bg = 0, second = -1;
    for (int64_t v = 1; v < V; v++) {
      if (r[v] > r[br]) br = v;
      if (g[v] > g[bg]) bg = v;
    }
    for (int64_t v = 0; v < V; v++)
      if (v != br && (second < 0 || r[v] > r[second])) second = v;
    if (r[br] - r[second] > 2 * INT8_ATOL) clear++, agree += bg == br;
  }
  CHECK(clear >= STEPS / 2 && agree == clear);
  free(got);
out:
  unload(&f);
}

/* pieces of 3, 1, 7, 2, ... tokens against attn's full forward of the same ids */
static void test_pieces_equal_full_forward(void) {
  fixture f;
  if (!load(&f)) goto out;
  const int64_t V = f.h->c.vocab_size, L = 40;
  int32_t ids[40];
  for (int64_t i = 0; i < L; i++)
    ids[i] = (int32_t)((i * 37 + 11) % V);
  float *full = malloc((size_t)(L * V) * sizeof *full),
        *got = malloc((size_t)(L * V) * sizeof *got);
  CHECK_OK(attn_hf_model_forward(&f.h->m, &f.h->p, NULL, ids, NULL, 1, L, -1, NULL, NULL, full));
  attn_hf_decoder d;
  CHECK_OK(attn_hf_decoder_init(&d, f.h, NULL, ATTN_HF_WEIGHTS_F32, L));
  static const int pieces[] = {3, 1, 7, 2, 1, 1, 16, 5, 4};
  int64_t at = 0;
  for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++) {
    CHECK_OK(attn_hf_decoder_step(&d, ids + at, pieces[i], got + at * V, NULL, NULL));
    at += pieces[i];
  }
  CHECK(at == L);
  CHECK_CLOSE("pieces vs forward", got, full, L * V, 1e-4, 1e-4);
  /* the cache is full: one more is refused */
  CHECK_ERR(attn_hf_decoder_step(&d, ids, 1, NULL, got, NULL), ATTN_EINVAL);
  attn_hf_decoder_free(&d);
  free(full);
  free(got);
out:
  unload(&f);
}

static void test_threads_same_bits(void) {
  fixture f;
  if (!load(&f)) goto out;
  const int keep = attn_get_num_threads();
  attn_lm_sampling s;
  attn_lm_sampling_default(&s);
  s.seed = 9;
  attn_lm_generation g[2];
  float *lg[2];
  for (int k = 0; k < 2; k++) {
    attn_set_num_threads(k + 1);
    CHECK_OK(attn_hf_generate(f.h, f.prompt, f.np, STEPS, &s, NULL, ATTN_HF_WEIGHTS_F32, -1, 0,
                              NULL, NULL, &g[k]));
    lg[k] = step_logits(&f, NULL, 1e-4, 1e-4);
  }
  attn_set_num_threads(keep);
  CHECK(g[0].n == g[1].n && !memcmp(g[0].ids, g[1].ids, (size_t)g[0].n * sizeof *g[0].ids));
  CHECK(!memcmp(lg[0], lg[1], (size_t)(STEPS * f.h->c.vocab_size) * sizeof(float)));
  for (int k = 0; k < 2; k++) {
    attn_lm_generation_free(&g[k]);
    free(lg[k]);
  }
out:
  unload(&f);
}

/* want_probs: each new token's attention rows (its query at prompt + t)
 * against torch's attention of the whole greedy sequence */
static void test_attention_matches_reference(void) {
  fixture f;
  if (!load(&f)) goto out;
  const attn_tensor *pt = attn_st_get(f.e, "attn_probs");
  const int64_t H = f.h->c.num_heads, Ly = f.h->c.num_layers, L = f.np + STEPS;
  CHECK(pt && attn_tensor_numel(pt) == Ly * H * L * L);
  if (!pt) goto out;
  const float *ref = pt->data;
  attn_lm_sampling s;
  attn_lm_sampling_default(&s);
  s.temperature = 0;
  attn_lm_generation g;
  CHECK_OK(attn_hf_generate(f.h, f.prompt, f.np, STEPS, &s, NULL, ATTN_HF_WEIGHTS_F32, -1, 1, NULL,
                            NULL, &g));
  CHECK(g.probs && g.n == STEPS && g.context == L);
  /* g.probs [layers, heads, STEPS, L]; ref [layers, heads, L, L] rows f.np .. L-1 */
  float *want = malloc((size_t)(Ly * H * STEPS * L) * sizeof *want);
  for (int64_t lh = 0; lh < Ly * H; lh++)
    memcpy(want + lh * STEPS * L, ref + (lh * L + f.np) * L, (size_t)(STEPS * L) * sizeof *want);
  if (g.probs) CHECK_CLOSE("attention", g.probs, want, Ly * H * STEPS * L, 1e-5, 1e-4);
  free(want);
  /* the file for attn viz */
  char path[64];
  snprintf(path, sizeof path, "/tmp/attn_hfgen_%ld.safetensors", (long)getpid());
  CHECK_OK(attn_lm_save_attention(path, &g, Ly, H, f.prompt, f.np, tok_bytes, f.tok));
  attn_st *st = NULL;
  CHECK_OK(attn_st_load(path, &st));
  const attn_tensor *t = st ? attn_st_get(st, "attn") : NULL;
  CHECK(t && t->ndim == 4 && t->shape[2] == STEPS && t->shape[3] == L);
  CHECK(st && attn_st_meta(st, "key_tokens") && attn_st_meta(st, "query_tokens") &&
        !strcmp(attn_st_meta(st, "model.kind"), "decoder"));
  attn_st_free(st);
  remove(path);
  attn_lm_generation_free(&g);
out:
  unload(&f);
}

static int streamed;
static void count_token(int32_t id, void *user) {
  (void)id, (void)user;
  streamed++;
}

static void test_stops_at_eos(void) {
  fixture f;
  if (!load(&f)) goto out;
  attn_lm_sampling s;
  attn_lm_sampling_default(&s);
  s.temperature = 0;
  attn_lm_generation g;
  const int32_t eos = f.greedy[5];
  int first = 0;
  while (f.greedy[first] != eos)
    first++; /* its first appearance, <= 5 */
  streamed = 0;
  CHECK_OK(attn_hf_generate(f.h, f.prompt, f.np, STEPS, &s, NULL, ATTN_HF_WEIGHTS_F32, eos, 0,
                            count_token, NULL, &g));
  CHECK(g.n == first + 1 && g.ids[first] == eos && streamed == first + 1);
  CHECK(g.context == f.np + first + 1);
  attn_lm_generation_free(&g);
out:
  unload(&f);
}

static void test_errors(void) {
  fixture f;
  if (!load(&f)) goto out;
  attn_lm_sampling s;
  attn_lm_sampling_default(&s);
  attn_lm_generation g;
  const int64_t P = f.h->c.max_positions;
  CHECK_ERR(attn_hf_generate(f.h, f.prompt, f.np, P, &s, NULL, ATTN_HF_WEIGHTS_F32, -1, 0, NULL,
                             NULL, &g),
            ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "exceed the model's 64 positions") != NULL);
  const int32_t bad = (int32_t)f.h->c.vocab_size;
  CHECK_ERR(attn_hf_generate(f.h, &bad, 1, 4, &s, NULL, ATTN_HF_WEIGHTS_F32, -1, 0, NULL, NULL, &g),
            ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "outside the vocabulary") != NULL);
  CHECK_ERR(
      attn_hf_generate(f.h, f.prompt, 0, 4, &s, NULL, ATTN_HF_WEIGHTS_F32, -1, 0, NULL, NULL, &g),
      ATTN_EINVAL);
  s.top_p = 0;
  CHECK_ERR(attn_hf_generate(f.h, f.prompt, f.np, 4, &s, NULL, ATTN_HF_WEIGHTS_F32, -1, 0, NULL,
                             NULL, &g),
            ATTN_EINVAL);
  attn_hf *bert = NULL;
  CHECK_OK(attn_hf_load("tests/golden/hf/bert", &bert));
  attn_hf_decoder d;
  if (bert)
    CHECK_ERR(attn_hf_decoder_init(&d, bert, NULL, ATTN_HF_WEIGHTS_F32, 0), ATTN_EUNSUPPORTED);
  CHECK(strstr(attn_last_error(), "generation needs gpt2") != NULL);
  attn_hf_free(bert);
out:
  unload(&f);
}

static char out[16384], err[4096];
static int run(const char *args) {
  return tool_run("", bin, "/tmp", args, out, sizeof out, err, sizeof err);
}

static void test_cli(void) {
  fixture f;
  if (!load(&f)) goto out;
  char *want = NULL;
  size_t wl = 0;
  CHECK_OK(attn_gpt2_bpe_decode(f.tok, f.greedy, STEPS, &want, &wl));
  const char *prompt = attn_st_meta(f.e, "prompt");
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "hf generate " DIR " --prompt '%s' --temperature 0 --tokens %d --ignore-eos "
           "--kv-cache f32-paged --threads 1",
           prompt, STEPS);
  CHECK(run(cmd) == 0);
  /* the prompt, then the continuation, then the tokens/s line */
  const size_t pl = strlen(prompt);
  CHECK(want && !strncmp(out, prompt, pl) && !memcmp(out + pl, want, wl));
  CHECK(strstr(out, "-- 24 tokens in") && strstr(out, "tokens/s") &&
        strstr(out, "kv cache f32-paged"));
  /* ids in, ids out without a tokenizer (hf/gpt2 has none) */
  CHECK(run("hf generate tests/golden/hf/gpt2 --input-ids 95,3,14 --tokens 3 --quiet "
            "--temperature 0") == 0);
  CHECK(strspn(out, " 0123456789\n") == strlen(out) && strlen(out) >= 6);
  CHECK(run("hf generate tests/golden/hf/gpt2 --prompt hello") == 1);
  CHECK(strstr(err, "neither tokenizer.json nor vocab.json + merges.txt") != NULL);
  CHECK(run("hf generate " DIR " --prompt a --input-ids 1") == 2);
  CHECK(strstr(err, "one of --prompt, --prompt-file and --input-ids") != NULL);
  CHECK(run("hf generate " DIR " --kv-cache f12") == 2 && strstr(err, "f12") != NULL);
  snprintf(cmd, sizeof cmd,
           "hf generate " DIR " --prompt 'It was' --tokens 3 --quiet --save-attention "
           "/tmp/attn_hfgen_cli_%ld.safetensors",
           (long)getpid());
  CHECK(run(cmd) == 0);
  snprintf(cmd, sizeof cmd, "/tmp/attn_hfgen_cli_%ld.safetensors", (long)getpid());
  attn_st *st = NULL;
  CHECK_OK(attn_st_load(cmd, &st));
  CHECK(st && attn_st_get(st, "attn") && attn_st_meta(st, "prompt_tokens"));
  attn_st_free(st);
  remove(cmd);
  CHECK(run("hf generate " DIR " --prompt hi --tokens 100") == 1 && !out[0]);
  CHECK(strstr(err, "the prompt is 2 tokens long; with --tokens 100 that exceeds the model's 64 "
                    "positions") != NULL);
  CHECK(run("hf generate tests/golden/hf/bert --input-ids 1") == 1);
  CHECK(strstr(err, "generation needs gpt2") != NULL);
  free(want);
out:
  unload(&f);
}

int main(int argc, char **argv) {
  tool_path(argc > 0 ? argv[0] : NULL, bin, sizeof bin);
  RUN(test_prompt_tokens_and_config);
  RUN(test_greedy_matches_reference);
  RUN(test_step_logits_every_cache);
  RUN(test_int8_weights);
  RUN(test_pieces_equal_full_forward);
  RUN(test_threads_same_bits);
  RUN(test_attention_matches_reference);
  RUN(test_stops_at_eos);
  RUN(test_errors);
  RUN(test_cli);
  HARNESS_END();
}
