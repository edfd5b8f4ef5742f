"""A GPT-2 checkpoint in Hugging Face layout with random weights (N(0, 0.02),
LayerNorms 1 / 0, biases 0), for timing `attn hf generate` where no real
one can be downloaded: DIR/config.json + DIR/model.safetensors (f32, the
names of GPT2Model, Conv1D weights [in, out]). Default: GPT-2 small's
shapes (124M parameters, 498 MB).
Usage: /usr/bin/python3 tools/gpt2_random_checkpoint.py DIR [--layers 12]
         [--dim 768] [--heads 12] [--vocab 50257] [--positions 1024] [--seed 0]"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--positions", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    E, V, P = a.dim, a.vocab, a.positions
    g = torch.Generator().manual_seed(a.seed)

    def rnd(*shape, std=0.02):
        return (torch.randn(*shape, generator=g) * std).float()

    t = {"wte.weight": rnd(V, E), "wpe.weight": rnd(P, E, std=0.01),
         "ln_f.weight": torch.ones(E), "ln_f.bias": torch.zeros(E)}
    for i in range(a.layers):
        p = "h.%d." % i
        for ln in ("ln_1", "ln_2"):
            t[p + ln + ".weight"], t[p + ln + ".bias"] = torch.ones(E), torch.zeros(E)
        for name, fin, fout in (("attn.c_attn", E, 3 * E), ("attn.c_proj", E, E),
                                ("mlp.c_fc", E, 4 * E), ("mlp.c_proj", 4 * E, E)):
            t[p + name + ".weight"], t[p + name + ".bias"] = rnd(fin, fout), torch.zeros(fout)
    os.makedirs(a.dir, exist_ok=True)
    st.save(os.path.join(a.dir, "model.safetensors"), t, {"format": "pt"})
    with open(os.path.join(a.dir, "config.json"), "w") as f:
        json.dump({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": V,
                   "n_embd": E, "n_layer": a.layers, "n_head": a.heads, "n_positions": P,
                   "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
                   "bos_token_id": V - 1, "eos_token_id": V - 1}, f, indent=2)
    n = sum(x.numel() for x in t.values())
    print("wrote %s: %d layers, dim %d, vocab %d: %.1fM parameters" % (a.dir, a.layers, E, V, n / 1e6))


if __name__ == "__main__":
    main()
