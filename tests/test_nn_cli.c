/* `attn layer` end to end: one golden file per kind (mha, encoder, decoder)
 * through the built tool, compared with the golden outputs (tolerance as in
 * test_nn_golden.c), and bad inputs: non-zero exit, a message naming the
 * tensor or key, and no output file. The tool is $ATTN_BIN (set by `make
 * test`), else <dir of this program>/../attn. */
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static char bin[512], tmpdir[64];

static int file_exists(const char *path) {
  struct stat s;
  return stat(path, &s) == 0;
}

/* Runs `bin layer args`, stderr into err; returns the exit status. */
static int run_layer(const char *args, char *err, size_t nerr) {
  char cmd[2048], ep[128];
  snprintf(ep, sizeof ep, "%s/stderr.txt", tmpdir);
  snprintf(cmd, sizeof cmd, "'%s' layer %s >/dev/null 2>'%s'", bin, args, ep);
  int rc = system(cmd);
  err[0] = '\0';
  FILE *f = fopen(ep, "r");
  if (f) {
    size_t n = fread(err, 1, nerr - 1, f);
    err[n] = '\0';
    fclose(f);
  }
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

static void check_against_golden(const char *golden, const char *backend) {
  char out[128], args[512], err[4096];
  snprintf(out, sizeof out, "%s/out.safetensors", tmpdir);
  unlink(out);
  snprintf(args, sizeof args, "'%s' '%s' --backend %s", golden, out, backend);
  int rc = run_layer(args, err, sizeof err);
  if (rc != 0) printf("  %s: exit %d: %s\n", golden, rc, err);
  CHECK(rc == 0);
  attn_st *g = NULL, *o = NULL;
  CHECK_OK(attn_st_load(golden, &g));
  CHECK_OK(attn_st_load(out, &o));
  if (!g || !o) goto done;
  int compared = 0;
  for (int i = 0; i < attn_st_count(g); i++) {
    const char *name = attn_st_name(g, i);
    if (strcmp(name, "out") && strcmp(name, "attn_weights") && strncmp(name, "grad.", 5)) continue;
    const attn_tensor *w = attn_st_get(g, name), *t = attn_st_get(o, name);
    CHECK(t != NULL);
    if (!t || attn_tensor_numel(t) != attn_tensor_numel(w)) continue;
    double scale = 1;
    for (int64_t k = 0; k < attn_tensor_numel(w); k++)
      if (fabs(((float *)w->data)[k]) > scale) scale = fabs(((float *)w->data)[k]);
    CHECK_CLOSE(name, t->data, w->data, attn_tensor_numel(w), 1e-4 * scale, 1e-4);
    compared++;
  }
  CHECK(compared == attn_st_count(o));
done:
  attn_st_free(g);
  attn_st_free(o);
}

static void test_cli_mha(void) { check_against_golden("tests/golden/nn_mha_nobias_masks.safetensors", "math"); }
static void test_cli_gated_ffn(void) {
  check_against_golden("tests/golden/nn_decoder_swiglu.safetensors", "flash");
  /* MultiheadAttention's extra keys and a sequence-first file, on flash */
  check_against_golden("tests/golden/nn_mha_bias_kv_zero_attn.safetensors", "flash");
  check_against_golden("tests/golden/nn_mha_static_kv_seq_first.safetensors", "flash");
}
static void test_cli_encoder(void) {
  check_against_golden("tests/golden/nn_encoder_pre_gelu_masks.safetensors", "auto");
}
static void test_cli_decoder(void) {
  check_against_golden("tests/golden/nn_decoder_post_relu_masks.safetensors", "flash");
}

/* A copy of golden file g, less tensor `drop`, plus an optional extra tensor
 * and metadata change, written to path. */
typedef struct {
  const char *drop;
  const char *add_name; /* F32 [2] zeros, or reshaped/retyped copy of add_from */
  const char *add_from;
  attn_dtype add_dtype;
  int add_flat; /* 1 = the copy is flattened to 1-d */
  const char *meta_key, *meta_val;
} edit;

static void write_edited(const char *golden, const char *path, const edit *e) {
  attn_st *g = NULL, *o = NULL;
  CHECK_OK(attn_st_load(golden, &g));
  CHECK_OK(attn_st_new(&o));
  if (!g || !o) goto done;
  for (int i = 0; i < attn_st_count(g); i++) {
    const char *n = attn_st_name(g, i);
    const attn_tensor *t = attn_st_get(g, n);
    if (e->drop && !strcmp(n, e->drop)) continue;
    CHECK_OK(attn_st_add(o, n, t->dtype, t->ndim, t->shape, t->data));
  }
  if (e->add_name) {
    const attn_tensor *src = e->add_from ? attn_st_get(g, e->add_from) : NULL;
    if (src) {
      int64_t flat = attn_tensor_numel(src);
      size_t need = (size_t)flat * attn_dtype_size(e->add_dtype);
      char *buf = calloc(need ? need : 1, 1);
      CHECK_OK(attn_st_add(o, e->add_name, e->add_dtype, e->add_flat ? 1 : src->ndim,
                           e->add_flat ? &flat : src->shape, buf));
      free(buf);
    } else {
      float z[2] = {0, 0};
      int64_t two = 2;
      CHECK_OK(attn_st_add_f32(o, e->add_name, 1, &two, z));
    }
  }
  for (int i = 0; i < attn_st_meta_count(g); i++)
    CHECK_OK(attn_st_set_meta(o, attn_st_meta_key(g, i), attn_st_meta(g, attn_st_meta_key(g, i))));
  if (e->meta_key) CHECK_OK(attn_st_set_meta(o, e->meta_key, e->meta_val));
  CHECK_OK(attn_st_save(o, path));
done:
  attn_st_free(g);
  attn_st_free(o);
}

/* The edited file must fail with exit 1, a message containing `want`, and no
 * output file. */
static void expect_failure(const char *golden, const edit *e, const char *want) {
  char in[128], out[128], args[512], err[4096];
  snprintf(in, sizeof in, "%s/bad.safetensors", tmpdir);
  snprintf(out, sizeof out, "%s/bad_out.safetensors", tmpdir);
  unlink(out);
  write_edited(golden, in, e);
  snprintf(args, sizeof args, "'%s' '%s'", in, out);
  int rc = run_layer(args, err, sizeof err);
  if (rc != 1 || !strstr(err, want) || file_exists(out))
    printf("  expected failure naming '%s': exit %d, stderr: %s", want, rc, err);
  CHECK(rc == 1);
  CHECK(strstr(err, want) != NULL);
  CHECK(!file_exists(out));
}

static const char *MHA = "tests/golden/nn_mha_self.safetensors";
static const char *ENC = "tests/golden/nn_encoder_pre_gelu_masks.safetensors";
static const char *DEC = "tests/golden/nn_decoder_post_relu_masks.safetensors";

static void test_cli_rejects_bad_inputs(void) {
  expect_failure(MHA, &(edit){.drop = "in_proj_bias"}, "out_proj.bias");  /* bias half-present */
  expect_failure(MHA, &(edit){.drop = "query"}, "'query'");
  expect_failure(ENC, &(edit){.drop = "norm2.weight"}, "norm2.weight");
  expect_failure(DEC, &(edit){.drop = "memory"}, "'memory'");
  expect_failure(MHA, &(edit){.add_name = "bogus"}, "'bogus'");
  expect_failure(MHA, &(edit){.meta_key = "kind", .meta_val = "lstm"}, "kind");
  expect_failure(MHA, &(edit){.meta_key = "colour", .meta_val = "red"}, "colour");
  expect_failure(ENC, &(edit){.meta_key = "activation", .meta_val = "mish"}, "activation");
  /* a gated FFN without its third Linear; a plain one given a stray linear3 */
  expect_failure("tests/golden/nn_encoder_swiglu.safetensors", &(edit){.drop = "linear3.weight"},
                 "linear3.weight");
  expect_failure("tests/golden/nn_encoder_swiglu.safetensors",
                 &(edit){.meta_key = "activation", .meta_val = "silu"}, "linear3");
  /* static_v of another length than static_k */
  expect_failure("tests/golden/nn_mha_static_kv_seq_first.safetensors",
                 &(edit){.drop = "static_v", .add_name = "static_v", .add_from = "key_padding_mask",
                         .add_dtype = ATTN_F32},
                 "static_v");
  expect_failure(ENC, &(edit){.meta_key = "num_heads", .meta_val = "x"}, "num_heads");
  expect_failure(ENC, &(edit){.meta_key = "num_heads", .meta_val = "5"}, "num_heads");
  /* sequence first: the batch-first golden's [L, L] src_mask no longer fits L = B */
  expect_failure(ENC, &(edit){.meta_key = "batch_first", .meta_val = "0"}, "src_mask");
  expect_failure("tests/golden/nn_seed004_mha.safetensors",
                 &(edit){.meta_key = "batch_first", .meta_val = "false"}, "batch_first");
  expect_failure(ENC, &(edit){.meta_key = "layer_norm_eps", .meta_val = "-1"}, "layer_norm_eps");
  /* a parameter of the wrong shape, an input of the wrong dtype or shape */
  expect_failure(ENC, &(edit){.drop = "linear2.bias", .add_name = "linear2.bias",
                              .add_from = "linear1.bias", .add_dtype = ATTN_F32},
                 "linear2.bias");
  expect_failure(ENC, &(edit){.drop = "src_mask", .add_name = "src_mask", .add_from = "src_mask",
                              .add_dtype = ATTN_I32},
                 "src_mask");
  expect_failure(ENC, &(edit){.drop = "src_key_padding_mask", .add_name = "src_key_padding_mask",
                              .add_from = "src_key_padding_mask", .add_dtype = ATTN_BOOL,
                              .add_flat = 1},
                 "src_key_padding_mask");
  expect_failure(DEC, &(edit){.drop = "dout", .add_name = "dout", .add_from = "dout",
                              .add_dtype = ATTN_F32, .add_flat = 1},
                 "dout");
}

/* Boolean metadata in PyTorch's spelling (True/False) or any of 1/0,
 * yes/no, on/off; batch_first=True was refused where causal=True was not. */
static void test_cli_boolean_metadata(void) {
  char path[128];
  snprintf(path, sizeof path, "%s/bools.safetensors", tmpdir);
  static const struct {
    const char *golden, *key, *val;
  } same[] = {{"tests/golden/nn_encoder_pre_gelu_masks.safetensors", "norm_first", "True"},
              {"tests/golden/nn_encoder_pre_gelu_masks.safetensors", "batch_first", "True"},
              {"tests/golden/nn_mha_self.safetensors", "batch_first", "true"},
              {"tests/golden/nn_mha_self.safetensors", "average_attn_weights", "TRUE"},
              {"tests/golden/nn_mha_self.safetensors", "average_attn_weights", "yes"}};
  for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
    write_edited(same[i].golden, path, &(edit){.meta_key = same[i].key, .meta_val = same[i].val});
    check_against_golden(path, "auto");
  }
  expect_failure(ENC, &(edit){.meta_key = "norm_first", .meta_val = "2"}, "expected a boolean");
  expect_failure(MHA, &(edit){.meta_key = "average_attn_weights", .meta_val = "Tru"}, "average_attn_weights");
}

static void test_cli_bad_files_and_usage(void) {
  char args[512], err[4096], out[128], junk[128];
  snprintf(out, sizeof out, "%s/none.safetensors", tmpdir);
  snprintf(args, sizeof args, "'%s/missing.safetensors' '%s'", tmpdir, out);
  CHECK(run_layer(args, err, sizeof err) == 1);
  CHECK(strstr(err, "missing.safetensors") != NULL);
  CHECK(!file_exists(out));
  snprintf(junk, sizeof junk, "%s/junk.safetensors", tmpdir);
  FILE *f = fopen(junk, "w");
  if (f) {
    fputs("this is not a safetensors file at all", f);
    fclose(f);
  }
  snprintf(args, sizeof args, "'%s' '%s'", junk, out);
  CHECK(run_layer(args, err, sizeof err) == 1);
  CHECK(!file_exists(out));
  CHECK(run_layer("", err, sizeof err) == 2);
  CHECK(run_layer("a b c", err, sizeof err) == 2);
  snprintf(args, sizeof args, "'%s' '%s' --backend warp", MHA, out);
  CHECK(run_layer(args, err, sizeof err) != 0);
  CHECK(!file_exists(out));
  CHECK(run_layer("--help", err, sizeof err) == 0);
}

int main(int argc, char **argv) {
  const char *env = getenv("ATTN_BIN");
  if (env && env[0]) {
    snprintf(bin, sizeof bin, "%s", env);
  } else { /* BUILD/tests/test_nn_cli -> BUILD/attn */
    snprintf(bin, sizeof bin, "%s", argc > 0 ? argv[0] : "");
    char *slash = strrchr(bin, '/');
    if (slash) *slash = '\0', slash = strrchr(bin, '/');
    if (slash)
      strcpy(slash + 1, "attn");
    else
      snprintf(bin, sizeof bin, "build/attn");
  }
  snprintf(tmpdir, sizeof tmpdir, "/tmp/attn_nn_cli_XXXXXX");
  if (!mkdtemp(tmpdir)) {
    printf("mkdtemp failed\n");
    return 1;
  }
  if (!file_exists(bin)) printf("  %s not found (set ATTN_BIN)\n", bin);
  RUN(test_cli_mha);
  RUN(test_cli_encoder);
  RUN(test_cli_decoder);
  RUN(test_cli_gated_ffn);
  RUN(test_cli_rejects_bad_inputs);
  RUN(test_cli_boolean_metadata);
  RUN(test_cli_bad_files_and_usage);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  if (system(cmd) != 0) printf("  could not remove %s\n", tmpdir);
  HARNESS_END();
}
