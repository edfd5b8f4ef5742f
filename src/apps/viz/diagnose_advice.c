/* Advice on near-uniform attention heads, qualified by what the model is
 * and by the evidence (see diagnose.h). Evenly spread attention is a fault
 * in a decoder, often legitimate in a mean-pooled classifier (the average of
 * every token's output decides anyway), and expected in an untrained layer. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "apps/viz/diagnose.h"

static const char *const model_names[ATTN_DIAG_MODEL_COUNT] = {"unknown", "classifier", "decoder"};

const char *attn_diag_model_name(attn_diag_model m) {
  return (unsigned)m < ATTN_DIAG_MODEL_COUNT ? model_names[m] : "?";
}

attn_status attn_diag_model_from_name(const char *name, attn_diag_model *out) {
  static const struct {
    const char *name;
    attn_diag_model m;
  } names[] = {{"unknown", ATTN_DIAG_MODEL_UNKNOWN},    {"layer", ATTN_DIAG_MODEL_UNKNOWN},
               {"classifier", ATTN_DIAG_MODEL_POOLED},  {"pooled", ATTN_DIAG_MODEL_POOLED},
               {"mean-pooled", ATTN_DIAG_MODEL_POOLED}, {"decoder", ATTN_DIAG_MODEL_DECODER},
               {"causal-lm", ATTN_DIAG_MODEL_DECODER}};
  for (size_t i = 0; name && i < sizeof names / sizeof names[0]; i++)
    if (!strcmp(name, names[i].name)) {
      *out = names[i].m;
      return ATTN_OK;
    }
  return attn_set_error(ATTN_EINVAL, "model kind '%s': classifier, decoder or unknown",
                        name ? name : "");
}

void attn_diag_context_default(attn_diag_context *c) {
  c->kind = ATTN_DIAG_MODEL_UNKNOWN;
  c->accuracy = NAN;
  c->loss = NAN;
}

double attn_diagnose_head_spread(const float *probs, int64_t layer, int64_t heads, int64_t lq,
                                 int64_t lk) {
  if (!probs || heads < 2 || lq < 1 || lk < 1) return 0;
  const float *base = probs + layer * heads * lq * lk;
  double sum = 0;
  int64_t count = 0;
  for (int64_t a = 0; a < heads; a++)
    for (int64_t b = a + 1; b < heads; b++)
      for (int64_t i = 0; i < lq; i++) {
        const float *pa = base + (a * lq + i) * lk, *pb = base + (b * lq + i) * lk;
        double tv = 0;
        for (int64_t j = 0; j < lk; j++) tv += fabs((double)pa[j] - (double)pb[j]);
        sum += 0.5 * tv, count++;
      }
  return count ? sum / (double)count : 0;
}

static const char causes[] =
    "  The usual causes (tutorial 6.1): initial weights that make every score q.k\n"
    "  nearly equal (try xavier_uniform_ on W_q and W_k), scores not scaled by\n"
    "  1/sqrt(d_k), W_q and W_k so alike that every query matches every key alike;\n"
    "  LayerNorm before the attention helps.\n";

/* "held-out accuracy of 99.3 %" or "... loss of 0.050" of what is known;
 * "" when nothing is. */
static void evidence(const attn_diag_context *c, char *buf, size_t n) {
  if (!isnan(c->accuracy))
    snprintf(buf, n, "held-out accuracy of %.1f %%", 100 * c->accuracy);
  else if (!isnan(c->loss))
    snprintf(buf, n, "held-out loss of %.3f", c->loss);
  else
    buf[0] = '\0';
}

/* 1 good, -1 poor, 0 neither or not known (a loss alone says nothing
 * without the task's baseline, unless it is near 0). */
static int verdict(const attn_diag_context *c) {
  if (!isnan(c->accuracy)) return c->accuracy >= ATTN_DIAG_ACC_GOOD ? 1 : c->accuracy <= ATTN_DIAG_ACC_POOR ? -1 : 0;
  if (!isnan(c->loss) && c->loss < 0.1) return 1;
  return 0;
}

/* "layer 0 heads 1,3; layer 1 head 0" */
static void which_heads(FILE *f, const attn_head_diag *d, int64_t layers, int64_t heads) {
  int said = 0;
  for (int64_t l = 0; l < layers; l++) {
    int64_t n = 0;
    for (int64_t h = 0; h < heads; h++) n += d[l * heads + h].pattern == ATTN_PATTERN_UNIFORM;
    if (!n) continue;
    fprintf(f, "%slayer %lld head%s ", said++ ? "; " : "", (long long)l, n > 1 ? "s" : "");
    for (int64_t h = 0, k = 0; h < heads; h++)
      if (d[l * heads + h].pattern == ATTN_PATTERN_UNIFORM) fprintf(f, "%s%lld", k++ ? "," : "", (long long)h);
  }
}

int attn_diagnose_advise(FILE *f, const attn_head_diag *d, const float *probs, int64_t layers,
                         int64_t heads, int64_t lq, int64_t lk, const attn_diag_context *ctx) {
  attn_diag_context none;
  attn_diag_context_default(&none);
  const attn_diag_context *c = ctx ? ctx : &none;
  int uniform = 0;
  double ent = 0;
  for (int64_t i = 0; i < layers * heads; i++)
    if (d[i].pattern == ATTN_PATTERN_UNIFORM) uniform++, ent += d[i].entropy;
  if (!uniform || !f) return uniform;
  ent /= uniform;
  double maxh = log((double)lk), eff = pow((double)lk, ent);
  fprintf(f, "\n%d of %lld head(s) spread their attention nearly evenly (", uniform,
          (long long)(layers * heads));
  which_heads(f, d, layers, heads);
  fprintf(f, "):\n  entropy %.2f of the maximum log(%lld) = %.2f nats%s, as if each query looked\n"
             "  at about %.0f of the %lld tokens alike instead of a few.\n",
          ent, (long long)lk, maxh, d[0].causal ? " (causal: log of the keys each query sees)" : "",
          eff, (long long)lk);
  if (lk < 8)
    fprintf(f, "  With only %lld keys even attention on two of them has entropy %.2f of the\n"
               "  maximum: the flag says little here.\n",
            (long long)lk, log(2.0) / maxh);
  if (probs)
    for (int64_t l = 0; l < layers && heads > 1; l++) {
      int any = 0;
      for (int64_t h = 0; h < heads; h++) any |= d[l * heads + h].pattern == ATTN_PATTERN_UNIFORM;
      if (!any) continue;
      double s = attn_diagnose_head_spread(probs, l, heads, lq, lk);
      if (s >= ATTN_DIAG_HEADS_DIFFER)
        fprintf(f, "  Layer %lld's heads differ from one another (mean difference %.2f of 1):\n"
                   "  the layer learned more than one thing.\n", (long long)l, s);
      else
        fprintf(f, "  Layer %lld's heads are nearly alike (mean difference %.2f of 1): they do\n"
                   "  the same thing, so fewer heads would do as well.\n", (long long)l, s);
    }
  char ev[64];
  evidence(c, ev, sizeof ev);
  int v = verdict(c);
  switch (c->kind) {
    case ATTN_DIAG_MODEL_POOLED:
      fputs("  This model is a mean-pooled classifier: it averages the outputs of all the\n"
            "  tokens before deciding, so no token has to be singled out by attention, and a\n"
            "  head that mixes the whole message evenly is a normal, legitimate solution\n"
            "  here, not a sign of bad initialisation.\n", f);
      if (v > 0)
        fprintf(f, "  Its %s says the model works: nothing to fix.\n", ev);
      else if (v < 0)
        fprintf(f, "  But its %s is poor: the model may have learned little at all; check\n"
                   "  the training (learning rate, epochs, data) before the attention.\n", ev);
      else if (ev[0])
        fprintf(f, "  Its %s decides whether anything needs fixing.\n", ev);
      else
        fputs("  Its accuracy decides whether anything needs fixing (attn eval MODEL): if it\n"
              "  is good, nothing does.\n", f);
      break;
    case ATTN_DIAG_MODEL_DECODER:
      fputs("  This model is a decoder: to predict the next token it usually needs a few\n"
            "  particular earlier tokens, so heads that stay spread evenly are suspicious.\n", f);
      if (v > 0)
        fprintf(f, "  Its %s is good, though: a few averaging heads (a summary of\n"
                   "  the context) can be legitimate; look at the other heads first.\n", ev);
      else {
        if (v < 0) fprintf(f, "  Its %s is poor, as attention that learned nothing would make it.\n", ev);
        fputs(causes, f);
      }
      break;
    default:
      if (d[0].causal)
        fputs("  No query looks at a later token: the weights are causal, as a decoder's are.\n", f);
      fputs("  Whether that is a fault depends on what the model is (say it with --model\n"
            "  classifier|decoder). In an untrained layer it is expected: random W_q and\n"
            "  W_k give nearly equal scores, and the softmax of equal scores is uniform. In\n"
            "  a trained mean-pooled classifier it is often legitimate (the average of all\n"
            "  the tokens decides anyway). In a trained decoder it is usually a fault.\n", f);
      if (ev[0])
        fprintf(f, "  Its %s %s.\n", ev,
                v > 0 ? "says the model works" : v < 0 ? "is poor" : "is middling");
      fputs("  If this layer should single out particular tokens:\n", f);
      fputs(causes, f);
      break;
  }
  return uniform;
}
