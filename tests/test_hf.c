/* Hugging Face checkpoints (apps/hf.h, nn_hf.h, attn hf): the tiny BERT and
 * GPT-2 of tests/golden/hf (tools/golden_hf.py: a torch reimplementation
 * with HF's names, float64 reference on f32 weights) run by attn's layers
 * and compared with the reference outputs; the name map's variants
 * ("bert." prefix, LayerNorm gamma/beta, F16 tensors); clear errors for
 * unknown architectures, missing or mis-shaped tensors, bad ids and too
 * long sequences; the CLI; the tokenizer.json export. */
#include <sys/stat.h>
#include <unistd.h>

#include "apps/text/bpe.h"
#include "apps/hf/hf.h"
#include "apps/text/hf_tokenizer.h"
#include "harness.h"
#include "io/json.h"
#include "tool_run.h"

#define BERT_DIR "tests/golden/hf/bert"
#define GPT2_DIR "tests/golden/hf/gpt2"
/* the reference is exact for the stored f32 weights; attn's f32 forward
 * differs by rounding only (two layers, E = 32) */
#define ATOL 1e-5
#define RTOL 1e-5

static char bin[1024], tmpdir[64];

static const float *expected(const attn_st *e, const char *name, int64_t n) {
  const attn_tensor *t = attn_st_get(e, name);
  CHECK(t && t->dtype == ATTN_F32 && attn_tensor_numel(t) == n);
  return t && attn_tensor_numel(t) == n ? (const float *)t->data : NULL;
}

static const int32_t *expected_ids(const attn_st *e, const char *name, int64_t *n) {
  const attn_tensor *t = attn_st_get(e, name);
  CHECK(t && t->dtype == ATTN_I32);
  *n = t ? attn_tensor_numel(t) : 0;
  return t ? (const int32_t *)t->data : NULL;
}

static void compare(const char *what, const float *got, const attn_st *e, const char *name,
                    int64_t n) {
  const float *want = expected(e, name, n);
  if (want) CHECK_CLOSE(what, got, want, n, ATOL, RTOL);
}

/* the checkpoint of dir and its reference outputs; 1 when both loaded */
static int load_case(const char *dir, const char *expected_path, attn_hf **h, attn_st **e) {
  CHECK_OK(attn_hf_load(dir, h));
  CHECK_OK(attn_st_load(expected_path, e));
  return *h && *e;
}

static void test_bert_matches_reference(void) {
  attn_hf *h = NULL;
  attn_st *e = NULL;
  if (!load_case(BERT_DIR, "tests/golden/hf/bert_expected.safetensors", &h, &e)) goto out;
  CHECK(h->c.arch == ATTN_HF_BERT && h->c.pooler && h->c.activation == ATTN_ACT_GELU);
  CHECK(h->c.layer_norm_eps == 1e-12f && h->ignored == 0);
  int64_t L, nt, E = h->c.hidden_size;
  const int32_t *ids = expected_ids(e, "input_ids", &L), *tt = expected_ids(e, "token_type_ids", &nt);
  float *hid = malloc((size_t)(L * E) * sizeof(float)), pooled[64];
  CHECK(E <= 64 && nt == L);
  CHECK_OK(attn_hf_model_forward(&h->m, &h->p, NULL, ids, NULL, 1, L, -1, hid, pooled, NULL));
  compare("bert hidden", hid, e, "last_hidden_state", L * E);
  compare("bert pooled", pooled, e, "pooler_output", E);
  CHECK_OK(attn_hf_model_forward(&h->m, &h->p, NULL, ids, tt, 1, L, -1, hid, pooled, NULL));
  compare("bert hidden, token types", hid, e, "last_hidden_state_tt", L * E);
  compare("bert pooled, token types", pooled, e, "pooler_output_tt", E);
  CHECK_OK(attn_hf_model_forward(&h->m, &h->p, NULL, ids, NULL, 1, L, 1, hid, NULL, NULL));
  compare("bert hidden, 1 layer", hid, e, "last_hidden_state_1layer", L * E);
  /* the math backend gives the same */
  attn_nn_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.backend = ATTN_BACKEND_MATH;
  CHECK_OK(attn_hf_model_forward(&h->m, &h->p, &ctx, ids, NULL, 1, L, -1, hid, NULL, NULL));
  compare("bert hidden, math", hid, e, "last_hidden_state", L * E);
  free(hid);
out:
  attn_st_free(e);
  attn_hf_free(h);
}

static void test_gpt2_matches_reference(void) {
  attn_hf *h = NULL;
  attn_st *e = NULL;
  if (!load_case(GPT2_DIR, "tests/golden/hf/gpt2_expected.safetensors", &h, &e)) goto out;
  CHECK(h->c.arch == ATTN_HF_GPT2 && h->c.activation == ATTN_ACT_GELU_TANH);
  CHECK(!h->c.untied_lm_head && h->m.lm_head < 0);
  /* the stored attn.bias causal-mask buffers are not parameters */
  CHECK(h->ignored == 2 && strstr(h->first_ignored, ".attn.bias"));
  int64_t L, one, E = h->c.hidden_size, V = h->c.vocab_size;
  const int32_t *ids = expected_ids(e, "input_ids", &L), *next = expected_ids(e, "next_token", &one);
  float *hid = malloc((size_t)(L * E) * sizeof(float)), *logits = malloc((size_t)(L * V) * sizeof(float));
  CHECK_OK(attn_hf_model_forward(&h->m, &h->p, NULL, ids, NULL, 1, L, -1, hid, NULL, logits));
  compare("gpt2 hidden", hid, e, "last_hidden_state", L * E);
  compare("gpt2 logits", logits, e, "logits", L * V);
  int best = 0;
  for (int v = 1; v < V; v++)
    if (logits[(L - 1) * V + v] > logits[(L - 1) * V + best]) best = v;
  CHECK(next && best == next[0]);
  CHECK_OK(attn_hf_model_forward(&h->m, &h->p, NULL, ids, NULL, 1, L, 1, hid, NULL, logits));
  compare("gpt2 hidden, 1 layer", hid, e, "last_hidden_state_1layer", L * E);
  compare("gpt2 logits, 1 layer", logits, e, "logits_1layer", L * V);
  /* causal: the first 4 positions do not see the rest (a prefix gives the same) */
  float *hid4 = malloc((size_t)(4 * E) * sizeof(float));
  CHECK_OK(attn_hf_model_forward(&h->m, &h->p, NULL, ids, NULL, 1, 4, -1, hid4, NULL, NULL));
  CHECK_OK(attn_hf_model_forward(&h->m, &h->p, NULL, ids, NULL, 1, L, -1, hid, NULL, NULL));
  CHECK_CLOSE("gpt2 prefix", hid4, hid, 4 * E, 1e-6, 1e-6);
  free(hid4);
  free(hid);
  free(logits);
out:
  attn_st_free(e);
  attn_hf_free(h);
}

/* ---- checkpoints rewritten in memory ----------------------------------- */

typedef void (*rewrite_fn)(const char *name, const attn_tensor *t, attn_st *dst, void *arg);

static attn_st *rewrite(const char *dir, rewrite_fn fn, void *arg) {
  char path[256];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  attn_st *src = NULL, *dst = NULL;
  CHECK_OK(attn_st_load(path, &src));
  CHECK_OK(attn_st_new(&dst));
  for (int i = 0; src && dst && i < attn_st_count(src); i++)
    fn(attn_st_name(src, i), attn_st_get(src, attn_st_name(src, i)), dst, arg);
  attn_st_free(src);
  return dst;
}

static attn_hf_config config_of(const char *dir) {
  char path[256];
  snprintf(path, sizeof path, "%s/config.json", dir);
  long len;
  char *json = read_whole_file(path, &len);
  attn_hf_config c;
  memset(&c, 0, sizeof c);
  CHECK(json != NULL);
  if (json) CHECK_OK(attn_hf_config_parse(json, (size_t)len, &c));
  free(json);
  return c;
}

/* BertForMaskedLM-style: "bert." prefix, old LayerNorm.gamma / .beta names,
 * and a head tensor (ignored) */
static void to_prefixed(const char *name, const attn_tensor *t, attn_st *dst, void *arg) {
  char buf[256];
  snprintf(buf, sizeof buf, "bert.%s", name);
  size_t n = strlen(buf);
  if (n > 7 && !strcmp(buf + n - 7, ".weight") && strstr(buf, "LayerNorm"))
    strcpy(buf + n - 7, ".gamma");
  else if (n > 5 && !strcmp(buf + n - 5, ".bias") && strstr(buf, "LayerNorm"))
    strcpy(buf + n - 5, ".beta");
  CHECK_OK(attn_st_add(dst, buf, t->dtype, t->ndim, t->shape, t->data));
  (void)arg;
}

static void run_bert(const attn_hf *h, float *hid, float *pooled) {
  static const int32_t ids[5] = {1, 5, 9, 77, 2};
  CHECK_OK(attn_hf_model_forward(&h->m, &h->p, NULL, ids, NULL, 1, 5, -1, hid, pooled, NULL));
}

static void test_prefix_and_gamma_beta_names(void) {
  attn_hf_config c = config_of(BERT_DIR);
  attn_st *st = rewrite(BERT_DIR, to_prefixed, NULL);
  float head[3] = {1, 2, 3};
  int64_t shape[1] = {3};
  CHECK_OK(attn_st_add_f32(st, "cls.predictions.bias", 1, shape, head));
  attn_hf *a = NULL, *b = NULL;
  CHECK_OK(attn_hf_from_st(&c, st, &a));
  CHECK_OK(attn_hf_load(BERT_DIR, &b));
  if (a && b) {
    CHECK(a->ignored == 1 && !strcmp(a->first_ignored, "cls.predictions.bias") && a->c.pooler);
    float ha[5 * 32], hb[5 * 32], pa[32], pb[32];
    run_bert(a, ha, pa);
    run_bert(b, hb, pb);
    CHECK(!memcmp(ha, hb, sizeof ha) && !memcmp(pa, pb, sizeof pa));
  }
  attn_hf_free(a);
  attn_hf_free(b);
  attn_st_free(st);
}

/* every float tensor in F16 (BF16 for odd-numbered ones) */
static void to_half(const char *name, const attn_tensor *t, attn_st *dst, void *arg) {
  int *k = arg;
  if (t->dtype != ATTN_F32) {
    CHECK_OK(attn_st_add(dst, name, t->dtype, t->ndim, t->shape, t->data));
    return;
  }
  int64_t n = attn_tensor_numel(t);
  uint16_t *h = malloc((size_t)n * 2);
  int bf = (*k)++ & 1;
  for (int64_t i = 0; i < n; i++) {
    float v = ((const float *)t->data)[i];
    h[i] = bf ? attn_f32_to_bf16(v) : attn_f32_to_f16(v);
  }
  CHECK_OK(attn_st_add(dst, name, bf ? ATTN_BF16 : ATTN_F16, t->ndim, t->shape, h));
  free(h);
}

static void test_half_precision_checkpoint(void) {
  attn_hf_config c = config_of(GPT2_DIR);
  int k = 0;
  attn_st *st = rewrite(GPT2_DIR, to_half, &k);
  attn_hf *a = NULL, *b = NULL;
  CHECK_OK(attn_hf_from_st(&c, st, &a));
  CHECK_OK(attn_hf_load(GPT2_DIR, &b));
  if (a && b) {
    /* same parameters up to the rounding to 16 bits (2^-8 relative for bf16) */
    CHECK(a->p.numel == b->p.numel);
    CHECK_CLOSE("f16/bf16 params", a->p.data, b->p.data, b->p.numel, 1e-6, 4e-3);
  }
  attn_hf_free(a);
  attn_hf_free(b);
  attn_st_free(st);
}

/* drops the tensor named arg, or gives it a wrong shape when it starts with '~' */
static void drop_or_reshape(const char *name, const attn_tensor *t, attn_st *dst, void *arg) {
  const char *target = arg;
  if (target[0] == '~' && !strcmp(name, target + 1)) {
    int64_t shape[2] = {t->shape[1], t->shape[0]}; /* the Linear layout instead of Conv1D's */
    CHECK_OK(attn_st_add(dst, name, t->dtype, 2, shape, t->data));
    return;
  }
  if (!strcmp(name, target)) return;
  CHECK_OK(attn_st_add(dst, name, t->dtype, t->ndim, t->shape, t->data));
}

static void expect_load_error(const char *dir, const char *target, const char *m1,
                              const char *m2) {
  attn_hf_config c = config_of(dir);
  attn_st *st = rewrite(dir, drop_or_reshape, (void *)target);
  attn_hf *h = NULL;
  CHECK_ERR(attn_hf_from_st(&c, st, &h), ATTN_EINVAL);
  CHECK(h == NULL);
  if (!strstr(attn_last_error(), m1) || !strstr(attn_last_error(), m2)) {
    printf("  message '%s' lacks '%s' or '%s'\n", attn_last_error(), m1, m2);
    CHECK(0);
  }
  attn_st_free(st);
}

static void test_missing_and_misshaped_tensors(void) {
  expect_load_error(BERT_DIR, "encoder.layer.1.attention.self.key.weight",
                    "'encoder.layer.1.attention.self.key.weight' is missing", "[32, 32]");
  expect_load_error(BERT_DIR, "embeddings.token_type_embeddings.weight",
                    "token_type_embeddings.weight' is missing", "[2, 32]");
  expect_load_error(GPT2_DIR, "transformer.ln_f.bias", "'transformer.ln_f.bias' is missing", "[32]");
  expect_load_error(GPT2_DIR, "~transformer.h.1.mlp.c_fc.weight",
                    "'transformer.h.1.mlp.c_fc.weight' has shape [128, 32]", "expected [32, 128]");
  expect_load_error(GPT2_DIR, "~transformer.h.0.attn.c_attn.weight", "has shape [96, 32]",
                    "expected [32, 96] (Conv1D [in, out])");
  /* an untied LM head must be there */
  attn_hf_config c = config_of(GPT2_DIR);
  c.untied_lm_head = 1;
  attn_st *st = rewrite(GPT2_DIR, drop_or_reshape, (void *)"");
  attn_hf *h = NULL;
  CHECK_ERR(attn_hf_from_st(&c, st, &h), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "'lm_head.weight' is missing (expected [96, 32])") != NULL);
  attn_st_free(st);
}

static void expect_config_error(const char *json, attn_status want, const char *msg) {
  attn_hf_config c;
  CHECK_ERR(attn_hf_config_parse(json, strlen(json), &c), want);
  if (!strstr(attn_last_error(), msg)) {
    printf("  config %s: message '%s' lacks '%s'\n", json, attn_last_error(), msg);
    CHECK(0);
  }
}

static void test_config_errors(void) {
  expect_config_error("{\"model_type\": \"llama\"}", ATTN_EUNSUPPORTED,
                      "model_type 'llama' is not supported (attn hf runs bert and gpt2)");
  expect_config_error("{\"hidden_size\": 8}", ATTN_EFORMAT, "no model_type");
  expect_config_error("[1]", ATTN_EFORMAT, "not a JSON object");
  expect_config_error("{\"model_type\": \"bert\",", ATTN_EFORMAT, "config.json");
  expect_config_error("{\"model_type\": \"bert\", \"position_embedding_type\": \"relative_key\"}",
                      ATTN_EUNSUPPORTED, "relative_key");
  expect_config_error("{\"model_type\": \"bert\", \"hidden_act\": \"swish\"}", ATTN_EUNSUPPORTED,
                      "hidden_act 'swish'");
  expect_config_error("{\"model_type\": \"bert\", \"hidden_size\": \"32\"}", ATTN_EFORMAT,
                      "'hidden_size' must be a positive integer");
  expect_config_error("{\"model_type\": \"bert\", \"hidden_size\": 30, \"num_attention_heads\": 4}",
                      ATTN_EFORMAT, "not a multiple of 4 heads");
  expect_config_error("{\"model_type\": \"gpt2\", \"scale_attn_by_inverse_layer_idx\": true}",
                      ATTN_EUNSUPPORTED, "scale_attn_by_inverse_layer_idx");
  expect_config_error("{\"model_type\": \"gpt2\", \"add_cross_attention\": true}",
                      ATTN_EUNSUPPORTED, "add_cross_attention");
  /* HF's defaults for absent keys */
  attn_hf_config c;
  const char *gpt2 = "{\"model_type\": \"gpt2\", \"n_embd\": 96}";
  CHECK_OK(attn_hf_config_parse(gpt2, strlen(gpt2), &c));
  CHECK(c.intermediate_size == 384 && c.max_positions == 1024 && c.vocab_size == 50257);
  CHECK(c.layer_norm_eps == 1e-5f && c.activation == ATTN_ACT_GELU_TANH && !c.untied_lm_head);
  const char *bert = "{\"model_type\": \"bert\"}";
  CHECK_OK(attn_hf_config_parse(bert, strlen(bert), &c));
  CHECK(c.hidden_size == 768 && c.num_layers == 12 && c.type_vocab_size == 2);
  CHECK(c.layer_norm_eps == 1e-12f && c.activation == ATTN_ACT_GELU);
  /* a directory without config.json */
  attn_hf *h = NULL;
  CHECK_ERR(attn_hf_load("tests/golden", &h), ATTN_EIO);
  CHECK(strstr(attn_last_error(), "tests/golden/config.json") != NULL);
}

static void test_bad_ids(void) {
  attn_hf *b = NULL, *g = NULL;
  CHECK_OK(attn_hf_load(BERT_DIR, &b));
  CHECK_OK(attn_hf_load(GPT2_DIR, &g));
  if (!b || !g) goto out;
  static float hid[17 * 32];
  int32_t ids[17] = {1, 2, 100, 4};
  CHECK_ERR(attn_hf_model_forward(&b->m, &b->p, NULL, ids, NULL, 1, 4, -1, hid, NULL, NULL),
            ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "input id 100 at position 2 is outside the vocabulary [0, 100)"));
  ids[2] = -1;
  CHECK_ERR(attn_hf_model_forward(&g->m, &g->p, NULL, ids, NULL, 1, 4, -1, hid, NULL, NULL),
            ATTN_EINVAL);
  ids[2] = 3;
  CHECK_ERR(attn_hf_model_forward(&g->m, &g->p, NULL, ids, NULL, 1, 17, -1, hid, NULL, NULL),
            ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "17 ids is longer than the model's 16 positions"));
  CHECK_ERR(attn_hf_model_forward(&g->m, &g->p, NULL, ids, NULL, 1, 0, -1, hid, NULL, NULL),
            ATTN_EINVAL);
  int32_t tt[4] = {0, 1, 2, 0};
  CHECK_ERR(attn_hf_model_forward(&b->m, &b->p, NULL, ids, tt, 1, 4, -1, hid, NULL, NULL),
            ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "token type id 2 at position 2 is outside [0, 2)"));
  CHECK_ERR(attn_hf_model_forward(&g->m, &g->p, NULL, ids, tt, 1, 4, -1, hid, NULL, NULL),
            ATTN_EINVAL);
  /* the --input-ids parser */
  int32_t *p = NULL;
  int64_t n = 0;
  CHECK_OK(attn_hf_parse_ids("101,7592,102", &p, &n));
  CHECK(n == 3 && p && p[0] == 101 && p[1] == 7592 && p[2] == 102);
  free(p);
  CHECK_ERR(attn_hf_parse_ids("1,,2", &p, &n), ATTN_EINVAL);
  CHECK_ERR(attn_hf_parse_ids("1,x", &p, &n), ATTN_EINVAL);
  CHECK(strstr(attn_last_error(), "item 2 ('x')"));
  CHECK_ERR(attn_hf_parse_ids("-3", &p, &n), ATTN_EINVAL);
  CHECK_ERR(attn_hf_parse_ids("", &p, &n), ATTN_EINVAL);
  CHECK_ERR(attn_hf_parse_ids("1,99999999999", &p, &n), ATTN_EINVAL);
out:
  attn_hf_free(b);
  attn_hf_free(g);
}

/* docs/HF.md lists every entry of the name map */
static void test_name_map_documented(void) {
  char *doc = read_whole_file("docs/HF.md", NULL);
  CHECK(doc != NULL);
  for (int a = 0; doc && a < 2; a++) {
    int n;
    const attn_hf_name *map = attn_hf_name_map(a ? ATTN_HF_GPT2 : ATTN_HF_BERT, &n);
    CHECK(n > 10);
    for (int i = 0; i < n; i++) {
      char hf[160], at[160];
      snprintf(hf, sizeof hf, "`%s`", map[i].hf);
      snprintf(at, sizeof at, "`%s`", map[i].attn);
      if (!strstr(doc, hf) || !strstr(doc, at)) {
        printf("  docs/HF.md lacks %s or %s\n", hf, at);
        CHECK(0);
      }
    }
  }
  free(doc);
}

/* ---- the tool -------------------------------------------------------------- */

/* `bin args`, stdout then stderr into out; the exit status */
static int run_tool(const char *args, char *out, size_t cap) {
  char err[4096];
  int rc = tool_run("", bin, tmpdir, args, out, cap / 2, err, sizeof err);
  size_t n = strlen(out);
  snprintf(out + n, cap - n, "%s", err);
  return rc;
}

static void expect_tool(const char *args, int rc, const char *text) {
  char out[8192];
  int got = run_tool(args, out, sizeof out);
  if (got != rc || !strstr(out, text)) {
    printf("  attn %s: exit %d (want %d), output lacks '%s':\n%s\n", args, got, rc, text, out);
    CHECK(0);
  }
}

static void test_cli_run(void) {
  if (access(bin, X_OK)) {
    SKIP("%.200s not built", bin);
    return;
  }
  expect_tool("hf run " GPT2_DIR " --input-ids 95,3,14,15,92,65,35,89,79", 0, "next token: 79");
  expect_tool("hf run " GPT2_DIR " --input-ids 95,3 --layers 1", 0, "1 of 2 layers");
  expect_tool("hf run " GPT2_DIR " --input-ids 95,3 --layers 3", 1, "the model has 2 layers");
  expect_tool("hf run " BERT_DIR " --input-ids 1,17,42 --token-type-ids 0,0,1", 0,
              "pooler_output [1, 32]:");
  /* --out: the full tensors */
  char args[512], out[256], text[4096];
  snprintf(out, sizeof out, "%s/out.safetensors", tmpdir);
  snprintf(args, sizeof args, "hf run " BERT_DIR " --input-ids 1,17,42,99,0,63,2 --out '%s'", out);
  CHECK(run_tool(args, text, sizeof text) == 0);
  attn_st *got = NULL, *e = NULL;
  CHECK_OK(attn_st_load(out, &got));
  CHECK_OK(attn_st_load("tests/golden/hf/bert_expected.safetensors", &e));
  if (got && e) {
    const float *h = expected(got, "last_hidden_state", 7 * 32);
    if (h) compare("cli hidden", h, e, "last_hidden_state", 7 * 32);
    const float *p = expected(got, "pooler_output", 32);
    if (p) compare("cli pooled", p, e, "pooler_output", 32);
  }
  attn_st_free(got);
  attn_st_free(e);
  /* errors: exit 1 with the library's message, 2 for usage */
  expect_tool("hf run " GPT2_DIR " --input-ids 1,96", 1,
              "attn hf run: hf forward: input id 96 at position 1 is outside the vocabulary "
              "[0, 96)");
  expect_tool("hf run " GPT2_DIR " --input-ids 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17", 1,
              "longer than the model's 16 positions");
  expect_tool("hf run " BERT_DIR " --input-ids 1,2 --token-type-ids 0", 2,
              "1 token type ids for 2 input ids");
  expect_tool("hf run tests/golden --input-ids 1", 1,
              "attn hf run: tests/golden/config.json: No such file or directory");
  expect_tool("hf run " BERT_DIR " --input-ids 1,a", 2, "is not a non-negative integer");
  expect_tool("hf run " BERT_DIR, 2, "--input-ids is required");
  expect_tool("hf run " BERT_DIR " --input-ids 1 --bogus", 2, "unknown option '--bogus'");
  expect_tool("hf frobnicate", 2, "attn hf: unknown subcommand 'frobnicate'");
  expect_tool("hf rn x", 2, "unknown subcommand 'rn'; did you mean 'run'?");
  expect_tool("hf run " BERT_DIR " --input-id 1", 2, "did you mean '--input-ids'?");
  expect_tool("hf --help", 0, "export-tokenizer");
  /* an unknown architecture */
  char dir[128], cfg[192];
  snprintf(dir, sizeof dir, "%s/llama", tmpdir);
  mkdir(dir, 0700);
  snprintf(cfg, sizeof cfg, "%s/config.json", dir);
  FILE *f = fopen(cfg, "w");
  if (f) fputs("{\"model_type\": \"llama\", \"hidden_size\": 32}\n", f), fclose(f);
  snprintf(args, sizeof args, "hf run '%s' --input-ids 1", dir);
  expect_tool(args, 1, "model_type 'llama' is not supported");
}

/* ---- tokenizer.json --------------------------------------------------------- */

/* a BPE of 60 merges over three small texts, chunks of at most max_chunk bytes */
static attn_bpe *small_bpe(int max_chunk) {
  static const char *const train[] = {
      "the cat sat on the mat, the cat ate the rat 123 123 !!! ...",
      "a mat  is  flat; the   rat is  fat\n\nthe end 42\t\tx  \n  y",
      "caf\xc3\xa9 caf\xc3\xa9 na\xc3\xafve \xe2\x82\xac 10 \xe2\x82\xac 10 the the"};
  size_t lens[3];
  for (int i = 0; i < 3; i++) lens[i] = strlen(train[i]);
  attn_bpe_config cfg;
  attn_bpe_config_default(&cfg);
  cfg.vocab_size = ATTN_BPE_MERGE0 + 60;
  cfg.max_chunk = max_chunk;
  cfg.min_count = 1;
  attn_bpe *b = NULL;
  CHECK_OK(attn_bpe_train(train, lens, 3, &cfg, &b));
  return b;
}

/* the byte-level string of token id, as the exporter spells it */
static void byte_level(const attn_bpe *b, int id, char *out) {
  size_t len, n = 0;
  const char *s = attn_bpe_token(b, id, &len);
  for (size_t i = 0; i < len; i++) {
    unsigned cp = attn_hf_byte_to_unicode((unsigned char)s[i]);
    if (cp < 0x80) out[n++] = (char)cp;
    else out[n++] = (char)(0xC0 | (cp >> 6)), out[n++] = (char)(0x80 | (cp & 0x3F));
  }
  out[n] = '\0';
}

static void test_tokenizer_json(void) {
  attn_bpe *b = small_bpe(64);
  if (!b) return;
  /* GPT-2's map: printable ASCII as itself, ' ' -> U+0120 'Ġ', '\n' -> U+010A 'Ċ' */
  CHECK(attn_hf_byte_to_unicode('a') == 'a' && attn_hf_byte_to_unicode(' ') == 0x120);
  CHECK(attn_hf_byte_to_unicode('\n') == 0x10A && attn_hf_byte_to_unicode(0) == 0x100);
  CHECK(attn_hf_byte_to_unicode(0xAD) == 0x143 && attn_hf_byte_to_unicode(0xFF) == 0xFF);
  char path[128];
  snprintf(path, sizeof path, "%s/tokenizer.json", tmpdir);
  int aliased = -1;
  CHECK_OK(attn_hf_tokenizer_save(b, path, &aliased));
  CHECK(aliased == 0);
  long len;
  char *text = read_whole_file(path, &len);
  json_value *v = NULL;
  char err[128];
  CHECK(text && attn_json_parse(text, (size_t)len, &v, err, sizeof err) == 0);
  if (!v) goto out;
  const json_value *model = attn_json_get(v, "model");
  const json_value *vocab = attn_json_get(model, "vocab"), *merges = attn_json_get(model, "merges");
  CHECK(model && !strcmp(attn_json_get(model, "type")->str, "BPE"));
  int V = attn_bpe_vocab_size(b);
  CHECK(vocab && vocab->type == JSON_OBJECT && (int)vocab->count == V);
  CHECK(merges && merges->type == JSON_ARRAY && (int)merges->count == attn_bpe_n_merges(b));
  if (!vocab || !merges || (int)vocab->count != V) goto out;
  /* the vocab in id order, every id its own */
  CHECK(!strcmp(vocab->keys[0], "[PAD]") && !strcmp(vocab->keys[2], "[SEP]"));
  for (int id = ATTN_BPE_BYTE0; id < V; id++) {
    char want[2 * 64 + 1];
    byte_level(b, id, want);
    if (strcmp(vocab->keys[id], want) || vocab->items[id].uint != (uint64_t)id) {
      printf("  vocab[%d] = '%s' -> %llu, want '%s'\n", id, vocab->keys[id],
             (unsigned long long)vocab->items[id].uint, want);
      CHECK(0);
      break;
    }
  }
  /* the merges in rank order: "left right" and left+right is the new token */
  for (int m = 0; m < (int)merges->count; m++) {
    const char *s = merges->items[m].str, *sp = strchr(s, ' ');
    char joined[256];
    snprintf(joined, sizeof joined, "%.*s%s", sp ? (int)(sp - s) : 0, s, sp ? sp + 1 : "");
    if (!sp || strcmp(joined, vocab->keys[ATTN_BPE_MERGE0 + m])) {
      printf("  merge %d '%s' does not make '%s'\n", m, s, vocab->keys[ATTN_BPE_MERGE0 + m]);
      CHECK(0);
      break;
    }
  }
  const json_value *pre = attn_json_get(v, "pre_tokenizer"), *added = attn_json_get(v, "added_tokens");
  const json_value *seq = attn_json_get(pre, "pretokenizers");
  CHECK(seq && seq->count == 2 && !strcmp(attn_json_get(&seq->items[0], "type")->str, "Split"));
  const json_value *re = seq ? attn_json_get(attn_json_get(&seq->items[0], "pattern"), "Regex") : NULL;
  CHECK(re && strstr(re->str, "{1,63}") && strstr(re->str, "(?= [^\\t-\\r ])"));
  CHECK(added && added->count == 3 && attn_json_get(&added->items[1], "special")->boolean);
  CHECK(attn_json_get(v, "normalizer")->type == JSON_NULL);
  /* errors: a directory as the output */
  CHECK_ERR(attn_hf_tokenizer_save(b, tmpdir, NULL), ATTN_EIO);
out:
  attn_json_free(v);
  free(text);
  attn_bpe_free(b);
}

/* tokenizer.json read as the tokenizers library does (tools/check_hf_tokenizer.py:
 * the Split regex, the byte-level alphabet, BPE by rank) encodes texts to
 * attn's ids: ASCII texts for a max_chunk of 5 (cuts everywhere), short
 * UTF-8 words too for the default 64 (docs/HF.md: bytes vs characters). */
static void check_encodings(int max_chunk, const char *const *texts, int n) {
  attn_bpe *b = small_bpe(max_chunk);
  char tok[128], cases[128], cmd[512];
  snprintf(tok, sizeof tok, "%s/enc_tokenizer.json", tmpdir);
  snprintf(cases, sizeof cases, "%s/enc_cases.json", tmpdir);
  CHECK_OK(attn_hf_tokenizer_save(b, tok, NULL));
  json_buf j = {0};
  int bad = attn_json_buf_puts(&j, "[");
  for (int i = 0; i < n && b; i++) {
    int32_t *ids = NULL;
    size_t k = 0;
    CHECK_OK(attn_bpe_encode_alloc(b, texts[i], strlen(texts[i]), &ids, &k));
    bad |= attn_json_buf_puts(&j, i ? ",\n{\"text\": " : "{\"text\": ") |
           attn_json_buf_put_string(&j, texts[i]) | attn_json_buf_puts(&j, ", \"ids\": [");
    for (size_t t = 0; t < k; t++)
      bad |= attn_json_buf_puts(&j, t ? "," : "") | attn_json_buf_put_u64(&j, (uint64_t)ids[t]);
    bad |= attn_json_buf_puts(&j, "]}");
    free(ids);
  }
  bad |= attn_json_buf_puts(&j, "]\n");
  FILE *f = fopen(cases, "w");
  CHECK(!bad && f && fwrite(j.data, 1, j.len, f) == j.len);
  if (f) fclose(f);
  attn_json_buf_free(&j);
  snprintf(cmd, sizeof cmd, "python3 tools/check_hf_tokenizer.py '%s' '%s'", tok, cases);
  int rc = system(cmd);
  CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 0);
  attn_bpe_free(b);
}

static void test_tokenizer_json_encodes_like_attn(void) {
  if (system("python3 -c 'import json, re' 2>/dev/null") != 0) {
    SKIP("no python3 to read tokenizer.json");
    return;
  }
  static const char *const ascii[] = {
      "the cat sat on the mat", "  leading spaces", "trailing   ", "a\n\nb", "x \n y",
      "tab\tsep\t\tend", "numbers 12345678901234 and 1.5e10", "punct!!! ... ???", "mixed123abc",
      "\x01ctrl\x7f bytes", "   ", "", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
      " bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
      "                                                                      c",
      "word                                                                  word",
      "the rat  is\n\n\n the end ... 42 !", " ! ? , .;:"};
  int na = (int)(sizeof ascii / sizeof ascii[0]);
  check_encodings(5, ascii, na);
  check_encodings(64, ascii, na);
  static const char *const utf8[] = {"caf\xc3\xa9 na\xc3\xafve", "\xe2\x82\xac" "10 \xe2\x82\xac 10",
                                     "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e text"};
  check_encodings(64, utf8, 3);
}

static void test_cli_export_tokenizer(void) {
  if (access(bin, X_OK)) {
    SKIP("%.200s not built", bin);
    return;
  }
  attn_bpe *b = small_bpe(64);
  char *meta = NULL, model[128], out[128], args[512];
  attn_st *st = NULL;
  float one = 1;
  int64_t shape[1] = {1};
  snprintf(model, sizeof model, "%s/model.safetensors", tmpdir);
  snprintf(out, sizeof out, "%s/cli_tokenizer.json", tmpdir);
  CHECK_OK(attn_bpe_save(b, &meta));
  CHECK_OK(attn_st_new(&st));
  CHECK_OK(attn_st_set_meta(st, "tokenizer", meta));
  CHECK_OK(attn_st_add_f32(st, "x", 1, shape, &one));
  CHECK_OK(attn_st_save(st, model));
  snprintf(args, sizeof args, "hf export-tokenizer '%s' '%s'", model, out);
  expect_tool(args, 0, "merges");
  char *a = read_whole_file(out, NULL), *want = NULL;
  CHECK_OK(attn_hf_tokenizer_json(b, &want, NULL, NULL));
  CHECK(a && want && !strcmp(a, want));
  snprintf(args, sizeof args, "hf export-tokenizer " GPT2_DIR "/model.safetensors '%s'", out);
  expect_tool(args, 1, "no BPE tokenizer");
  expect_tool("hf export-tokenizer only-one", 2, "expected MODEL.safetensors and OUT.json");
  free(a);
  free(want);
  free(meta);
  attn_st_free(st);
  attn_bpe_free(b);
}

int main(int argc, char **argv) {
  tool_path(argc > 0 ? argv[0] : NULL, bin, sizeof bin);
  snprintf(tmpdir, sizeof tmpdir, "/tmp/attn_hf_XXXXXX");
  if (!mkdtemp(tmpdir)) {
    printf("mkdtemp failed\n");
    return 1;
  }
  RUN(test_bert_matches_reference);
  RUN(test_gpt2_matches_reference);
  RUN(test_prefix_and_gamma_beta_names);
  RUN(test_half_precision_checkpoint);
  RUN(test_missing_and_misshaped_tensors);
  RUN(test_config_errors);
  RUN(test_bad_ids);
  RUN(test_name_map_documented);
  RUN(test_cli_run);
  RUN(test_tokenizer_json);
  RUN(test_tokenizer_json_encodes_like_attn);
  RUN(test_cli_export_tokenizer);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  if (system(cmd) != 0) printf("  could not remove %s\n", tmpdir);
  HARNESS_END();
}
