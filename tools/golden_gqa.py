"""Golden files for grouped-query / multi-query attention as a
MultiheadAttention option (num_kv_heads): torch 1.13's nn.MultiheadAttention
has no such option, so the reference is written out explicitly in float64 —
separate q/k/v projections (k/v with num_kv_heads * head_dim outputs), each
query head h reading key/value head h // (H / Hkv), masks as in PyTorch
(bool true = not allowed), out_proj. Saved under the names `attn layer`
reads (kind mha, metadata num_kv_heads)."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st  # noqa: E402


def case(path, B, Lq, Lk, E, H, Hkv, kdim, bias, masks, seed):
    g = torch.Generator().manual_seed(seed)
    hd = E // H
    Ekv = Hkv * hd

    def r(*s, scale=1.0):
        return (torch.randn(*s, generator=g) * scale).float()

    p = {
        "q_proj_weight": r(E, E, scale=E**-0.5),
        "k_proj_weight": r(Ekv, kdim, scale=kdim**-0.5),
        "v_proj_weight": r(Ekv, kdim, scale=kdim**-0.5),
        "out_proj.weight": r(E, E, scale=E**-0.5),
    }
    if bias:
        p["in_proj_bias"] = r(E + 2 * Ekv, scale=0.1)
        p["out_proj.bias"] = r(E, scale=0.1)
    x = {"query": r(B, Lq, E), "key": r(B, Lk, kdim), "value": r(B, Lk, kdim)}
    m = {}
    if masks:
        kpm = torch.zeros(B, Lk, dtype=torch.bool)
        kpm[0, -2:] = True
        m["key_padding_mask"] = kpm
        m["attn_mask"] = r(Lq, Lk, scale=0.5)
    t = {k: v.double().requires_grad_() for k, v in {**p, **x}.items()}
    bq = t["in_proj_bias"][:E] if bias else 0
    bk = t["in_proj_bias"][E : E + Ekv] if bias else 0
    bv = t["in_proj_bias"][E + Ekv :] if bias else 0
    q = (t["query"] @ t["q_proj_weight"].T + bq).view(B, Lq, H, hd).transpose(1, 2)
    k = (t["key"] @ t["k_proj_weight"].T + bk).view(B, Lk, Hkv, hd).transpose(1, 2)
    v = (t["value"] @ t["v_proj_weight"].T + bv).view(B, Lk, Hkv, hd).transpose(1, 2)
    k = k.repeat_interleave(H // Hkv, 1)
    v = v.repeat_interleave(H // Hkv, 1)
    s = q @ k.transpose(-1, -2) / hd**0.5
    if masks:
        s = s + m["attn_mask"].double()
        s = s.masked_fill(m["key_padding_mask"][:, None, None, :], float("-inf"))
    a = torch.softmax(s, -1)
    ctx = (a @ v).transpose(1, 2).reshape(B, Lq, E)
    out = ctx @ t["out_proj.weight"].T + (t["out_proj.bias"] if bias else 0)
    dout = r(B, Lq, E)
    out.backward(dout.double())
    save = {**p, **x, **m, "dout": dout, "out": out.detach().float(),
            "attn_weights": a.mean(1).detach().float()}
    for k_, v_ in t.items():
        save["grad." + k_] = v_.grad.float()
    st.save(path, save, {"kind": "mha", "num_heads": H, "num_kv_heads": Hkv})


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/golden"
    case(f"{out}/nn_mha_gqa.safetensors", 2, 7, 9, 32, 8, 2, 32, True, True, 11)
    case(f"{out}/nn_mha_mqa_kdim.safetensors", 2, 5, 6, 24, 4, 1, 20, False, True, 12)
