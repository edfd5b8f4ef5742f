"""Golden values for the language model (src/apps/lm/lm_model.h, tests/test_lm.c):
a tiny decoder-only Transformer built in PyTorch from the same parameter names,
its logits, mean cross-entropy and every parameter's gradient.

    /usr/bin/python3 tools/golden_lm.py tests/golden

Model: 2 pre-LN blocks, d_model 16, 2 heads (head_dim 8), ff 32, vocab 50;
attention without projection biases, RoPE (half split, theta 10000) on q and
k, causal softmax; FFN fc2(gelu(fc1(x))) with biases (exact-erf GELU);
ln_f, then the logits with the tied embedding (lm_tiny.safetensors) or an
own lm_head.weight (lm_tiny_untied.safetensors). Input ids [2, 8], targets
the next ids (the last one of the second row ignored: -1)."""
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st  # noqa: E402

V, E, H, FF, NL, B, T = 50, 16, 2, 32, 2, 2, 8
HD = E // H


def rope(x, pos0=0):
    # x [B, T, H, D]; pairs (c, c + D/2), angle pos * theta^(-2c/D)
    D = x.shape[-1]
    c = torch.arange(D // 2, dtype=torch.float64)
    inv = 10000.0 ** (-2.0 * c / D)
    pos = torch.arange(pos0, pos0 + x.shape[1], dtype=torch.float64)
    ang = pos[:, None] * inv[None, :]
    cos = torch.cos(ang).float()[None, :, None, :]
    sin = torch.sin(ang).float()[None, :, None, :]
    x1, x2 = x[..., : D // 2], x[..., D // 2:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def forward(p, ids, tied):
    x = p["tok_embeddings.weight"][ids]
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    for i in range(NL):
        pre = "blocks.%d." % i
        a = F.layer_norm(x, (E,), p[pre + "ln1.weight"], p[pre + "ln1.bias"], 1e-5)
        q = (a @ p[pre + "attn.q_proj.weight"].t()).view(B, T, H, HD)
        k = (a @ p[pre + "attn.k_proj.weight"].t()).view(B, T, H, HD)
        v = (a @ p[pre + "attn.v_proj.weight"].t()).view(B, T, H, HD)
        q, k = rope(q), rope(k)
        s = torch.einsum("bthd,bshd->bhts", q, k) / math.sqrt(HD)
        s = s.masked_fill(~mask, float("-inf"))
        ctx = torch.einsum("bhts,bshd->bthd", s.softmax(-1), v).reshape(B, T, E)
        x = x + ctx @ p[pre + "attn.o_proj.weight"].t()
        a = F.layer_norm(x, (E,), p[pre + "ln2.weight"], p[pre + "ln2.bias"], 1e-5)
        h = F.gelu(a @ p[pre + "ffn.fc1.weight"].t() + p[pre + "ffn.fc1.bias"])
        x = x + h @ p[pre + "ffn.fc2.weight"].t() + p[pre + "ffn.fc2.bias"]
    x = F.layer_norm(x, (E,), p["ln_f.weight"], p["ln_f.bias"], 1e-5)
    W = p["tok_embeddings.weight"] if tied else p["lm_head.weight"]
    return x @ W.t()


def params(g, tied):
    shapes = {"tok_embeddings.weight": (V, E)}
    for i in range(NL):
        pre = "blocks.%d." % i
        shapes.update({pre + "ln1.weight": (E,), pre + "ln1.bias": (E,),
                       pre + "attn.q_proj.weight": (E, E), pre + "attn.k_proj.weight": (E, E),
                       pre + "attn.v_proj.weight": (E, E), pre + "attn.o_proj.weight": (E, E),
                       pre + "ln2.weight": (E,), pre + "ln2.bias": (E,),
                       pre + "ffn.fc1.weight": (FF, E), pre + "ffn.fc1.bias": (FF,),
                       pre + "ffn.fc2.weight": (E, FF), pre + "ffn.fc2.bias": (E,)})
    shapes.update({"ln_f.weight": (E,), "ln_f.bias": (E,)})
    if not tied:
        shapes["lm_head.weight"] = (V, E)
    p = {}
    for n, s in shapes.items():
        if n.endswith("norm.weight") or ("ln" in n and n.endswith("weight")):
            t = 1.0 + 0.1 * torch.randn(s, generator=g)
        else:
            t = (0.3 if len(s) == 2 else 0.1) * torch.randn(s, generator=g)
        p[n] = t.float().requires_grad_(True)
    return p


def case(out, tied, seed):
    g = torch.Generator().manual_seed(seed)
    p = params(g, tied)
    ids = torch.randint(0, V, (B, T + 1), generator=g)
    inp, tgt = ids[:, :T].contiguous(), ids[:, 1:].contiguous().clone()
    tgt[1, T - 1] = -1
    logits = forward(p, inp, tied)
    loss = F.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1), ignore_index=-1)
    loss.backward()
    t = {n: x.detach() for n, x in p.items()}
    t["input_ids"] = inp.int()
    t["targets"] = tgt.int()
    t["logits"] = logits.detach().reshape(B * T, V)
    t["loss"] = loss.detach().reshape(1)
    for n, x in p.items():
        t["grad." + n] = x.grad.detach()
    st.save(out, t, {"tied": str(int(tied)), "generator": "tools/golden_lm.py"})


if __name__ == "__main__":
    d = sys.argv[1] if len(sys.argv) > 1 else "tests/golden"
    case(os.path.join(d, "lm_tiny.safetensors"), True, 36)
    case(os.path.join(d, "lm_tiny_untied.safetensors"), False, 37)
