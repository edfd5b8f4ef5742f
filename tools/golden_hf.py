"""Golden checkpoints for `attn hf` (tests/golden/hf/): tiny Hugging Face
BERT and GPT-2 models, re-implemented here in torch with the module
structure of transformers' modeling_bert.py / modeling_gpt2.py (so
state_dict() gives Hugging Face's parameter names; `transformers` itself is
not needed), randomly initialised with a fixed seed, saved in HF layout:
  hf/bert/config.json, hf/bert/model.safetensors   BertModel (with pooler)
  hf/gpt2/config.json, hf/gpt2/model.safetensors   GPT2LMHeadModel
                                                   ("transformer." prefix, tied
                                                   lm_head not stored, the
                                                   attn.bias buffers stored as
                                                   older checkpoints do)
and the expected outputs for fixed input ids in hf/bert_expected.safetensors
and hf/gpt2_expected.safetensors. The weights are rounded to f32 and the
forward runs in float64, so the stored outputs are the exact answer for the
stored weights (tests/test_hf.c: tolerance 1e-5 relative + 1e-5 absolute).
What follows Hugging Face exactly: BERT's LayerNorm eps 1e-12, post-LN
layers, exact erf GELU, token_type_ids zeros by default, scores / sqrt(head
dim), pooler tanh(dense(h[:, 0])); GPT-2's Conv1D (y = x W + b, W [in, out]),
fused c_attn split q | k | v, causal mask, scores / sqrt(head dim), gelu_new
(tanh approximation), pre-LN blocks with eps 1e-5, final ln_f, LM head tied
to wte, position ids 0..L-1.
Usage: /usr/bin/python3 tools/golden_hf.py tests/golden
"""
import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st  # noqa: E402

OUT = os.path.join(sys.argv[1] if len(sys.argv) > 1 else "tests/golden", "hf")
DT = torch.float64

# ---- BERT (modeling_bert.py's module tree) --------------------------------


class BertEmbeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.word_embeddings = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.position_embeddings = nn.Embedding(c["max_position_embeddings"], c["hidden_size"])
        self.token_type_embeddings = nn.Embedding(c["type_vocab_size"], c["hidden_size"])
        self.LayerNorm = nn.LayerNorm(c["hidden_size"], eps=c["layer_norm_eps"])

    def forward(self, ids, token_type_ids):
        pos = torch.arange(ids.shape[1]).unsqueeze(0)
        x = self.word_embeddings(ids) + self.token_type_embeddings(token_type_ids)
        x = x + self.position_embeddings(pos)
        return self.LayerNorm(x)


class BertSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        e = c["hidden_size"]
        self.h = c["num_attention_heads"]
        self.query, self.key, self.value = nn.Linear(e, e), nn.Linear(e, e), nn.Linear(e, e)

    def heads(self, x):
        b, l, e = x.shape
        return x.view(b, l, self.h, e // self.h).permute(0, 2, 1, 3)

    def forward(self, x):
        q, k, v = self.heads(self.query(x)), self.heads(self.key(x)), self.heads(self.value(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        ctx = scores.softmax(-1) @ v
        b, h, l, d = ctx.shape
        return ctx.permute(0, 2, 1, 3).reshape(b, l, h * d)


class BertSelfOutput(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c["hidden_size"], c["hidden_size"])
        self.LayerNorm = nn.LayerNorm(c["hidden_size"], eps=c["layer_norm_eps"])

    def forward(self, h, x):
        return self.LayerNorm(self.dense(h) + x)


class BertAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.self = BertSelfAttention(c)
        self.output = BertSelfOutput(c)

    def forward(self, x):
        return self.output(self.self(x), x)


class BertIntermediate(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c["hidden_size"], c["intermediate_size"])

    def forward(self, x):
        return F.gelu(self.dense(x))  # hidden_act "gelu": exact erf


class BertOutput(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c["intermediate_size"], c["hidden_size"])
        self.LayerNorm = nn.LayerNorm(c["hidden_size"], eps=c["layer_norm_eps"])

    def forward(self, h, x):
        return self.LayerNorm(self.dense(h) + x)


class BertLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention = BertAttention(c)
        self.intermediate = BertIntermediate(c)
        self.output = BertOutput(c)

    def forward(self, x):
        a = self.attention(x)
        return self.output(self.intermediate(a), a)


class BertEncoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.layer = nn.ModuleList(BertLayer(c) for _ in range(c["num_hidden_layers"]))


class BertPooler(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c["hidden_size"], c["hidden_size"])

    def forward(self, x):
        return torch.tanh(self.dense(x[:, 0]))


class BertModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embeddings = BertEmbeddings(c)
        self.encoder = BertEncoder(c)
        self.pooler = BertPooler(c)

    def forward(self, ids, token_type_ids=None, n_layers=None):
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(ids)
        x = self.embeddings(ids, token_type_ids)
        for layer in self.encoder.layer[:n_layers]:
            x = layer(x)
        return x, self.pooler(x)


# ---- GPT-2 (modeling_gpt2.py's module tree) -------------------------------


class Conv1D(nn.Module):
    """y = x W + b with W [nx (in), nf (out)]: the transposed Linear layout."""

    def __init__(self, nf, nx):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.empty(nf))

    def forward(self, x):
        return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight).view(
            *x.shape[:-1], -1)


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3.0))))


class GPT2Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        e, n = c["n_embd"], c["n_positions"]
        self.h = c["n_head"]
        self.c_attn = Conv1D(3 * e, e)
        self.c_proj = Conv1D(e, e)
        # older checkpoints store this causal-mask buffer; loaders ignore it
        self.register_buffer("bias", torch.tril(torch.ones(n, n, dtype=torch.bool)).view(1, 1, n, n))

    def heads(self, x):
        b, l, e = x.shape
        return x.view(b, l, self.h, e // self.h).permute(0, 2, 1, 3)

    def forward(self, x):
        e = x.shape[-1]
        q, k, v = self.c_attn(x).split(e, dim=2)
        q, k, v = self.heads(q), self.heads(k), self.heads(v)
        w = q @ k.transpose(-1, -2) / (v.shape[-1] ** 0.5)
        l = x.shape[1]
        causal = self.bias[:, :, :l, :l]
        w = torch.where(causal, w, torch.tensor(torch.finfo(w.dtype).min, dtype=w.dtype))
        p = w.softmax(-1)
        self.last_probs = p  # [B, H, L, L], for the generation golden
        ctx = p @ v
        b, h, _, d = ctx.shape
        return self.c_proj(ctx.permute(0, 2, 1, 3).reshape(b, l, h * d))


class GPT2MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        e = c["n_embd"]
        inner = c["n_inner"] or 4 * e
        self.c_fc = Conv1D(inner, e)
        self.c_proj = Conv1D(e, inner)

    def forward(self, x):
        return self.c_proj(gelu_new(self.c_fc(x)))


class GPT2Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        e = c["n_embd"]
        self.ln_1 = nn.LayerNorm(e, eps=c["layer_norm_epsilon"])
        self.attn = GPT2Attention(c)
        self.ln_2 = nn.LayerNorm(e, eps=c["layer_norm_epsilon"])
        self.mlp = GPT2MLP(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.wte = nn.Embedding(c["vocab_size"], c["n_embd"])
        self.wpe = nn.Embedding(c["n_positions"], c["n_embd"])
        self.h = nn.ModuleList(GPT2Block(c) for _ in range(c["n_layer"]))
        self.ln_f = nn.LayerNorm(c["n_embd"], eps=c["layer_norm_epsilon"])

    def forward(self, ids, n_layers=None):
        pos = torch.arange(ids.shape[1]).unsqueeze(0)
        x = self.wte(ids) + self.wpe(pos)
        for block in self.h[:n_layers]:
            x = block(x)
        return self.ln_f(x)


class GPT2LMHeadModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.transformer = GPT2Model(c)

    def forward(self, ids, n_layers=None):
        h = self.transformer(ids, n_layers)
        return h, h @ self.transformer.wte.weight.T  # lm_head tied to wte


# ---- weights, files -------------------------------------------------------


def randomize(model, seed):
    """Every parameter random (biases and LayerNorms too, so that the name
    map of each is tested), rounded to f32."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm.weight" in name or name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
                v = 1.0 + 0.2 * torch.randn(p.shape, generator=g, dtype=DT)
            elif "embeddings" in name or name.endswith(("wte.weight", "wpe.weight")):
                v = 0.5 * torch.randn(p.shape, generator=g, dtype=DT)
            else:
                v = 0.15 * torch.randn(p.shape, generator=g, dtype=DT)
            p.copy_(v.float().to(DT))


def save_model(model, config, name):
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")
    tensors = {k: (v.float() if v.is_floating_point() else v) for k, v in model.state_dict().items()}
    st.save(os.path.join(d, "model.safetensors"), tensors, {"format": "pt"})


def f32(t):
    return t.detach().float()


def bert():
    c = {"architectures": ["BertModel"], "model_type": "bert", "vocab_size": 100,
         "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
         "intermediate_size": 64, "hidden_act": "gelu", "max_position_embeddings": 16,
         "type_vocab_size": 2, "layer_norm_eps": 1e-12, "position_embedding_type": "absolute",
         "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
         "initializer_range": 0.02, "pad_token_id": 0}
    torch.manual_seed(0)
    m = BertModel(c).to(DT).eval()
    randomize(m, 1)
    save_model(m, c, "bert")
    ids = torch.tensor([[1, 17, 42, 99, 0, 63, 2]])
    tt = torch.tensor([[0, 0, 0, 1, 1, 1, 1]])
    with torch.no_grad():
        h, pooled = m(ids)
        h_tt, pooled_tt = m(ids, tt)
        h1, _ = m(ids, n_layers=1)
    st.save(os.path.join(OUT, "bert_expected.safetensors"), {
        "input_ids": ids.int(), "token_type_ids": tt.int(),
        "last_hidden_state": f32(h), "pooler_output": f32(pooled),
        "last_hidden_state_tt": f32(h_tt), "pooler_output_tt": f32(pooled_tt),
        "last_hidden_state_1layer": f32(h1)})


def gpt2():
    c = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": 96,
         "n_embd": 32, "n_layer": 2, "n_head": 4, "n_inner": None, "n_positions": 16,
         "n_ctx": 16, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
         "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1, "initializer_range": 0.02,
         "scale_attn_weights": True, "bos_token_id": 95, "eos_token_id": 95}
    torch.manual_seed(0)
    m = GPT2LMHeadModel(c).to(DT).eval()
    randomize(m, 2)
    save_model(m, c, "gpt2")
    ids = torch.tensor([[95, 3, 14, 15, 92, 65, 35, 89, 79]])
    with torch.no_grad():
        h, logits = m(ids)
        h1, logits1 = m(ids, n_layers=1)
    st.save(os.path.join(OUT, "gpt2_expected.safetensors"), {
        "input_ids": ids.int(), "last_hidden_state": f32(h), "logits": f32(logits),
        "next_token": logits[0, -1].argmax().reshape(1).int(),
        "last_hidden_state_1layer": f32(h1), "logits_1layer": f32(logits1)})


GEN_CORPUS = """It was the best of times, it was the worst of times, it was the age of wisdom,
it was the age of foolishness, it was the epoch of belief, it was the epoch of incredulity,
it was the season of Light, it was the season of Darkness, it was the spring of hope, it was
the winter of despair, we had everything before us, we had nothing before us."""


def gpt2_generate():
    """hf/gpt2gen: a GPT-2 with a tokenizer (vocab.json + merges.txt +
    tokenizer.json, trained by tools/gpt2_bpe_ref.py) and the greedy
    continuation of a prompt by the full forward at every step, in float64:
    the prompt's ids (the reference encoder's), the 24 ids and each step's
    logits [24, V]; every step's best logit leads the second by > 1e-3; and
    the attention probabilities [layers, heads, L, L] of prompt + the 24."""
    import gpt2_bpe_ref as ref
    vocab, merges = ref.train(GEN_CORPUS, 120)
    d = os.path.join(OUT, "gpt2gen")
    full = ref.write_hf(d, vocab, merges)
    c = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": len(full),
         "n_embd": 32, "n_layer": 2, "n_head": 4, "n_inner": None, "n_positions": 64,
         "n_ctx": 64, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
         "scale_attn_weights": True, "bos_token_id": len(full) - 1,
         "eos_token_id": len(full) - 1}
    torch.manual_seed(0)
    m = GPT2LMHeadModel(c).to(DT).eval()
    randomize(m, 3)
    save_model(m, c, "gpt2gen")
    prompt = "It was the age of wisdom, it was"
    ids = ref.Encoder(full, merges).encode(prompt)
    seq, steps = list(ids), []
    with torch.no_grad():
        for _ in range(24):
            _, logits = m(torch.tensor([seq]))
            last = logits[0, -1]
            top = last.topk(2).values
            assert top[0] - top[1] > 1e-3, "a near tie at step %d" % len(steps)
            steps.append(f32(last))
            seq.append(int(last.argmax()))
        m(torch.tensor([seq]))  # the whole sequence's attention, every layer
        probs = torch.stack([blk.attn.last_probs[0] for blk in m.transformer.h])
    st.save(os.path.join(OUT, "gpt2gen_expected.safetensors"), {
        "prompt_ids": torch.tensor(ids, dtype=torch.int32),
        "greedy_ids": torch.tensor(seq[len(ids):], dtype=torch.int32),
        "step_logits": torch.stack(steps), "attn_probs": f32(probs)}, {"prompt": prompt})


if __name__ == "__main__":
    bert()
    gpt2()
    gpt2_generate()
