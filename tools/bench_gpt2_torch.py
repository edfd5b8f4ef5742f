"""PyTorch's side of `make bench-gpt2`: the checkpoint of
tools/gpt2_random_checkpoint.py (any GPT-2 in HF layout, f32) run in torch
as transformers' GPT2LMHeadModel runs it at generation: the prompt in one
step, then one token at a time with the keys and values of every layer
kept (torch.cat onto the cache, as HF's past_key_values), greedy. Prints
tokens/s and the new ids (to compare with attn's text).
Usage: /usr/bin/python3 tools/bench_gpt2_torch.py DIR PROMPT.txt TOKENS THREADS"""
import json
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_bpe_ref as ref  # noqa: E402
import st  # noqa: E402


def main():
    d, prompt_path, ntok, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    torch.set_num_threads(threads)
    with open(os.path.join(d, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    with open(os.path.join(d, "merges.txt"), encoding="utf-8") as f:
        merges = [tuple(l.rstrip("\n").split(" ")) for l in f
                  if l.strip() and not l.startswith("#version")]
    with open(prompt_path, encoding="utf-8") as f:
        ids = ref.Encoder(vocab, merges).encode(f.read())
    with open(os.path.join(d, "config.json")) as f:
        c = json.load(f)
    W = {k: v.float() for k, v in st.load(os.path.join(d, "model.safetensors"))[0].items()}
    E, H, L = c["n_embd"], c["n_head"], c["n_layer"]
    hd = E // H
    eps = c.get("layer_norm_epsilon", 1e-5)

    def ln(x, p):
        return torch.nn.functional.layer_norm(x, (E,), W[p + ".weight"], W[p + ".bias"], eps)

    def gelu_new(x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3.0))))

    def lin(x, p):
        return torch.addmm(W[p + ".bias"], x, W[p + ".weight"])

    cache = [None] * L

    def step(tok, pos):
        x = W["wte.weight"][tok] + W["wpe.weight"][pos:pos + len(tok)]
        n = x.shape[0]
        for i in range(L):
            p = "h.%d." % i
            q, k, v = lin(ln(x, p + "ln_1"), p + "attn.c_attn").split(E, 1)
            q, k, v = (t.view(n, H, hd).transpose(0, 1) for t in (q, k, v))
            if cache[i] is not None:
                k, v = torch.cat([cache[i][0], k], 1), torch.cat([cache[i][1], v], 1)
            cache[i] = (k, v)
            s = q @ k.transpose(1, 2) / math.sqrt(hd)
            if n > 1:
                s = s + torch.triu(torch.full((n, k.shape[1]), float("-inf")), 1 + k.shape[1] - n)
            o = (s.softmax(-1) @ v).transpose(0, 1).reshape(n, E)
            x = x + lin(o, p + "attn.c_proj")
            x = x + lin(gelu_new(lin(ln(x, p + "ln_2"), p + "mlp.c_fc")), p + "mlp.c_proj")
        return (ln(x[-1:], "ln_f") @ W["wte.weight"].T)[0]

    with torch.inference_mode():
        t0 = time.time()
        logits = step(ids, 0)
        t1 = time.time()
        out = []
        for t in range(ntok):
            out.append(int(logits.argmax()))
            if t + 1 < ntok:
                logits = step([out[-1]], len(ids) + t)
        t2 = time.time()
    print("torch %s: %d tokens in %.2f s: %.1f tokens/s (prompt: %d tokens in %.2f s; %d threads)"
          % (torch.__version__, ntok, t2 - t1, ntok / (t2 - t1), len(ids), t1 - t0, threads))
    inv = {i: s for s, i in vocab.items()}
    text = bytes(ref.CHAR_BYTES[ch] for i in out for ch in inv[i])
    sys.stdout.write("text: " + text.decode("utf-8", "replace").replace("\n", "\\n") + "\n")


if __name__ == "__main__":
    main()
