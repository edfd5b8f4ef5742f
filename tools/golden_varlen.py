"""Golden files for per-sequence alignment, per-batch ALiBi slopes and packed
variable-length batches (tests/golden/al_*.safetensors).

    /usr/bin/python3 tools/golden_varlen.py tests/golden

torch 1.13 in float64, each batch element computed on its own: query i of
element b sits at p_i = i + q_offsets[b] (or + q_offset, any sign; bottom-right
alignment = key_len - q_len), keys j < key_lens[b]; causal j <= p_i, window
p_i - left <= j <= p_i + right; ALiBi -slope[b, h] |p_i - j| (slopes [Hq] or
[B, Hq], learnable: dalibi_slopes), T5 buckets, Shaw tables. A row with no
allowed key has out 0, lse -inf and zero gradient. Files with q_lens hold a
padded batch whose rows i >= q_lens[b] are padding (dout 0 there): the packed
varlen call on the valid rows must give the same numbers.

Tensors: q, k, v [B,H,L,D], dout, optional key_lens (int32 [B]), q_offsets
(int64 [B]), q_lens (int32 [B]), alibi_slopes, rel_bias, shaw_k, shaw_v;
expected out, lse, dq, dk, dv, dalibi_slopes, drel_bias, dshaw_k, dshaw_v.
Metadata: causal, window_left, window_right, q_offset, rel_max_distance,
rel_bidirectional."""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st  # noqa: E402
from golden_variants import alibi_slopes, t5_bucket  # noqa: E402


def f32(x):
    return x.detach().float()


def case(seed, B, Hq, Hkv, Lq, Lk, D, Dv, causal=0, wl=-1, wr=-1, q_offset=0, q_offsets=None,
         key_lens=None, q_lens=None, alibi=None, t5=None, shaw=None):
    """alibi: None, "shared" ([Hq]) or "batch" ([B, Hq]); t5 (buckets, max_distance, bidir);
    shaw: M."""
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(B, Hq, Lq, D, generator=gen)
    k = torch.randn(B, Hkv, Lk, D, generator=gen)
    v = torch.randn(B, Hkv, Lk, Dv, generator=gen)
    dout = torch.randn(B, Hq, Lq, Dv, generator=gen)
    files = {"q": q, "k": k, "v": v}
    meta = {"causal": causal, "window_left": wl, "window_right": wr, "q_offset": q_offset}
    if q_lens is not None:
        files["q_lens"] = torch.tensor(q_lens, dtype=torch.int32)
        for b in range(B):
            dout[b, :, q_lens[b]:] = 0.0  # padding rows: no gradient flows from them
    files["dout"] = dout
    if q_offsets is not None:
        files["q_offsets"] = torch.tensor(q_offsets, dtype=torch.int64)
    if key_lens is not None:
        files["key_lens"] = torch.tensor(key_lens, dtype=torch.int32)
    leaves = {n: t.double().clone().requires_grad_(True) for n, t in (("q", q), ("k", k), ("v", v))}
    if alibi:
        base = torch.tensor(alibi_slopes(Hq), dtype=torch.float32)
        sl = base if alibi == "shared" else base.view(1, Hq) * (1.0 + 0.5 * torch.arange(B).view(B, 1))
        files["alibi_slopes"] = sl
        leaves["alibi_slopes"] = sl.double().clone().requires_grad_(True)
    if t5:
        nb, md, bi = t5
        tb = torch.randn(Hq, nb, generator=gen)
        files["rel_bias"] = tb
        meta["rel_max_distance"] = md
        meta["rel_bidirectional"] = bi
        leaves["rel_bias"] = tb.double().clone().requires_grad_(True)
    if shaw:
        rows = 2 * shaw - 1
        files["shaw_k"] = torch.randn(rows, D, generator=gen) * 0.5
        files["shaw_v"] = torch.randn(rows, Dv, generator=gen) * 0.5
        leaves["shaw_k"] = files["shaw_k"].double().clone().requires_grad_(True)
        leaves["shaw_v"] = files["shaw_v"].double().clone().requires_grad_(True)
    g = Hq // Hkv
    kk = leaves["k"].repeat_interleave(g, dim=1)
    vv = leaves["v"].repeat_interleave(g, dim=1)
    sc = 1.0 / math.sqrt(D)
    outs, lses = [], []
    j = torch.arange(Lk)
    for b in range(B):
        off = q_offsets[b] if q_offsets is not None else q_offset
        pi = torch.arange(Lq) + off
        rel = j.view(1, Lk) - pi.view(Lq, 1)
        s = leaves["q"][b] @ kk[b].transpose(-1, -2) * sc  # [Hq, Lq, Lk]
        if alibi:
            sl = leaves["alibi_slopes"] if alibi == "shared" else leaves["alibi_slopes"][b]
            s = s - sl.view(Hq, 1, 1) * rel.abs().double().view(1, Lq, Lk)
        if t5:
            s = s + leaves["rel_bias"][:, t5_bucket(rel, bool(t5[2]), t5[0], t5[1])]
        idx = None
        if shaw:
            idx = torch.clamp(pi.view(Lq, 1) - j.view(1, Lk), -(shaw - 1), shaw - 1) + shaw - 1
            s = s + sc * torch.einsum("hid,ijd->hij", leaves["q"][b], leaves["shaw_k"][idx])
        allowed = torch.ones(Lq, Lk, dtype=torch.bool)
        if key_lens is not None:
            allowed &= j.view(1, Lk) < key_lens[b]
        if causal:
            allowed &= j.view(1, Lk) <= pi.view(Lq, 1)
        if wl >= 0:
            allowed &= j.view(1, Lk) >= pi.view(Lq, 1) - wl
        if wr >= 0:
            allowed &= j.view(1, Lk) <= pi.view(Lq, 1) + wr
        s = s.masked_fill(~allowed, -math.inf)
        row_ok = (s != -math.inf).any(-1, keepdim=True)
        p = torch.softmax(torch.where(row_ok, s, torch.zeros_like(s)), -1) * row_ok
        o = p @ vv[b]
        if shaw:
            o = o + torch.einsum("hij,ijd->hid", p, leaves["shaw_v"][idx])
        outs.append(o)
        lses.append(torch.logsumexp(s, -1))
    out, lse = torch.stack(outs), torch.stack(lses)
    (out * dout.double()).sum().backward()
    files.update({"out": f32(out), "lse": f32(lse)})
    for n in ("q", "k", "v", "alibi_slopes", "rel_bias", "shaw_k", "shaw_v"):
        if n in leaves:
            files["d" + n] = f32(leaves[n].grad)
    return files, meta


def cases():
    return {
        # FlashAttention's causal when seqlen_q > seqlen_k: the first Lq - Lk rows see no key
        "bottom_right": case(1, 2, 4, 2, 12, 7, 8, 8, causal=1, q_offset=-5, alibi="shared"),
        "window_br": case(2, 1, 2, 2, 10, 6, 4, 6, wl=2, wr=1, q_offset=-4, t5=(8, 16, 1)),
        # padded batch of sequences (q_lens, key_lens) aligned bottom-right each
        "padded": case(3, 3, 4, 2, 9, 11, 8, 8, causal=1, key_lens=[11, 4, 7], q_lens=[9, 6, 2],
                       q_offsets=[2, -2, 5], alibi="batch"),
        "padded_window": case(4, 3, 2, 1, 8, 10, 4, 4, causal=1, wl=3, key_lens=[10, 3, 6],
                              q_lens=[5, 8, 6], q_offsets=[5, -5, 0], t5=(8, 20, 0), shaw=3),
        "padded_plain": case(5, 4, 2, 2, 7, 9, 8, 4, key_lens=[9, 1, 5, 0], q_lens=[7, 3, 0, 2],
                             q_offsets=[2, -2, 5, -2], wr=0),
    }


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "tests/golden"
    for name, (files, meta) in cases().items():
        st.save(os.path.join(outdir, f"al_{name}.safetensors"), files,
                {k: str(v) for k, v in meta.items()})


if __name__ == "__main__":
    main()
