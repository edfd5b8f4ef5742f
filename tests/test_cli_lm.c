/* attn lm on the command line: train on a small corpus, generate (streaming,
 * tokens/s, the same text for any thread count, --save-attention for attn
 * viz), eval, and the bad input: an empty corpus, a prompt longer than the
 * context, top-p outside (0, 1], an unknown --kv-cache, a bad --kv-page-size; every
 * cache storage, the same text with a paged f32 cache; the same training for any
 * thread count.
 * The tool is $ATTN_BIN (make test), else BUILD/attn next to this program. */
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "apps/lm/lm_model.h"
#include "apps/text/bpe.h"
#include "apps/viz/viz.h"
#include "harness.h"

static char bin[512], dir[64], err[8192], out[16384], model[128];

static int run_tool(const char *args) {
  char cmd[4096], ep[128], op[128];
  snprintf(ep, sizeof ep, "%s/stderr.txt", dir);
  snprintf(op, sizeof op, "%s/stdout.txt", dir);
  snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>'%s' </dev/null", bin, args, op, ep);
  int rc = system(cmd);
  const char *paths[2] = {ep, op};
  char *bufs[2] = {err, out};
  size_t caps[2] = {sizeof err, sizeof out};
  for (int i = 0; i < 2; i++) {
    bufs[i][0] = '\0';
    FILE *f = fopen(paths[i], "r");
    if (!f) continue;
    size_t n = fread(bufs[i], 1, caps[i] - 1, f);
    for (size_t j = 0; j < n; j++) /* an untrained model may draw the byte 0 */
      if (!bufs[i][j]) bufs[i][j] = '?';
    bufs[i][n] = '\0';
    fclose(f);
  }
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

static const char *docs[3] = {
    "Fellow citizens of the Senate and House of Representatives: the state of the union is strong. "
    "We have met the challenges of the year with courage, and the nation is at peace. ",
    "Mr. Speaker, the Congress has worked with the executive to balance the budget, to defend the "
    "nation, and to secure the blessings of liberty for the people of the United States. ",
    "The union is strong, the people are free, and the Congress and the nation look to the year "
    "ahead with hope. We shall keep faith with those who came before us. "};

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f) {
    h_case_failed = 1;
    return;
  }
  fputs(text, f);
  fclose(f);
}

/* a small untrained model (max_len 24) with a BPE of the documents */
static void make_model(void) {
  size_t lens[3];
  for (int i = 0; i < 3; i++)
    lens[i] = strlen(docs[i]);
  attn_bpe_config bc;
  attn_bpe_config_default(&bc);
  bc.vocab_size = 300;
  attn_bpe *bpe = NULL;
  CHECK_OK(attn_bpe_train(docs, lens, 3, &bc, &bpe));
  attn_lm_config c;
  attn_lm_config_default(&c);
  c.vocab = bpe ? attn_bpe_vocab_size(bpe) : 300, c.d_model = 16, c.heads = 2, c.ff = 32;
  c.layers = 1, c.max_len = 24;
  attn_lm_model m;
  CHECK_OK(attn_lm_create(&m, &c));
  CHECK_OK(attn_lm_init(&m, 1));
  char *tok = NULL;
  if (bpe) CHECK_OK(attn_bpe_save(bpe, &tok));
  snprintf(model, sizeof model, "%s/m.safetensors", dir);
  CHECK_OK(attn_lm_save(model, &m, NULL, tok, NULL));
  free(tok);
  attn_bpe_free(bpe);
  attn_lm_free(&m);
}

static void test_generate_streams_and_is_deterministic(void) {
  char args[1024];
  static char first[sizeof out];
  snprintf(args, sizeof args, "lm generate '%s' --prompt 'The union' --tokens 12 --seed 3", model);
  CHECK(run_tool(args) == 0);
  CHECK(!strncmp(out, "The union", 9) && strstr(out, "tokens/s") && strstr(out, "kv cache f32"));
  snprintf(args, sizeof args,
           "lm generate '%s' --prompt 'The union' --tokens 12 --seed 3 --quiet --threads 1", model);
  CHECK(run_tool(args) == 0);
  snprintf(first, sizeof first, "%s", out);
  CHECK(!strstr(out, "tokens/s") && strlen(out) > 1);
  snprintf(args, sizeof args,
           "lm generate '%s' --prompt 'The union' --tokens 12 --seed 3 --quiet --threads 2", model);
  CHECK(run_tool(args) == 0);
  CHECK(!strcmp(out, first));
  snprintf(args, sizeof args,
           "lm generate '%s' --prompt 'The union' --tokens 12 --seed 4 --quiet --temperature 2",
           model);
  CHECK(run_tool(args) == 0);
  CHECK(strcmp(out, first) != 0);
  /* a paged f32 cache: the same text, any page size and thread count */
  const char *same[] = {"--kv-cache paged --threads 2", "--kv-cache f32-paged --kv-page-size 3",
                        "--kv-cache paged --kv-page-size 1 --threads 2"};
  for (int i = 0; i < 3; i++) {
    snprintf(args, sizeof args,
             "lm generate '%s' --prompt 'The union' --tokens 12 --seed 3 --quiet %s", model,
             same[i]);
    CHECK(run_tool(args) == 0);
    CHECK(!strcmp(out, first));
  }
  /* every storage generates and names itself in the tokens/s line */
  const char *kinds[][2] = {{"f16", "kv cache f16;"},
                            {"bf16-paged", "kv cache bf16-paged (pages of 16);"},
                            {"int8-paged --kv-page-size 4", "kv cache int8-paged (pages of 4);"},
                            {"int8", "kv cache int8;"}};
  for (int i = 0; i < 4; i++) {
    snprintf(args, sizeof args,
             "lm generate '%s' --prompt 'The union' --tokens 12 --seed 3 --kv-cache %s", model,
             kinds[i][0]);
    CHECK(run_tool(args) == 0);
    CHECK(strstr(out, "tokens/s") && strstr(out, kinds[i][1]));
  }
}

static void test_save_attention_for_viz(void) {
  char args[1024], path[160];
  snprintf(path, sizeof path, "%s/att.safetensors", dir);
  snprintf(args, sizeof args,
           "lm generate '%s' --prompt 'the nation' --tokens 4 --save-attention '%s'", model, path);
  CHECK(run_tool(args) == 0);
  attn_viz_input in;
  CHECK_OK(attn_viz_input_load(path, NULL, &in));
  CHECK(in.layers == 1 && in.heads == 2 && in.lq == 4 && in.lk > 4 && in.q_labels && in.k_labels);
  for (int64_t r = 0; in.probs && r < 2 * 4; r++) {
    double s = 0;
    for (int64_t j = 0; j < in.lk; j++)
      s += in.probs[r * in.lk + j];
    CHECK(fabs(s - 1) < 1e-5);
  }
  if (in.q_labels && in.k_labels) CHECK(!strcmp(in.q_labels[3], in.k_labels[in.lk - 1]));
  attn_viz_input_free(&in);
  char png[160];
  snprintf(png, sizeof png, "%s/att.html", dir);
  snprintf(args, sizeof args, "viz '%s' '%s'", path, png);
  CHECK(run_tool(args) == 0);
}

static void test_bad_input(void) {
  char args[2048];
  snprintf(args, sizeof args, "lm generate '%s' --kv-cache f8", model);
  CHECK(run_tool(args) == 2 && strstr(err, "--kv-cache 'f8'") && strstr(err, "f32, f16, bf16"));
  snprintf(args, sizeof args, "lm generate '%s' --kv-cache f16-pagd", model);
  CHECK(run_tool(args) == 2 && strstr(err, "--kv-cache 'f16-pagd'"));
  snprintf(args, sizeof args, "lm generate '%s' --kv-cache paged --kv-page-size 0", model);
  CHECK(run_tool(args) == 2 && strstr(err, "--kv-page-size 0"));
  snprintf(args, sizeof args, "lm generate '%s' --kv-cache paged --kv-page-size -3", model);
  CHECK(run_tool(args) == 2 && strstr(err, "--kv-page-size -3"));
  snprintf(args, sizeof args, "lm generate '%s' --kv-cache paged --kv-page-size 2.5", model);
  CHECK(run_tool(args) == 2 && strstr(err, "--kv-page-size"));
  snprintf(args, sizeof args, "lm generate '%s' --kv-cache f16 --kv-page-size 8", model);
  CHECK(run_tool(args) == 2 && strstr(err, "contiguous") && strstr(err, "f16-paged"));
  snprintf(args, sizeof args, "lm generate '%s' --top-p 0", model);
  CHECK(run_tool(args) == 2 && strstr(err, "--top-p") && strstr(err, "(0, 1]"));
  snprintf(args, sizeof args, "lm generate '%s' --top-p 1.5", model);
  CHECK(run_tool(args) == 2 && strstr(err, "(0, 1]"));
  snprintf(
      args, sizeof args,
      "lm generate '%s' --tokens 4 --prompt 'the nation and the people of the union are strong "
      "and free and the Congress of the United States shall keep faith with the year'",
      model);
  CHECK(run_tool(args) == 1 && strstr(err, "exceeds the model's context of 24 tokens"));
  snprintf(args, sizeof args, "lm generate '%s' --prompt ''", model);
  CHECK(run_tool(args) == 1 && strstr(err, "empty"));
  char empty[128];
  snprintf(empty, sizeof empty, "%s/empty", dir);
  mkdir(empty, 0777);
  snprintf(args, sizeof args, "lm train --data '%s' --out '%s/run'", empty, dir);
  CHECK(run_tool(args) == 1 && strstr(err, "no .txt documents"));
  snprintf(args, sizeof args, "lm generate '%s/empty'", dir);
  CHECK(run_tool(args) == 1);
  snprintf(args, sizeof args, "lm fly");
  CHECK(run_tool(args) == 2 && strstr(err, "train, generate or eval"));
}

static void test_train_and_eval(void) {
  char args[2048], corpus[128], path[192];
  snprintf(corpus, sizeof corpus, "%s/corpus", dir);
  mkdir(corpus, 0777);
  for (int i = 0; i < 3; i++) {
    snprintf(path, sizeof path, "%s/%d_doc.txt", corpus, 1990 + i);
    write_file(path, docs[i]);
  }
  snprintf(args, sizeof args,
           "lm train --data '%s' --out '%s/run' --vocab 300 --dim 16 --heads 2 --ff 32 --layers 1 "
           "--seq 8 --batch 2 --max-steps 3 --max-len 64",
           corpus, dir);
  CHECK(run_tool(args) == 0);
  CHECK(strstr(out, "2 training documents") && strstr(out, "validation perplexity") &&
        strstr(out, "Kneser-Ney"));
  snprintf(path, sizeof path, "%s/run/best.safetensors", dir);
  CHECK(access(path, R_OK) == 0);
  /* the same training for 1 and 2 threads: the same epoch line (loss, perplexity) */
  static char line[2][512];
  for (int t = 0; t < 2; t++) {
    snprintf(args, sizeof args,
             "lm train --data '%s' --out '%s/run%d' --vocab 300 --dim 16 --heads 2 --ff 32 "
             "--layers 1 --seq 8 --batch 2 --max-steps 3 --max-len 64 --threads %d",
             corpus, dir, t, t + 1);
    CHECK(run_tool(args) == 0);
    const char *e = strstr(out, "epoch 1 (3 steps)");
    CHECK(e != NULL);
    if (e) snprintf(line[t], sizeof line[t], "%.*s", (int)strcspn(e, "\n"), e);
  }
  CHECK(line[0][0] && !strcmp(line[0], line[1]));
  snprintf(args, sizeof args, "lm eval '%s' '%s/1990_doc.txt' --data '%s'", path, corpus, corpus);
  CHECK(run_tool(args) == 0);
  CHECK(strstr(out, "1990_doc.txt:") && strstr(out, "perplexity") &&
        strstr(out, "1 validation documents"));
}

int main(int argc, char **argv) {
  const char *env = getenv("ATTN_BIN");
  if (env && env[0]) {
    snprintf(bin, sizeof bin, "%s", env);
  } else {
    snprintf(bin, sizeof bin, "%s", argc > 0 ? argv[0] : "");
    char *slash = strrchr(bin, '/');
    if (slash) *slash = '\0', slash = strrchr(bin, '/');
    if (slash)
      strcpy(slash + 1, "attn");
    else
      snprintf(bin, sizeof bin, "build/attn");
  }
  snprintf(dir, sizeof dir, "/tmp/attn_cli_lm_XXXXXX");
  if (!mkdtemp(dir)) return 1;
  RUN(make_model);
  RUN(test_generate_streams_and_is_deterministic);
  RUN(test_save_attention_for_viz);
  RUN(test_bad_input);
  RUN(test_train_and_eval);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) printf("  could not remove %s\n", dir);
  HARNESS_END();
}
