"""attn against cases ported from its peers' own test suites (issue 17).

    /usr/bin/python3 tools/peer_suite.py [ATTN_BIN] [--kind fa,fa_varlen,ggml,ggml_rope,torch] [--keep DIR] [-v]
    make peer-suite

Each case is written as a user would write it for `attn sdpa` or `attn layer`
(docs/VARIANTS.md), run with --backend math and --backend flash (and auto, the
default, for F16 / BF16 files), and compared with torch 1.13 in float64 on the
same (rounded) inputs. Kinds:

  fa         FlashAttention tests/test_flash_attn.py (test_flash_attn_output):
             f16 / bf16 / f32 inputs, MHA / GQA / MQA, head dims 32..256
             (59, 111: not multiples of 8), Lq != Lk aligned bottom-right
             (q_offset = Lk - Lq), causal, local windows, softcap, ALiBi with
             per-batch slopes [B, H], forward and backward.
  fa_varlen  test_flash_attn_varlen_output: packed sequences of mixed lengths
             (cu_seqlens_q / cu_seqlens_k), each aligned bottom-right, f32 / f16 /
             bf16, causal, windows, per-sequence ALiBi, softcap, and sinks;
             forward and backward.
  ggml       test-backend-ops flash_attn_ext: f32 Q, f16 / bf16 / f32 K and V,
             head sizes 64..256 (192/128 and 576/512: DeepSeek's hsk != hsv), GQA
             ratios 1, 4, 16, an f16 mask (or slope * mask with max_bias, ggml's
             ALiBi), sinks, logit_softcap; forward (ggml has no backward for it).
  ggml_rope  test-backend-ops rope: head dims 64 / 80 / 128, partial n_dims (16, 32,
             half, all), normal (GPT-J) and NEOX modes, bases 1e4 / 5e5, as the
             rope / rope_dim / rope_theta metadata of a causal attention at an
             offset; forward and backward.
  torch      PyTorch's MultiheadAttention / TransformerEncoderLayer /
             TransformerDecoderLayer tests: add_bias_kv, add_zero_attn, static_k/v,
             batch_first False, key_padding_mask, attn_mask (bool / float, 2-D / 3-D),
             kdim / vdim, norm_first, activations (relu, gelu, tanh, silu and the
             gated swiglu / geglu FFNs), forward and backward.

Out of scope (counted and named, not run): dropout (random), ggml's quantized
K/V (q8_0, q4_0), FA's paged KV cache / rotary-in-kernel / key_leftpad.

A case is passed when every output is within its dtype's tolerance:
|got - ref| <= tol * (|ref| + rms(ref)); failed otherwise (or a NaN where the
reference has none); refused when attn exits with an error. Exit status 1 if any
case failed or was refused."""
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st  # noqa: E402
from golden_softcap import probs_lse  # noqa: E402
from golden_nn import (ACTS, GATES, GatedDecoder, float_mask, gated, prep, r32,  # noqa: E402
                       kpm_bool, rand_bool_mask, rnd)

# tolerance factor per input dtype: (forward, backward)
TOL = {"f32": (2e-4, 1e-3), "f16": (4e-3, 2e-2), "bf16": (3e-2, 8e-2)}
DT = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


# ---- the float64 reference of attn sdpa's formula --------------------------------
def sdpa_ref(q, k, v, dout, scale=None, causal=False, wl=-1, wr=-1, q_offsets=None,
             key_lens=None, add_mask=None, allow=None, slopes=None, softcap=0.0, sinks=None,
             rope=None):
    """q [B,Hq,Lq,D] k/v [B,Hkv,Lk,D|Dv] (any float dtype; the values are exact in
    float64). q_offsets: list [B]; slopes [Hq] or [B,Hq]; add_mask broadcast to
    [B,Hq,Lq,Lk]; allow: bool, same. Returns dict out, lse (+ dq, dk, dv, dsinks,
    dalibi_slopes with dout). rope: (half, rotary_dim, theta) applied to q at
    positions i + q_offsets[b] and k at j first (gradients w.r.t. the unrotated)."""
    B, Hq, Lq, D = q.shape
    Hkv, Lk = k.shape[1], k.shape[2]
    leaves = {"q": q, "k": k, "v": v}
    if sinks is not None:
        leaves["sinks"] = sinks
    if slopes is not None:
        leaves["alibi_slopes"] = slopes
    leaves = {n: t.double().clone().requires_grad_(dout is not None) for n, t in leaves.items()}
    g = Hq // Hkv
    qq, kk = leaves["q"], leaves["k"]
    offs = torch.tensor(q_offsets if q_offsets is not None else [0] * B).view(B, 1, 1, 1)
    if rope:
        qq = rotate(qq, torch.arange(Lq).view(1, 1, Lq) + offs.view(B, 1, 1), *rope)
        kk = rotate(kk, torch.arange(Lk).view(1, 1, Lk).expand(B, 1, Lk), *rope)
    kk = kk.repeat_interleave(g, 1)
    vv = leaves["v"].repeat_interleave(g, 1)
    sc = scale if scale is not None else 1.0 / math.sqrt(D)
    s = qq @ kk.transpose(-1, -2) * sc
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    pi = torch.arange(Lq).view(1, 1, Lq, 1) + offs
    j = torch.arange(Lk).view(1, 1, 1, Lk)
    if add_mask is not None:
        s = s + add_mask.double()
    if slopes is not None:
        sl = leaves["alibi_slopes"]
        sl = sl.view(1, Hq, 1, 1) if sl.dim() == 1 else sl.view(B, Hq, 1, 1)
        s = s - sl * (j - pi).abs().double()
    ok = torch.ones(B, Hq, Lq, Lk, dtype=torch.bool)
    if allow is not None:
        ok = ok & allow
    if causal:
        ok = ok & (j <= pi)
    if wl >= 0:
        ok = ok & (j >= pi - wl)
    if wr >= 0:
        ok = ok & (j <= pi + wr)
    if key_lens is not None:
        ok = ok & (j < torch.tensor(key_lens).view(B, 1, 1, 1))
    s = s.masked_fill(~ok, -math.inf)
    p, lse = probs_lse(s, leaves.get("sinks"))
    out = p @ vv
    res = {"out": out.detach(), "lse": lse.detach()}
    if dout is not None:
        (out * dout.double()).sum().backward()
        for n, t in leaves.items():
            res["d" + n] = t.grad
    return res


def rotate(x, pos, half, rdim, theta):
    """RoPE on the first rdim dims of x [B, H, L, D] at positions pos [B, 1, L]:
    half = GPT-NeoX pairs (c, c + rdim/2) (ggml's NEOX mode), else GPT-J pairs
    (2c, 2c + 1) (ggml's normal mode); angles pos * theta^(-2c/rdim)."""
    inv = theta ** (-2.0 * torch.arange(rdim // 2, dtype=torch.float64) / rdim)
    ang = pos.double().unsqueeze(-1) * inv  # [B, 1, L, rdim/2]
    cos, sin = ang.cos(), ang.sin()
    if half:
        a, b = x[..., :rdim // 2], x[..., rdim // 2:rdim]
        rot = torch.cat([a * cos - b * sin, b * cos + a * sin], -1)
    else:
        a, b = x[..., 0:rdim:2], x[..., 1:rdim:2]
        rot = torch.stack([a * cos - b * sin, b * cos + a * sin], -1).flatten(-2)
    return torch.cat([rot, x[..., rdim:]], -1)


# ---- comparing ------------------------------------------------------------------
def compare(got, ref, tol):
    """Worst |got - ref| / (tol * (|ref| + rms(ref))) over the finite reference
    entries; inf on a mismatch of the non-finite pattern or a missing tensor."""
    if got is None or tuple(got.shape) != tuple(ref.shape):
        return math.inf
    g, r = got.double(), ref.double()
    fin = torch.isfinite(r)
    if not torch.equal(torch.isfinite(g), fin) or not torch.equal(g[~fin], r[~fin]):
        return math.inf
    if not fin.any():
        return 0.0
    rf = r[fin]
    rms = rf.pow(2).mean().sqrt().item()
    den = tol * (rf.abs() + max(rms, 1e-6))
    return ((g[fin] - rf).abs() / den).max().item()


class Case:
    def __init__(self, kind, name, tensors, meta, expect, dtype, cmd="sdpa", skip=None):
        self.kind, self.name, self.tensors, self.meta = kind, name, tensors, meta
        self.expect, self.dtype, self.cmd, self.skip = expect, dtype, cmd, skip


def backends_for(case):
    lowp = any(t.dtype in (torch.float16, torch.bfloat16) for t in case.tensors.values())
    return ["math", "flash", "auto"] if lowp else ["math", "flash"]


def run_case(attn, case, tmp, verbose):
    """Yields (backend, status, ratio, message)."""
    inp = os.path.join(tmp, case.name + ".in.safetensors")
    st.save(inp, case.tensors, {k: str(v) for k, v in case.meta.items()})
    for be in backends_for(case):
        outp = os.path.join(tmp, "%s.%s.out.safetensors" % (case.name, be))
        cmd = [attn, case.cmd, inp, outp, "--backend", be]
        if case.cmd == "sdpa":
            cmd += ["--threads", "1"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            yield be, "refused", 0.0, (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1].replace(inp, "IN")
            continue
        got, _ = st.load(outp)
        worst, which = 0.0, ""
        for n, (ref, grad) in case.expect.items():
            x = compare(got.get(n), ref, TOL[case.dtype][1 if grad else 0])
            if x > worst:
                worst, which = x, n
        ok = worst <= 1.0
        yield be, "passed" if ok else "failed", worst, "" if ok else "worst on %s" % which
        os.unlink(outp)
    os.unlink(inp)


# ---- FlashAttention: test_flash_attn_output ---------------------------------------
def fa_cases(rng):
    cases = []
    dims = [32, 40, 59, 64, 80, 96, 111, 128, 160, 192, 224, 256]
    lens = [(113, 203), (128, 217), (113, 211), (108, 256), (256, 128), (203, 113), (1, 239),
            (127, 128)]
    i = 0
    for d in dims:
        for dtype in ("f16", "bf16", "f32"):
            for _ in range(3 if dtype != "f32" else 1):
                i += 1
                Lq, Lk = rng.choice(lens)
                H, Hkv = rng.choice([(6, 6), (6, 2), (6, 1)])
                causal = rng.random() < 0.5
                local = (not causal) and rng.random() < 0.4
                softcap = rng.choice([0.0, 0.0, 30.0])
                alibi = rng.random() < 0.3
                cases.append(fa_case(i, "fa", dtype, 2, H, Hkv, Lq, Lk, d, causal, local, softcap,
                                     alibi, rng))
    # padded batches (FA's key_padding_mask / query_padding_mask runs): sequences of
    # their own lengths in a [B, H, L, D] batch, each aligned bottom-right
    for n in range(18):
        i += 1
        dtype = ("f16", "bf16", "f32")[n % 3]
        Lq, Lk = rng.choice(lens[:6])
        H, Hkv = rng.choice([(6, 6), (6, 2), (6, 1)])
        causal = rng.random() < 0.6
        local = (not causal) and rng.random() < 0.5
        pad = ([rng.randint(1, Lq) for _ in range(3)], [rng.randint(0, Lk) for _ in range(3)])
        cases.append(fa_case(i, "fa", dtype, 3, H, Hkv, Lq, Lk, rng.choice([32, 64, 128]), causal,
                             local, rng.choice([0.0, 30.0]), rng.random() < 0.3, rng, pad))
    return cases


def randn(gen, *shape, scale=1.0):
    return torch.randn(*shape, generator=gen) * scale


def fa_case(i, kind, dtype, B, H, Hkv, Lq, Lk, d, causal, local, softcap, alibi, rng, pad=None):
    """pad: (q_lens, key_lens) of a padded batch: key_lens and q_offsets = key_lens - q_lens"""
    gen = torch.Generator().manual_seed(1000 + i)
    t = DT[dtype]
    q = randn(gen, B, H, Lq, d).to(t)
    k = randn(gen, B, Hkv, Lk, d).to(t)
    v = randn(gen, B, Hkv, Lk, d).to(t)
    dout = randn(gen, B, H, Lq, d).to(t)
    meta = {"causal": int(causal), "q_offset": Lk - Lq}  # FA >= 2.1: bottom-right
    wl = wr = -1
    if local:  # FA: window_size = torch.randint(0, seqlen_k, (2,))
        wl, wr = rng.randrange(Lk), rng.randrange(Lk)
        meta["window_left"], meta["window_right"] = wl, wr
    files = {"q": q, "k": k, "v": v, "dout": dout}
    offs, kl = [Lk - Lq] * B, None
    if pad:
        offs, kl = [pad[1][b] - pad[0][b] for b in range(B)], pad[1]
        files["q_offsets"] = torch.tensor(offs, dtype=torch.int64)
        files["key_lens"] = torch.tensor(kl, dtype=torch.int32)
        del meta["q_offset"]
    slopes = None
    if alibi:  # FA: alibi_slopes = torch.rand(batch, nheads) * 0.3
        slopes = (torch.rand(B, H, generator=gen) * 0.3).float()
        files["alibi_slopes"] = slopes
    if softcap:
        meta["softcap"] = repr(softcap)
    ref = sdpa_ref(q, k, v, dout, causal=causal, wl=wl, wr=wr, q_offsets=offs, key_lens=kl,
                   slopes=slopes, softcap=softcap)
    expect = {"out": (ref["out"], 0), "lse": (ref["lse"], 0), "dq": (ref["dq"], 1),
              "dk": (ref["dk"], 1), "dv": (ref["dv"], 1)}
    if alibi:
        expect["dalibi_slopes"] = (ref["dalibi_slopes"], 1)
    name = "%s_%03d_%s_d%d_h%d-%d_%dx%d%s%s%s%s%s" % (
        kind, i, dtype, d, H, Hkv, Lq, Lk, "_padded" if pad else "", "_causal" if causal else "",
        "_local" if local else "", "_softcap" if softcap else "", "_alibi" if alibi else "")
    return Case(kind, name, files, meta, expect, dtype)


# ---- FlashAttention: test_flash_attn_varlen_output -----------------------------------
def fa_varlen_cases(rng):
    cases = []
    for i in range(30):
        gen = torch.Generator().manual_seed(2000 + i)
        dtype = ("f32", "f16", "bf16")[i % 3]
        t = DT[dtype]
        nseq = rng.choice([1, 3, 5, 8])
        H, Hkv = rng.choice([(4, 4), (4, 2), (4, 1)])
        d = rng.choice([32, 59, 64, 128])
        causal = rng.random() < 0.5
        local = (not causal) and rng.random() < 0.4
        softcap = rng.choice([0.0, 0.0, 30.0]) if i < 24 else 30.0
        alibi = rng.random() < 0.3
        sinks = rng.random() < 0.25  # gpt-oss's sinks on packed batches (vLLM)
        lq = [rng.randint(1, 96) for _ in range(nseq)]
        lk = [rng.randint(1, 96) for _ in range(nseq)]
        wl = wr = -1
        meta = {"causal": int(causal)}
        if local:
            wl, wr = rng.randrange(max(lk)), rng.randrange(max(lk))
            meta["window_left"], meta["window_right"] = wl, wr
        if softcap:
            meta["softcap"] = repr(softcap)
        slopes = (torch.rand(nseq, H, generator=gen) * 0.3).float() if alibi else None
        sk = randn(gen, H) if sinks else None
        qs = [randn(gen, 1, H, n, d).to(t) for n in lq]
        ks = [randn(gen, 1, Hkv, n, d).to(t) for n in lk]
        vs = [randn(gen, 1, Hkv, n, d).to(t) for n in lk]
        ds = [randn(gen, 1, H, n, d).to(t) for n in lq]
        refs = [sdpa_ref(qs[s], ks[s], vs[s], ds[s], causal=causal, wl=wl, wr=wr,
                         q_offsets=[lk[s] - lq[s]], slopes=None if slopes is None else slopes[s:s + 1],
                         softcap=softcap, sinks=sk) for s in range(nseq)]

        def pack(ts):  # [1,H,n,D] each -> [total, H, D]
            return torch.cat([x[0].transpose(0, 1) for x in ts], 0).contiguous()
        cu = lambda ls: torch.tensor([0] + list(torch.tensor(ls).cumsum(0)), dtype=torch.int32)
        files = {"q": pack(qs), "k": pack(ks), "v": pack(vs), "dout": pack(ds),
                 "cu_seqlens_q": cu(lq), "cu_seqlens_k": cu(lk)}
        expect = {"out": (pack([r["out"] for r in refs]), 0),
                  "lse": (torch.cat([r["lse"][0] for r in refs], 1), 0),
                  "dq": (pack([r["dq"] for r in refs]), 1),
                  "dk": (pack([r["dk"] for r in refs]), 1),
                  "dv": (pack([r["dv"] for r in refs]), 1)}
        if alibi:
            files["alibi_slopes"] = slopes
            expect["dalibi_slopes"] = (torch.cat([r["dalibi_slopes"] for r in refs], 0), 1)
        if sinks:
            files["sinks"] = sk
            expect["dsinks"] = (sum(r["dsinks"] for r in refs), 1)
        name = "fa_varlen_%02d_%s_n%d_d%d_h%d-%d%s%s%s%s%s" % (
            i, dtype, nseq, d, H, Hkv, "_causal" if causal else "", "_local" if local else "",
            "_softcap" if softcap else "", "_alibi" if alibi else "", "_sinks" if sinks else "")
        cases.append(Case("fa_varlen", name, files, meta, expect, dtype))
    return cases


# ---- ggml test-backend-ops: rope (partial n_dims) feeding attention --------------
def rope_cases(rng):
    """ggml's test_rope grid (head dims, n_dims < head_dim, normal / NEOX modes) as
    `attn sdpa` metadata rope / rope_dim, with causal attention at an offset."""
    cases = []
    i = 0
    for hd in (64, 80, 128):
        for nd in (hd, hd // 2, 32, 16):
            for half in (False, True):
                i += 1
                gen = torch.Generator().manual_seed(6000 + i)
                dtype = rng.choice(["f32", "f16"])
                t = DT[dtype]
                H, Hkv = rng.choice([(4, 4), (4, 2), (4, 1)])
                Lq, Lk = rng.choice([(7, 7), (5, 33), (1, 20)])
                theta = rng.choice([10000.0, 500000.0])
                q, k = randn(gen, 2, H, Lq, hd).to(t), randn(gen, 2, Hkv, Lk, hd).to(t)
                v, dout = randn(gen, 2, Hkv, Lk, hd).to(t), randn(gen, 2, H, Lq, hd).to(t)
                meta = {"causal": 1, "q_offset": Lk - Lq, "rope": "half" if half else "interleaved",
                        "rope_theta": repr(theta)}
                if nd != hd:
                    meta["rope_dim"] = nd
                ref = sdpa_ref(q, k, v, dout, causal=True, q_offsets=[Lk - Lq] * 2,
                               rope=(half, nd, theta))
                expect = {n: (ref[n], n[0] == "d") for n in ("out", "lse", "dq", "dk", "dv")}
                name = "ggml_rope_%02d_%s_hd%d_nd%d_%s_h%d-%d_%dx%d" % (
                    i, dtype, hd, nd, "neox" if half else "norm", H, Hkv, Lq, Lk)
                cases.append(Case("ggml_rope", name, {"q": q, "k": k, "v": v, "dout": dout}, meta,
                                  expect, dtype))
    return cases


# ---- ggml test-backend-ops: flash_attn_ext ----------------------------------------
def ggml_slopes(n_head, max_bias):
    """ggml's ALiBi slopes (ggml_soft_max / flash_attn_ext with max_bias > 0)."""
    n_log2 = 1 << int(math.floor(math.log2(n_head)))
    m0 = 2.0 ** (-max_bias / n_log2)
    m1 = 2.0 ** (-(max_bias / 2.0) / n_log2)
    return torch.tensor([m0 ** (h + 1) if h < n_log2 else m1 ** (2 * (h - n_log2) + 1)
                         for h in range(n_head)], dtype=torch.float64)


def ggml_cases(rng):
    cases = []
    i = 0
    for hsk, hsv in ((64, 64), (80, 80), (128, 128), (256, 256), (192, 128)):
        for nr in (1, 4):
            for kv in (113, 512):
                for nb in (1, 3, 32):
                    for tkv in ("f16", "bf16", "f32", "q8_0"):
                        i += 1
                        mask = rng.random() < 0.7
                        sinks = rng.random() < 0.5
                        max_bias = rng.choice([0.0, 8.0]) if mask else 0.0
                        softcap = rng.choice([0.0, 10.0])
                        cases.append(ggml_case(i, hsk, hsv, 4, nr, kv, nb, mask, sinks, max_bias,
                                               softcap, tkv))
    # DeepSeek's MLA head sizes (hsk 576, hsv 512) and GQA ratio 16, as ggml's grid has them
    for hsk, hsv, nr in ((576, 512, 1), (576, 512, 4), (128, 128, 16)):
        for tkv, nb in (("f16", 1), ("bf16", 3)):
            i += 1
            cases.append(ggml_case(i, hsk, hsv, 4, nr, 113, nb, True, rng.random() < 0.5,
                                   rng.choice([0.0, 8.0]), rng.choice([0.0, 10.0]), tkv))
    return cases


def ggml_case(i, hsk, hsv, nh, nr, kv, nb, mask, sinks, max_bias, softcap, tkv):
    name = "ggml_%03d_hs%d-%d_nh%d_nr%d_kv%d_nb%d%s%s_mb%g_sc%g_%s" % (
        i, hsk, hsv, nh, nr, kv, nb, "_mask" if mask else "", "_sinks" if sinks else "",
        max_bias, softcap, tkv)
    if tkv == "q8_0":
        return Case("ggml", name, {}, {}, {}, "f16", skip="ggml quantized K/V (q8_0)")
    gen = torch.Generator().manual_seed(3000 + i)
    Hq = nh * nr
    q = randn(gen, 1, Hq, nb, hsk)
    k = randn(gen, 1, nh, kv, hsk).to(DT[tkv])
    v = randn(gen, 1, nh, kv, hsv).to(DT[tkv])
    files = {"q": q, "k": k, "v": v}
    meta = {"scale": repr(1.0 / math.sqrt(hsk))}
    add = None
    if mask:  # ggml: an F16 mask [n_kv, n_batch_pad] added (times the slope with max_bias)
        m = (torch.rand(nb, kv, generator=gen) * 2 - 1).half()
        m[torch.rand(nb, kv, generator=gen) < 0.1] = -math.inf
        if max_bias > 0:
            # the user writes slope_h * mask as a per-head F32 mask (ggml computes it in f32)
            files["mask"] = (ggml_slopes(Hq, max_bias).view(1, Hq, 1, 1) *
                             m.double().view(1, 1, nb, kv)).float()
            add = files["mask"]
        else:
            add = m.view(1, 1, nb, kv)
            files["mask"] = m
    sk = None
    if sinks:
        sk = randn(gen, Hq)
        files["sinks"] = sk
    if softcap:
        meta["softcap"] = repr(softcap)
    ref = sdpa_ref(q, k, v, None, scale=1.0 / math.sqrt(hsk), add_mask=add, softcap=softcap,
                   sinks=sk)
    return Case("ggml", name, files, meta, {"out": (ref["out"], 0)}, "f16" if tkv == "f16" else
                ("bf16" if tkv == "bf16" else "f32"))


# ---- PyTorch: MultiheadAttention, TransformerEncoderLayer / DecoderLayer ------------
def layer_case(name, m, inputs, out, weights, meta):
    dout = r32(torch.randn_like(out))
    out.backward(dout)
    t = {k: v.float() for k, v in m.state_dict().items()}
    for k, v in inputs.items():
        t[k] = v.detach().float() if v.dtype.is_floating_point else v.detach()
    t["dout"] = dout.float()
    expect = {"out": (out.detach(), 0)}
    if weights is not None:
        expect["attn_weights"] = (weights.detach(), 0)
    for k, v in inputs.items():
        if v.dtype.is_floating_point and v.requires_grad:
            expect["grad." + k] = (v.grad, 1)
    for k, p in m.named_parameters():
        expect["grad." + k] = (p.grad, 1)
    return Case("torch", name, t, meta, expect, "f32", cmd="layer")


def mha_case(i, E, H, B, Lq, Lk, bf=True, cross=False, kdim=None, vdim=None, bias=True,
             bias_kv=False, zero_attn=False, kp=False, am=None, average=True):
    torch.manual_seed(4000 + i)
    m = prep(nn.MultiheadAttention(E, H, dropout=0.0, bias=bias, batch_first=bf, kdim=kdim,
                                   vdim=vdim, add_bias_kv=bias_kv, add_zero_attn=zero_attn), 4000 + i)
    bl = (lambda b, l: (b, l)) if bf else (lambda b, l: (l, b))
    query = rnd(*bl(B, Lq), E)
    inputs = {"query": query}
    key = value = query
    if cross:
        key, value = rnd(*bl(B, Lk), kdim or E), rnd(*bl(B, Lk), vdim or E)
        inputs.update(key=key, value=value)
    else:
        Lk = Lq
    kpmask = kpm_bool(B, Lk) if kp else None
    amask = None
    if am == "bool2":
        amask = rand_bool_mask(Lq, Lk)
    elif am == "bool3":
        amask = rand_bool_mask(B * H, Lq, Lk)
    elif am == "float3":
        amask = float_mask(B * H, Lq, Lk)
    elif am == "float2":
        amask = float_mask(Lq, Lk)
    elif am == "causal":
        amask = torch.triu(torch.ones(Lq, Lk, dtype=torch.bool), 1)
    if kpmask is not None:
        inputs["key_padding_mask"] = kpmask
    if amask is not None:
        inputs["attn_mask"] = amask
    out, w = m(query, key, value, key_padding_mask=kpmask, attn_mask=amask, need_weights=True,
               average_attn_weights=average)
    meta = {"kind": "mha", "num_heads": H, "batch_first": int(bf), "average_attn_weights": int(average)}
    if zero_attn:
        meta["add_zero_attn"] = 1
    name = "torch_mha_%02d_E%d_H%d%s%s%s%s%s%s_%s" % (
        i, E, H, "" if bf else "_seqfirst", "_cross" if cross else "", "_kvdim" if kdim else "",
        "_biaskv" if bias_kv else "", "_zeroattn" if zero_attn else "", "_kpm" if kp else "", am)
    return layer_case(name, m, inputs, out, w, meta)


def mha_static_case(i, E, H, B, Lq, Ls, zero_attn, kp):
    torch.manual_seed(4000 + i)
    m = prep(nn.MultiheadAttention(E, H, dropout=0.0, add_zero_attn=zero_attn), 4000 + i)
    query = rnd(Lq, B, E)
    sk, sv = rnd(B * H, Ls, E // H), rnd(B * H, Ls, E // H)
    kpmask = kpm_bool(B, Ls) if kp else None
    out, w = F.multi_head_attention_forward(
        query, query, query, E, H, m.in_proj_weight, m.in_proj_bias, None, None, zero_attn, 0.0,
        m.out_proj.weight, m.out_proj.bias, training=True, key_padding_mask=kpmask,
        need_weights=True, static_k=sk, static_v=sv, average_attn_weights=True)
    inputs = {"query": query, "static_k": sk, "static_v": sv}
    if kp:
        inputs["key_padding_mask"] = kpmask
    meta = {"kind": "mha", "num_heads": H, "batch_first": 0}
    if zero_attn:
        meta["add_zero_attn"] = 1
    name = "torch_mha_%02d_static_kv%s%s" % (i, "_zeroattn" if zero_attn else "", "_kpm" if kp else "")
    return layer_case(name, m, inputs, out, w, meta)


def tlayer_case(i, kind, act, nf, bf, masks):
    E, H, FF, B, L, Lm = 16, 4, 24, 2, 6, 7
    torch.manual_seed(5000 + i)
    kw = dict(dropout=0.0, layer_norm_eps=1e-5, batch_first=bf, norm_first=nf)
    base = nn.TransformerEncoderLayer if kind == "encoder" else nn.TransformerDecoderLayer
    if act in GATES:  # golden_nn's gated FFNs (linear3), as docs/VARIANTS.md
        m = (gated(base) if kind == "encoder" else GatedDecoder)(E, H, FF, act, **kw)
    else:
        m = base(E, H, FF, activation=ACTS.get(act, act), **kw)
    m = prep(m, 5000 + i)
    bl = (lambda l: (B, l, E)) if bf else (lambda l: (l, B, E))
    meta = {"kind": kind, "num_heads": H, "norm_first": int(nf), "activation": act,
            "layer_norm_eps": "1e-05", "batch_first": int(bf)}
    if kind == "encoder":
        src = rnd(*bl(L))
        inputs = {"src": src}
        if "kpm" in masks:
            inputs["src_key_padding_mask"] = kpm_bool(B, L)
        if "causal" in masks:
            inputs["src_mask"] = torch.triu(torch.ones(L, L, dtype=torch.bool), 1)
        if "float" in masks:
            inputs["src_mask"] = float_mask(L, L)
        out = m(src, src_mask=inputs.get("src_mask"), src_key_padding_mask=inputs.get("src_key_padding_mask"))
    else:
        tgt, mem = rnd(*bl(L)), rnd(*bl(Lm))
        inputs = {"tgt": tgt, "memory": mem}
        if "causal" in masks:
            inputs["tgt_mask"] = torch.triu(torch.ones(L, L, dtype=torch.bool), 1)
        if "kpm" in masks:
            inputs["tgt_key_padding_mask"] = kpm_bool(B, L)
            inputs["memory_key_padding_mask"] = kpm_bool(B, Lm)
        if "float" in masks:
            inputs["memory_mask"] = float_mask(L, Lm)
        args = {k: v for k, v in inputs.items() if k not in ("tgt", "memory")}
        out = m(tgt, mem, **args)
    name = "torch_%s_%02d_%s%s%s_%s" % (kind, i, act, "_normfirst" if nf else "",
                                         "" if bf else "_seqfirst", "-".join(masks) or "nomask")
    return layer_case(name, m, inputs, out, None, meta)


def torch_cases(rng):
    cases = []
    i = 0
    for bf in (True, False):
        for cross, kdim in ((False, None), (True, None), (True, 12)):
            for bias_kv, zero_attn in ((False, False), (True, False), (False, True), (True, True)):
                for am in ("none", "bool2", "float3"):
                    i += 1
                    if rng.random() < 0.5:
                        continue
                    cases.append(mha_case(i, 16, 4, 2, 5, 7, bf=bf, cross=cross, kdim=kdim,
                                          vdim=(10 if kdim else None), bias=rng.random() < 0.8,
                                          bias_kv=bias_kv, zero_attn=zero_attn,
                                          kp=rng.random() < 0.6, am=None if am == "none" else am,
                                          average=rng.random() < 0.5))
    for am in ("causal", "bool3", "float2"):
        i += 1
        cases.append(mha_case(i, 32, 8, 3, 6, 6, bf=False, kp=True, am=am))
    for za in (False, True):
        for kp in (False, True):
            i += 1
            cases.append(mha_static_case(i, 16, 4, 2, 5, 7, za, kp))
    j = 0
    for kind in ("encoder", "decoder"):
        for act in ("relu", "gelu", "tanh", "silu", "swiglu", "geglu"):
            for nf in (False, True):
                j += 1
                bf = rng.random() < 0.6
                masks = rng.choice([(), ("kpm",), ("causal",), ("causal", "kpm"), ("float",)])
                cases.append(tlayer_case(j, kind, act, nf, bf, masks))
    return cases


# ---- out of scope, named ----------------------------------------------------------
OUT_OF_SCOPE = [
    ("fa", "dropout_p > 0 (random masks: not comparable to a reference)"),
    ("fa", "paged KV cache (block_table), rotary inside the kernel, key_leftpad"),
    ("torch", "dropout > 0 in MultiheadAttention / Transformer layers (random)"),
]


def main():
    args = sys.argv[1:]
    attn, kinds, keep, verbose = "build/attn", None, None, False
    while args:
        a = args.pop(0)
        if a == "--kind":
            kinds = set(args.pop(0).split(","))
        elif a == "--keep":
            keep = args.pop(0)
        elif a == "-v":
            verbose = True
        else:
            attn = a
    attn = os.path.abspath(attn)
    rng = random.Random(17)
    torch.manual_seed(17)
    gens = {"fa": fa_cases, "fa_varlen": fa_varlen_cases, "ggml": ggml_cases,
            "ggml_rope": rope_cases, "torch": torch_cases}
    t0 = time.time()
    tmp = keep or tempfile.mkdtemp(prefix="attn_peers_")
    os.makedirs(tmp, exist_ok=True)
    counts, worst, skipped, reasons = {}, {}, {}, {}
    for kind, gen in gens.items():
        if kinds and kind not in kinds:
            continue
        for case in gen(random.Random(sum(map(ord, kind)))):
            if case.skip:
                skipped.setdefault(kind, {}).setdefault(case.skip, 0)
                skipped[kind][case.skip] += 1
                continue
            for be, status, ratio, msg in run_case(attn, case, tmp, verbose):
                key = (kind, case.dtype, be)
                c = counts.setdefault(key, {"passed": 0, "failed": 0, "refused": 0})
                c[status] += 1
                if status != "refused" and ratio > worst.get(key, (0.0, ""))[0]:
                    worst[key] = (ratio, case.name)
                if status != "passed":
                    reasons.setdefault((kind, status, msg), []).append("%s[%s]" % (case.name, be))
                if verbose or status != "passed":
                    print("%-8s %-7s %-60s %8.2g %s" % (status, be, case.name, ratio, msg), flush=True)
    if not keep:
        shutil.rmtree(tmp, ignore_errors=True)
    print("\n%-10s %-5s %-6s %7s %7s %8s  %s" % ("kind", "dtype", "backend", "passed", "failed",
                                                  "refused", "worst err/tol (case)"))
    bad = 0
    for key, c in sorted(counts.items()):
        w, wc = worst.get(key, (0.0, "-"))
        print("%-10s %-5s %-6s %7d %7d %8d  %.2g (%s)" % (key + (c["passed"], c["failed"],
                                                               c["refused"], w, wc)))
        bad += c["failed"] + c["refused"]
    for (kind, status, msg), names in sorted(reasons.items()):
        print("%s %s x%d: %s  e.g. %s" % (kind, status, len(names), msg, names[0]))
    for kind, d in sorted(skipped.items()):
        for why, n in d.items():
            print("skipped (out of scope) %s: %d cases: %s" % (kind, n, why))
    for kind, why in OUT_OF_SCOPE:
        if not kinds or kind in kinds:
            print("not ported (out of scope) %s: %s" % (kind, why))
    print("%d case runs, %d not passed, %.0f s" % (sum(sum(c.values()) for c in counts.values()),
                                                   bad, time.time() - t0))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
