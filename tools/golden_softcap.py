"""Golden files for logit softcap and attention sinks (tests/golden/cap_sdpa_*.safetensors).

    /usr/bin/python3 tools/golden_softcap.py tests/golden

torch 1.13 in float64 with autograd on the f32 inputs, the formulas written out:
  s = scale q·kᵀ;  s = softcap * tanh(s / softcap)   (FlashAttention's softcap,
  ggml's logit_softcap: before the mask and the ALiBi bias);  s += mask - ALiBi;
  disallowed keys (causal, window, key_lens, bool mask) -inf;  the sink of head h
  appended as one more logit column with no value (gpt-oss's sinks):
  lse = logsumexp([s, sink]),  p = e^(s - lse),  out = p v.
A row with no allowed key gets out 0 and lse = its sink (-inf without sinks).

cap_sdpa_varlen is a packed variable-length file (cu_seqlens_q / cu_seqlens_k,
each sequence aligned bottom-right, per-sequence ALiBi slopes [B, Hq]; out
[total_q, Hq, Dv], lse [Hq, total_q]), each sequence computed alone by
peer_suite.sdpa_ref (the same formulas).

Each file is an `attn sdpa` input (q, k, v, dout, mask, key_lens, alibi_slopes,
sinks; __metadata__ causal, window_left, window_right, q_offset, softcap; see
docs/VARIANTS.md) plus the expected out, lse, dq, dk, dv, dsinks."""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st  # noqa: E402
from golden_variants import alibi_slopes  # noqa: E402


def probs_lse(s, sinks=None):
    """Softmax of the logits s [B, Hq, Lq, Lk] (-inf: disallowed) with the sink
    of head h [Hq] as one more logit column with no value: (p, lse). A row with
    no allowed key gets p 0 and lse = its sink (-inf without sinks)."""
    if sinks is not None:
        B, Hq, Lq, _ = s.shape
        lse = torch.logsumexp(torch.cat([s, sinks.view(1, Hq, 1, 1).expand(B, Hq, Lq, 1)], -1), -1)
        return torch.exp(s - lse.unsqueeze(-1)), lse
    row_ok = (s != -math.inf).any(-1, keepdim=True)
    p = torch.softmax(torch.where(row_ok, s, torch.zeros_like(s)), -1) * row_ok
    return p, torch.logsumexp(s, -1)


def case(seed, B, Hq, Hkv, Lq, Lk, D, Dv, softcap=0.0, sinks=False, causal=0, wl=-1, wr=-1,
         q_offset=0, mask=None, key_lens=None, alibi=False, qmul=3.0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(B, Hq, Lq, D, generator=gen) * qmul  # large logits: the cap matters
    k = torch.randn(B, Hkv, Lk, D, generator=gen)
    v = torch.randn(B, Hkv, Lk, Dv, generator=gen)
    dout = torch.randn(B, Hq, Lq, Dv, generator=gen)
    files = {"q": q, "k": k, "v": v, "dout": dout}
    meta = {"causal": causal, "window_left": wl, "window_right": wr}
    if q_offset:
        meta["q_offset"] = q_offset
    if softcap:
        meta["softcap"] = repr(softcap)
    leaves = {n: t.double().clone().requires_grad_(True) for n, t in (("q", q), ("k", k), ("v", v))}
    if sinks:
        sk = torch.randn(Hq, generator=gen) * 2.0 + 1.0
        files["sinks"] = sk
        leaves["sinks"] = sk.double().clone().requires_grad_(True)
    g = Hq // Hkv
    kk = leaves["k"].repeat_interleave(g, dim=1)
    vv = leaves["v"].repeat_interleave(g, dim=1)
    s = leaves["q"] @ kk.transpose(-1, -2) / math.sqrt(D)
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    pi = torch.arange(Lq) + q_offset
    j = torch.arange(Lk)
    allowed = torch.ones(B, 1, Lq, Lk, dtype=torch.bool)
    if mask == "float":  # [B, 1, Lq, Lk] with some -inf
        m = torch.randn(B, 1, Lq, Lk, generator=gen)
        m = m.masked_fill(torch.rand(B, 1, Lq, Lk, generator=gen) < 0.15, -math.inf)
        files["mask"] = m
        s = s + m.double()
    elif mask == "bool":  # [Lq, Lk]
        m = torch.rand(Lq, Lk, generator=gen) > 0.2
        files["mask"] = m
        allowed = allowed & m
    if alibi:
        sl = torch.tensor(alibi_slopes(Hq), dtype=torch.float32)
        files["alibi_slopes"] = sl
        rel = (j.view(1, Lk) - pi.view(Lq, 1)).abs().double()
        s = s - sl.double().view(1, Hq, 1, 1) * rel.view(1, 1, Lq, Lk)
    if causal:
        allowed = allowed & (j.view(1, Lk) <= pi.view(Lq, 1))
    if wl >= 0:
        allowed = allowed & (j.view(1, Lk) >= pi.view(Lq, 1) - wl)
    if wr >= 0:
        allowed = allowed & (j.view(1, Lk) <= pi.view(Lq, 1) + wr)
    if key_lens is not None:
        kl = torch.tensor(key_lens, dtype=torch.int32)
        files["key_lens"] = kl
        allowed = allowed & (j.view(1, 1, 1, Lk) < kl.view(B, 1, 1, 1).long())
    s = s.masked_fill(~allowed, -math.inf)
    p, lse = probs_lse(s, leaves["sinks"] if sinks else None)
    out = p @ vv
    (out * dout.double()).sum().backward()
    files.update({"out": out.detach().float(), "lse": lse.detach().float()})
    for n in ("q", "k", "v", "sinks"):
        if n in leaves:
            files["d" + n] = leaves[n].grad.float()
    return files, meta


def varlen_case(seed, lq, lk, Hq, Hkv, D, Dv, softcap, causal):
    from peer_suite import sdpa_ref
    gen = torch.Generator().manual_seed(seed)
    n = len(lq)
    qs = [torch.randn(1, Hq, m, D, generator=gen) * 3.0 for m in lq]
    ks = [torch.randn(1, Hkv, m, D, generator=gen) for m in lk]
    vs = [torch.randn(1, Hkv, m, Dv, generator=gen) for m in lk]
    ds = [torch.randn(1, Hq, m, Dv, generator=gen) for m in lq]
    sinks = torch.randn(Hq, generator=gen) * 2.0 + 1.0
    slopes = torch.rand(n, Hq, generator=gen) * 0.3
    refs = [sdpa_ref(qs[s], ks[s], vs[s], ds[s], causal=causal, q_offsets=[lk[s] - lq[s]],
                     slopes=slopes[s:s + 1], softcap=softcap, sinks=sinks) for s in range(n)]

    def pack(ts):  # [1, H, len, D] each -> [total, H, D]
        return torch.cat([t[0].transpose(0, 1) for t in ts], 0).float()

    def cu(ls):
        return torch.tensor([0] + [sum(ls[:i + 1]) for i in range(n)], dtype=torch.int32)
    files = {"q": pack(qs), "k": pack(ks), "v": pack(vs), "dout": pack(ds), "sinks": sinks,
             "alibi_slopes": slopes, "cu_seqlens_q": cu(lq), "cu_seqlens_k": cu(lk),
             "out": pack([r["out"] for r in refs]),
             "lse": torch.cat([r["lse"][0] for r in refs], 1).float(),
             "dq": pack([r["dq"] for r in refs]), "dk": pack([r["dk"] for r in refs]),
             "dv": pack([r["dv"] for r in refs]),
             "dsinks": sum(r["dsinks"] for r in refs).float(),
             "dalibi_slopes": torch.cat([r["dalibi_slopes"] for r in refs], 0).float()}
    return files, {"causal": causal, "softcap": repr(softcap)}


def cases():
    return {
        # FA's flash_attn_varlen_func(softcap=...) with gpt-oss's sinks: the peer suite's case
        "varlen": varlen_case(6, [5, 0, 9, 70], [7, 3, 4, 130], 4, 2, 8, 6, 5.0, 1),
        "softcap": case(1, 1, 2, 2, 8, 10, 8, 8, softcap=2.0),
        "sinks_causal_gqa": case(2, 2, 4, 2, 12, 12, 8, 8, sinks=True, causal=1),
        "softcap_sinks_masks": case(3, 2, 4, 1, 9, 11, 8, 6, softcap=5.0, sinks=True, wl=6, wr=2,
                                    mask="float", key_lens=[0, 9], alibi=True),
        "softcap_sinks_bool": case(4, 1, 2, 2, 10, 7, 4, 4, softcap=1.5, sinks=True, mask="bool",
                                   causal=1, q_offset=3),
        "gemma_tiles": case(5, 1, 4, 2, 70, 130, 16, 16, softcap=30.0, sinks=True, causal=1,
                            q_offset=60, qmul=8.0),
    }


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "tests/golden"
    for name, (files, meta) in cases().items():
        st.save(os.path.join(out_dir, "cap_sdpa_%s.safetensors" % name), files,
                {k: str(v) for k, v in meta.items()})


if __name__ == "__main__":
    main()
