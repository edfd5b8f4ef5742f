"""Golden files for the attention variants (tests/golden/var_*.safetensors).

    /usr/bin/python3 tools/golden_variants.py tests/golden

torch 1.13 expresses every variant explicitly, in float64 with autograd on
the f32 inputs: ALiBi and T5 biases as additive float masks, Shaw relative
positions with einsum over the gathered tables, RoPE written out, the block
layout as a bool mask; the seed 004 modules (SparseAttention,
CrossModalAttention with a key/value width, RelativePositionEmbedding) and a
LLaMA-style grouped-query attention with their state_dict names.

var_sdpa_*.safetensors are `attn sdpa` inputs (q, k, v, dout, the variant
tensors, __metadata__; docs/VARIANTS.md) plus the expected out, lse, dq, dk,
dv, drel_bias, dshaw_k, dshaw_v."""
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st  # noqa: E402


# ---- helpers --------------------------------------------------------------------

def alibi_slopes(n_heads):
    """BLOOM's build_alibi_tensor slopes (ALiBi paper for powers of two)."""
    def pow2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start ** i for i in range(n)]
    if math.log2(n_heads).is_integer():
        return pow2(n_heads)
    n = 2 ** math.floor(math.log2(n_heads))
    return pow2(n) + pow2(2 * n)[0::2][: n_heads - n]


def t5_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    """HF transformers T5Attention._relative_position_bucket, verbatim maths."""
    relative_buckets = 0
    if bidirectional:
        num_buckets //= 2
        relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
        relative_position = torch.abs(relative_position)
    else:
        relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    relative_position_if_large = max_exact + (
        torch.log(relative_position.float() / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).to(torch.long)
    relative_position_if_large = torch.min(
        relative_position_if_large, torch.full_like(relative_position_if_large, num_buckets - 1)
    )
    relative_buckets += torch.where(is_small, relative_position, relative_position_if_large)
    return relative_buckets


def rope(x, positions, theta, layout, rotary_dim=None):
    """x [..., L, D] (positions [L]) rotated pairwise, float64; rotary_dim:
    only the first rotary_dim dims (GPT-NeoX's partial rotary), the rest
    pass through."""
    if rotary_dim is not None and rotary_dim < x.shape[-1]:
        return torch.cat([rope(x[..., :rotary_dim], positions, theta, layout),
                          x[..., rotary_dim:]], -1)
    D = x.shape[-1]
    c = torch.arange(D // 2, dtype=torch.float64)
    ang = positions.double().view(-1, 1) * torch.pow(torch.tensor(float(theta), dtype=torch.float64), -2.0 * c / D)
    cos, sin = torch.cos(ang), torch.sin(ang)  # [L, D/2]
    if layout == "half":
        x0, x1 = x[..., : D // 2], x[..., D // 2:]
        return torch.cat([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1).flatten(-2)


def f32(x):
    return x.detach().float()


# ---- the SDPA with variants -----------------------------------------------------------

def sdpa_case(name, seed, B, Hq, Hkv, Lq, Lk, D, Dv, causal=0, wl=-1, wr=-1, q_offset=0,
              alibi=False, t5=None, shaw=None, shaw_v=True, block=None, rope_cfg=None,
              scale=None):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(B, Hq, Lq, D, generator=gen)
    k = torch.randn(B, Hkv, Lk, D, generator=gen)
    v = torch.randn(B, Hkv, Lk, Dv, generator=gen)
    dout = torch.randn(B, Hq, Lq, Dv, generator=gen)
    sc = scale if scale is not None else 1.0 / math.sqrt(D)
    files = {"q": q, "k": k, "v": v, "dout": dout}
    meta = {"causal": causal, "window_left": wl, "window_right": wr}
    if scale is not None:
        meta["scale"] = repr(scale)
    if q_offset:
        meta["q_offset"] = q_offset

    leaves = {n: t.double().clone().requires_grad_(True) for n, t in (("q", q), ("k", k), ("v", v))}
    qq, kk, vv = leaves["q"], leaves["k"], leaves["v"]
    pi = torch.arange(Lq) + q_offset  # absolute query positions
    j = torch.arange(Lk)
    if rope_cfg:
        layout, theta = rope_cfg[:2]
        rd = rope_cfg[2] if len(rope_cfg) > 2 else None
        meta["rope"] = layout
        meta["rope_theta"] = repr(theta)
        if rd is not None:
            meta["rope_dim"] = rd
        qq = rope(qq, pi, theta, layout, rd)
        kk = rope(kk, j, theta, layout, rd)
    g = Hq // Hkv
    kk = kk.repeat_interleave(g, dim=1)
    vv = vv.repeat_interleave(g, dim=1)
    s = qq @ kk.transpose(-1, -2) * sc  # [B,Hq,Lq,Lk]
    rel = j.view(1, Lk) - pi.view(Lq, 1)  # key - query
    if alibi:
        sl = torch.tensor(alibi_slopes(Hq), dtype=torch.float32)
        files["alibi_slopes"] = sl
        s = s - sl.double().view(1, Hq, 1, 1) * rel.abs().double().view(1, 1, Lq, Lk)
    if t5:
        nb, md, bi = t5
        tb = torch.randn(Hq, nb, generator=gen)
        files["rel_bias"] = tb
        meta["rel_max_distance"] = md
        meta["rel_bidirectional"] = bi
        leaves["rel_bias"] = tb.double().clone().requires_grad_(True)
        bucket = t5_bucket(rel, bool(bi), nb, md)  # [Lq, Lk]
        s = s + leaves["rel_bias"][:, bucket].unsqueeze(0)
    idx = None
    if shaw:
        M = shaw
        rows = 2 * M - 1
        idx = torch.clamp(pi.view(Lq, 1) - j.view(1, Lk), -(M - 1), M - 1) + M - 1
        sk = torch.randn(rows, D, generator=gen) * 0.5
        files["shaw_k"] = sk
        leaves["shaw_k"] = sk.double().clone().requires_grad_(True)
        s = s + sc * torch.einsum("bhid,ijd->bhij", qq, leaves["shaw_k"][idx])
        if shaw_v:
            sv = torch.randn(rows, Dv, generator=gen) * 0.5
            files["shaw_v"] = sv
            leaves["shaw_v"] = sv.double().clone().requires_grad_(True)
    allowed = torch.ones(Lq, Lk, dtype=torch.bool)
    if causal:
        allowed &= j.view(1, Lk) <= pi.view(Lq, 1)
    if wl >= 0:
        allowed &= j.view(1, Lk) >= pi.view(Lq, 1) - wl
    if wr >= 0:
        allowed &= j.view(1, Lk) <= pi.view(Lq, 1) + wr
    if block is not None:
        bs, bm = block
        files["block_mask"] = bm
        meta["block_size"] = bs
        allowed &= bm[pi.view(Lq, 1) // bs, j.view(1, Lk) // bs]
    s = s.masked_fill(~allowed, -math.inf)
    row_ok = (s != -math.inf).any(-1, keepdim=True)
    p = torch.softmax(torch.where(row_ok, s, torch.zeros_like(s)), -1) * row_ok
    out = p @ vv
    if "shaw_v" in leaves:
        out = out + torch.einsum("bhij,ijd->bhid", p, leaves["shaw_v"][idx])
    lse = torch.logsumexp(s, -1)
    (out * dout.double()).sum().backward()
    files.update({"out": f32(out), "lse": f32(lse)})
    for n in ("q", "k", "v", "rel_bias", "shaw_k", "shaw_v"):
        if n in leaves:
            files["d" + n] = f32(leaves[n].grad)
    return files, meta


def block_layout(nqb, nkb, seed):
    gen = torch.Generator().manual_seed(seed)
    bm = torch.rand(nqb, nkb, generator=gen) < 0.4
    for a in range(min(nqb, nkb)):
        bm[a, a] = True
    bm[:, 0] = True  # a global column
    return bm


def sdpa_cases():
    return {
        "alibi_causal": sdpa_case("alibi_causal", 1, 2, 6, 3, 12, 12, 8, 8, causal=1, alibi=True),
        "alibi_decode": sdpa_case("alibi_decode", 2, 1, 4, 4, 3, 10, 8, 8, causal=1, q_offset=7,
                                  alibi=True),
        "t5_bidir": sdpa_case("t5_bidir", 3, 1, 2, 2, 40, 40, 4, 4, t5=(8, 20, 1)),
        "t5_causal": sdpa_case("t5_causal", 4, 2, 2, 1, 40, 40, 4, 4, causal=1, t5=(8, 16, 0)),
        "shaw": sdpa_case("shaw", 5, 1, 2, 1, 9, 9, 4, 6, shaw=4),
        "shaw_k_offset": sdpa_case("shaw_k_offset", 6, 2, 2, 2, 5, 7, 4, 4, causal=1, q_offset=2,
                                   shaw=3, shaw_v=False),
        "block": sdpa_case("block", 7, 1, 2, 2, 24, 24, 4, 4, block=(4, block_layout(6, 6, 7))),
        "rope_interleaved": sdpa_case("rope_interleaved", 8, 1, 2, 2, 8, 8, 8, 8, causal=1,
                                      rope_cfg=("interleaved", 10000.0)),
        "rope_half_gqa": sdpa_case("rope_half_gqa", 9, 2, 4, 2, 4, 9, 8, 8, causal=1, q_offset=5,
                                   rope_cfg=("half", 500.0)),
        "rope_partial": sdpa_case("rope_partial", 11, 2, 4, 2, 5, 9, 16, 8, causal=1, q_offset=3,
                                  rope_cfg=("half", 10000.0, 4)),
        "combo": sdpa_case("combo", 10, 1, 3, 1, 16, 20, 4, 6, wl=9, wr=3, alibi=True,
                           t5=(16, 32, 1), shaw=5, block=(4, block_layout(4, 5, 10)),
                           rope_cfg=("half", 10000.0), scale=0.4),
    }


# ---- bucket and slope tables, RoPE alone -------------------------------------------------

def tables():
    rel = torch.arange(-300, 301)
    files = {"rel": rel.to(torch.int64)}
    for nb, md, bi in ((32, 128, 1), (32, 128, 0), (8, 20, 1), (16, 64, 0), (64, 1000, 1)):
        files[f"bucket_{nb}_{md}_{bi}"] = t5_bucket(rel, bool(bi), nb, md).to(torch.int64)
    for H in (1, 2, 3, 5, 6, 8, 12, 16, 24, 40):
        files[f"alibi_{H}"] = torch.tensor(alibi_slopes(H), dtype=torch.float32)
    return files


def rope_file():
    gen = torch.Generator().manual_seed(20)
    N, L, H, D, off = 2, 5, 3, 8, 3
    x = torch.randn(N, L, H, D, generator=gen)
    dy = torch.randn(N, L, H, D, generator=gen)
    files = {"x": x, "dy": dy}
    pos = torch.arange(L) + off
    for layout in ("interleaved", "half"):
        xx = x.double().clone().requires_grad_(True)
        # [N, L, H, D] -> positions along L
        y = rope(xx.transpose(1, 2), pos, 10000.0, layout).transpose(1, 2)
        (y * dy.double()).sum().backward()
        files[f"y_{layout}"] = f32(y)
        files[f"dx_{layout}"] = f32(xx.grad)
    return files


# ---- modules --------------------------------------------------------------------------------

class SparseAttention(nn.Module):  # seed 004, section 7.2
    def __init__(self, embed_size, num_heads, window_size=32):
        super().__init__()
        self.embed_size = embed_size
        self.num_heads = num_heads
        self.window_size = window_size
        self.head_dim = embed_size // num_heads
        self.query = nn.Linear(embed_size, embed_size)
        self.key = nn.Linear(embed_size, embed_size)
        self.value = nn.Linear(embed_size, embed_size)
        self.fc_out = nn.Linear(embed_size, embed_size)

    def forward(self, x):
        batch_size, seq_len, _ = x.size()
        Q = self.query(x).view(batch_size, seq_len, self.num_heads, self.head_dim).transpose(1, 2)
        K = self.key(x).view(batch_size, seq_len, self.num_heads, self.head_dim).transpose(1, 2)
        V = self.value(x).view(batch_size, seq_len, self.num_heads, self.head_dim).transpose(1, 2)
        mask = torch.ones(seq_len, seq_len, dtype=torch.bool)
        for i in range(seq_len):
            start = max(0, i - self.window_size // 2)
            end = min(seq_len, i + self.window_size // 2 + 1)
            mask[i, start:end] = 0
        scores = torch.matmul(Q, K.transpose(-2, -1)) / torch.sqrt(torch.tensor(self.head_dim, dtype=torch.float32))
        scores = scores.masked_fill(mask, -1e9)
        attention = F.softmax(scores, dim=-1)
        out = torch.matmul(attention, V)
        out = out.transpose(1, 2).contiguous().view(batch_size, seq_len, self.embed_size)
        return self.fc_out(out)


class CrossModalAttention(nn.Module):  # seed 004, section 7.3, with a key/value width
    def __init__(self, embed_size, num_heads, kv_size=None):
        super().__init__()
        kv_size = kv_size or embed_size
        self.embed_size = embed_size
        self.num_heads = num_heads
        self.head_dim = embed_size // num_heads
        self.query = nn.Linear(embed_size, embed_size)
        self.key = nn.Linear(kv_size, embed_size)
        self.value = nn.Linear(kv_size, embed_size)
        self.fc_out = nn.Linear(embed_size, embed_size)

    def forward(self, x1, x2):
        batch_size = x1.size(0)
        Q = self.query(x1).view(batch_size, -1, self.num_heads, self.head_dim).transpose(1, 2)
        K = self.key(x2).view(batch_size, -1, self.num_heads, self.head_dim).transpose(1, 2)
        V = self.value(x2).view(batch_size, -1, self.num_heads, self.head_dim).transpose(1, 2)
        scores = torch.matmul(Q, K.transpose(-2, -1)) / torch.sqrt(torch.tensor(self.head_dim, dtype=torch.float32))
        attention = F.softmax(scores, dim=-1)
        out = torch.matmul(attention, V)
        out = out.transpose(1, 2).contiguous().view(batch_size, -1, self.embed_size)
        return self.fc_out(out)


class RelativePositionEmbedding(nn.Module):  # seed 004, section 7.1
    def __init__(self, max_len=512, embed_size=512):
        super().__init__()
        self.embedding = nn.Embedding(2 * max_len - 1, embed_size)

    def forward(self, seq_len):
        positions = torch.arange(seq_len, dtype=torch.long)
        relative_positions = positions[:, None] - positions[None, :]
        relative_positions += seq_len - 1
        return self.embedding(relative_positions)


class GQAttention(nn.Module):  # LLaMA-style: no biases, RoPE (half), causal, grouped heads
    def __init__(self, E, H, Hkv, theta=10000.0, rotary_dim=None):
        super().__init__()
        self.H, self.Hkv, self.hd, self.theta = H, Hkv, E // H, theta
        self.rd = rotary_dim  # partial rotary (GPT-NeoX rotary_pct): first rd dims of a head
        self.q_proj = nn.Linear(E, H * self.hd, bias=False)
        self.k_proj = nn.Linear(E, Hkv * self.hd, bias=False)
        self.v_proj = nn.Linear(E, Hkv * self.hd, bias=False)
        self.o_proj = nn.Linear(H * self.hd, E, bias=False)

    def forward(self, x):
        B, L, _ = x.shape
        pos = torch.arange(L)
        q = rope(self.q_proj(x).view(B, L, self.H, self.hd).transpose(1, 2), pos, self.theta, "half",
                 self.rd)
        k = rope(self.k_proj(x).view(B, L, self.Hkv, self.hd).transpose(1, 2), pos, self.theta,
                 "half", self.rd)
        v = self.v_proj(x).view(B, L, self.Hkv, self.hd).transpose(1, 2)
        g = self.H // self.Hkv
        k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
        s = q @ k.transpose(-1, -2) / math.sqrt(self.hd)
        s = s.masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), -math.inf)
        out = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, L, self.H * self.hd)
        return self.o_proj(out)


def module_file(model, inputs, call):
    """float64 forward/backward of model on inputs (dict name -> f32 tensor)."""
    model = model.double()
    leaves = {n: t.double().clone().requires_grad_(t.is_floating_point()) for n, t in inputs.items()}
    out = call(model, leaves)
    gen = torch.Generator().manual_seed(99)
    dout = torch.randn(out.shape, generator=gen)
    (out * dout.double()).sum().backward()
    files = {n: t for n, t in inputs.items()}
    files["out"] = f32(out)
    files["dout"] = dout
    for n, p in model.named_parameters():
        files[n] = f32(p)
        files["grad." + n] = f32(p.grad)
    for n, t in leaves.items():
        if t.requires_grad:
            files["grad." + n] = f32(t.grad)
    return files


def modules():
    res = {}
    torch.manual_seed(30)
    m = SparseAttention(16, 4, window_size=32)
    x = torch.randn(2, 48, 16)
    res["sparse_attention"] = (module_file(m, {"x": x}, lambda mm, a: mm(a["x"])),
                               {"window_size": 32, "num_heads": 4})
    torch.manual_seed(31)
    m = SparseAttention(12, 3, window_size=5)
    x = torch.randn(1, 11, 12)
    res["sparse_attention_w5"] = (module_file(m, {"x": x}, lambda mm, a: mm(a["x"])),
                                  {"window_size": 5, "num_heads": 3})
    torch.manual_seed(32)
    m = CrossModalAttention(16, 4, kv_size=10)
    x1, x2 = torch.randn(2, 5, 16), torch.randn(2, 7, 10)
    res["cross_modal"] = (module_file(m, {"x1": x1, "x2": x2}, lambda mm, a: mm(a["x1"], a["x2"])),
                          {"num_heads": 4})
    torch.manual_seed(33)
    m = RelativePositionEmbedding(max_len=8, embed_size=6)
    res["relpos"] = (module_file(m, {}, lambda mm, a: mm(5)), {"max_len": 8, "seq_len": 5})
    torch.manual_seed(34)
    m = GQAttention(16, 4, 2)
    x = torch.randn(2, 6, 16)
    res["gqa"] = (module_file(m, {"x": x}, lambda mm, a: mm(a["x"])),
                  {"num_heads": 4, "num_kv_heads": 2, "rope_theta": 10000.0})
    torch.manual_seed(35)
    m = GQAttention(32, 4, 2, theta=10000.0, rotary_dim=4)  # head_dim 8, partial_rotary_factor 0.5
    x = torch.randn(2, 7, 32)
    res["gqa_partial_rotary"] = (module_file(m, {"x": x}, lambda mm, a: mm(a["x"])),
                                 {"num_heads": 4, "num_kv_heads": 2, "rope_theta": 10000.0,
                                  "rope_dim": 4})
    return res


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "tests/golden"
    os.makedirs(outdir, exist_ok=True)
    only = sys.argv[2].split(",") if len(sys.argv) > 2 else None  # file names without .safetensors
    want = lambda n: not only or n in only  # noqa: E731
    for name, (files, meta) in sdpa_cases().items():
        if want(f"var_sdpa_{name}"):
            st.save(os.path.join(outdir, f"var_sdpa_{name}.safetensors"), files, meta)
    if want("var_tables"):
        st.save(os.path.join(outdir, "var_tables.safetensors"), tables())
    if want("var_rope"):
        st.save(os.path.join(outdir, "var_rope.safetensors"), rope_file())
    for name, (files, meta) in modules().items():
        if want(f"var_mod_{name}"):
            st.save(os.path.join(outdir, f"var_mod_{name}.safetensors"), files, meta)


if __name__ == "__main__":
    main()
