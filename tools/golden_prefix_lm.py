"""Golden files for prefix-LM attention (tests/golden/plm_*.safetensors).

    /usr/bin/python3 tools/golden_prefix_lm.py tests/golden

Prefix-LM as FlexAttention writes it (or_masks(prefix_mask, causal_mask)): the
first prefix_lens[b] keys of batch b are visible to every query, the rest
causally. Here the boolean mask is built in torch from that rule,
    allowed[b, i, j] = (j <= p_i) | (j < prefix_lens[b])
with p_i = i + q_offset, then ANDed with the window, key_lens and bool mask
when a case has them; attention in float64 with autograd on the f32 inputs:
    s = scale q·kᵀ (-inf where not allowed),  lse = logsumexp(s),
    out = softmax(s) v   (a row with no allowed key: out 0, lse -inf).

plm_varlen is a packed variable-length file (cu_seqlens_q / cu_seqlens_k, each
sequence aligned bottom-right, prefix_lens per sequence in its own key
positions; out [total_q, Hq, Dv], lse [Hq, total_q]), each sequence computed
alone by the same formulas.

Each file is an `attn sdpa` input (q, k, v, dout, prefix_lens, mask,
key_lens; __metadata__ causal, window_left, window_right, q_offset) plus the
expected out, lse, dq, dk, dv."""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st  # noqa: E402


def reference(q, k, v, dout, allowed):
    """float64 attention of f32 q [B,Hq,Lq,D], k, v [B,Hkv,Lk,*] under allowed
    [B,1|Hq,Lq,Lk]: out, lse, dq, dk, dv (f32)."""
    Hq, Hkv, D = q.shape[1], k.shape[1], q.shape[3]
    leaves = [t.double().clone().requires_grad_(True) for t in (q, k, v)]
    g = Hq // Hkv
    kk = leaves[1].repeat_interleave(g, dim=1)
    vv = leaves[2].repeat_interleave(g, dim=1)
    s = (leaves[0] @ kk.transpose(-1, -2) / math.sqrt(D)).masked_fill(~allowed, -math.inf)
    row_ok = allowed.expand_as(s).any(-1, keepdim=True)
    p = torch.softmax(torch.where(row_ok, s, torch.zeros_like(s)), -1) * row_ok
    lse = torch.logsumexp(s, -1)
    out = p @ vv
    (out * dout.double()).sum().backward()
    return (out.detach().float(), lse.detach().float(), leaves[0].grad.float(),
            leaves[1].grad.float(), leaves[2].grad.float())


def prefix_lm_mask(B, Lq, Lk, prefix_lens, q_offset=0):
    """FlexAttention's prefix-LM mask as a torch bool [B, 1, Lq, Lk]."""
    pi = (torch.arange(Lq) + q_offset).view(1, 1, Lq, 1)
    j = torch.arange(Lk).view(1, 1, 1, Lk)
    prefix = torch.tensor(prefix_lens).view(B, 1, 1, 1)
    return (j <= pi) | (j < prefix)


def case(seed, B, Hq, Hkv, Lq, Lk, D, Dv, prefix_lens, q_offset=0, wl=-1, wr=-1, key_lens=None,
         bool_mask=False):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(B, Hq, Lq, D, generator=gen)
    k = torch.randn(B, Hkv, Lk, D, generator=gen)
    v = torch.randn(B, Hkv, Lk, Dv, generator=gen)
    dout = torch.randn(B, Hq, Lq, Dv, generator=gen)
    files = {"q": q, "k": k, "v": v, "dout": dout,
             "prefix_lens": torch.tensor(prefix_lens, dtype=torch.int32)}
    meta = {"causal": 1}
    if q_offset:
        meta["q_offset"] = q_offset
    allowed = prefix_lm_mask(B, Lq, Lk, prefix_lens, q_offset)
    pi = (torch.arange(Lq) + q_offset).view(1, 1, Lq, 1)
    j = torch.arange(Lk).view(1, 1, 1, Lk)
    if wl >= 0:
        meta["window_left"] = wl
        allowed = allowed & (j >= pi - wl)
    if wr >= 0:
        meta["window_right"] = wr
        allowed = allowed & (j <= pi + wr)
    if key_lens is not None:
        files["key_lens"] = torch.tensor(key_lens, dtype=torch.int32)
        allowed = allowed & (j < torch.tensor(key_lens).view(B, 1, 1, 1))
    if bool_mask:
        m = torch.rand(B, 1, Lq, Lk, generator=gen) > 0.15
        files["mask"] = m
        allowed = allowed & m
    out, lse, dq, dk, dv = reference(q, k, v, dout, allowed)
    files.update({"out": out, "lse": lse, "dq": dq, "dk": dk, "dv": dv})
    return files, meta


def varlen_case(seed, lq, lk, prefix_lens, Hq, Hkv, D, Dv):
    gen = torch.Generator().manual_seed(seed)
    n = len(lq)
    qs = [torch.randn(1, Hq, m, D, generator=gen) for m in lq]
    ks = [torch.randn(1, Hkv, m, D, generator=gen) for m in lk]
    vs = [torch.randn(1, Hkv, m, Dv, generator=gen) for m in lk]
    ds = [torch.randn(1, Hq, m, Dv, generator=gen) for m in lq]
    refs = [reference(qs[s], ks[s], vs[s], ds[s],
                      prefix_lm_mask(1, lq[s], lk[s], [prefix_lens[s]], lk[s] - lq[s]))
            for s in range(n)]

    def pack(ts):  # [1, H, len, D] each -> [total, H, D]
        return torch.cat([t[0].transpose(0, 1) for t in ts], 0).float()

    def cu(ls):
        return torch.tensor([0] + [sum(ls[:i + 1]) for i in range(n)], dtype=torch.int32)
    files = {"q": pack(qs), "k": pack(ks), "v": pack(vs), "dout": pack(ds),
             "cu_seqlens_q": cu(lq), "cu_seqlens_k": cu(lk),
             "prefix_lens": torch.tensor(prefix_lens, dtype=torch.int32),
             "out": pack([r[0] for r in refs]), "lse": torch.cat([r[1][0] for r in refs], 1),
             "dq": pack([r[2] for r in refs]), "dk": pack([r[3] for r in refs]),
             "dv": pack([r[4] for r in refs])}
    return files, {"causal": 1}


def cases():
    return {
        # two sequences: a 5-token prefix, and none (plain causal)
        "basic": case(1, 2, 4, 2, 12, 12, 16, 16, [5, 0]),
        # prefix longer than the queries' reach, a whole-sequence prefix (bidirectional),
        # GQA, Dv != D, more keys than one flash block
        "long": case(2, 3, 4, 1, 80, 80, 32, 24, [37, 80, 1]),
        # a decoder over a cache: q_offset, window, key padding and a bool mask on top
        "combined": case(3, 2, 2, 2, 9, 20, 8, 8, [6, 13], q_offset=11, wl=7, key_lens=[20, 15],
                         bool_mask=True),
        "varlen": varlen_case(4, [5, 0, 9, 70], [7, 3, 9, 130], [4, 2, 9, 100], 4, 2, 8, 6),
    }


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "tests/golden"
    for name, (files, meta) in cases().items():
        st.save(os.path.join(out_dir, "plm_%s.safetensors" % name), files,
                {k: str(v) for k, v in meta.items()})


if __name__ == "__main__":
    main()
