"""Golden files for scaled dot-product attention (tests/golden/sdpa_*.safetensors).

    /usr/bin/python3 tools/golden_sdpa.py tests/golden [NAME,...]

torch 1.13 has no F.scaled_dot_product_attention, so the reference is written
out: softmax(q kᵀ * scale + mask) v in float64 with autograd, on the f32
inputs. Our rule for a query row with no allowed key (output 0, lse -inf,
zero gradient) is applied explicitly. Every file holds q, k, v, [mask],
[key_lens], dout and the results out, lse, dq, dk, dv (F32; key_lens I32), and
__metadata__ with causal, window_left, window_right and (if not the default
1/sqrt(D)) scale: exactly the input `attn sdpa` reads.
mask: BOOL (true = may attend) or F32 additive, broadcastable to
[B,Hq,Lq,Lk] with numpy rules."""
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st  # noqa: E402


def reference(q, k, v, dout, scale, causal, wl, wr, key_lens, mask):
    """float64 forward + backward; q,k,v,dout float64 leaf tensors."""
    B, Hq, Lq, _ = q.shape
    Hkv, Lk = k.shape[1], k.shape[2]
    q, k, v = (t.clone().requires_grad_(True) for t in (q, k, v))
    g = Hq // Hkv
    kk = k.repeat_interleave(g, dim=1)  # query head h reads kv head h // g
    vv = v.repeat_interleave(g, dim=1)
    s = q @ kk.transpose(-1, -2) * scale  # [B,Hq,Lq,Lk]
    i = torch.arange(Lq).view(Lq, 1)
    j = torch.arange(Lk).view(1, Lk)
    allowed = torch.ones(B, Hq, Lq, Lk, dtype=torch.bool)
    if causal:
        allowed &= j <= i
    if wl >= 0:
        allowed &= j >= i - wl
    if wr >= 0:
        allowed &= j <= i + wr
    if key_lens is not None:
        allowed &= j.view(1, 1, 1, Lk) < key_lens.view(B, 1, 1, 1).long()
    if mask is not None:
        if mask.dtype == torch.bool:
            allowed &= mask
        else:
            s = s + mask.double()
    s = s.masked_fill(~allowed, -math.inf)
    row_ok = (s != -math.inf).any(-1, keepdim=True)  # rows with an allowed key
    p = torch.softmax(torch.where(row_ok, s, torch.zeros_like(s)), -1) * row_ok
    out = p @ vv
    lse = torch.logsumexp(s, -1)  # -inf on rows with no allowed key
    (out * dout).sum().backward()
    return out, lse, q.grad, k.grad, v.grad


def make_case(name, seed, B, Hq, Hkv, Lq, Lk, D, Dv, causal=0, wl=-1, wr=-1, key_lens=None,
              mask=None, scale=None, qk_gain=1.0, qk_offset=None, lowp=None):
    """lowp: torch.float16 / torch.bfloat16: q, k, v, dout and a float mask
    are rounded to it and stored in it (the reference runs on the rounded
    values); the outputs stay F32."""
    gen = torch.Generator().manual_seed(seed)
    q = (torch.randn(B, Hq, Lq, D, generator=gen) * qk_gain).float()
    k = (torch.randn(B, Hkv, Lk, D, generator=gen) * qk_gain).float()
    if qk_offset is not None:  # every logit gets + scale * qk_offset²: a large row offset
        q[..., 0] = qk_offset
        k[..., 0] = qk_offset
    v = torch.randn(B, Hkv, Lk, Dv, generator=gen).float()
    dout = torch.randn(B, Hq, Lq, Dv, generator=gen).float()
    if callable(mask):
        mask = mask(gen)
    if lowp is not None:
        q, k, v, dout = (t.to(lowp).float() for t in (q, k, v, dout))
        if mask is not None and mask.dtype != torch.bool:
            mask = mask.to(lowp).float()
    eff_scale = scale if scale is not None else 1.0 / math.sqrt(D)
    kl = torch.tensor(key_lens, dtype=torch.int32) if key_lens is not None else None
    out, lse, dq, dk, dv = reference(q.double(), k.double(), v.double(), dout.double(),
                                     eff_scale, causal, wl, wr, kl, mask)
    tensors = {"q": q, "k": k, "v": v}
    if mask is not None:
        tensors["mask"] = mask if mask.dtype == torch.bool else mask.float()
    if kl is not None:
        tensors["key_lens"] = kl
    tensors.update(dout=dout, out=out.float(), lse=lse.float(), dq=dq.float(), dk=dk.float(),
                   dv=dv.float())
    if lowp is not None:
        for n in ("q", "k", "v", "dout") + (("mask",) if mask is not None and
                                           mask.dtype != torch.bool else ()):
            tensors[n] = tensors[n].to(lowp)
    meta = {"causal": int(causal), "window_left": wl, "window_right": wr}
    if scale is not None:
        meta["scale"] = repr(float(scale))
    return name, tensors, meta


def bool_2d_with_empty_row(gen):
    m = torch.rand(9, 11, generator=gen) < 0.6
    m[3, :] = False  # a query row that may attend nowhere
    m[:, 0] |= torch.arange(9) != 3  # every other row has a key
    return m


def bool_b11k(gen):
    m = torch.rand(2, 1, 1, 10, generator=gen) < 0.7
    m[:, :, :, 0] = True
    return m


def add_full(gen):
    m = torch.randn(2, 3, 8, 10, generator=gen) * 2
    m[0, 1, 2, 4] = -math.inf  # an additive -inf disallows a key
    m[1, 0, 5, :3] = -math.inf
    m[1, 2, 6, :] = -math.inf  # a row with no allowed key
    return m


def bool_b11k_13(gen):
    m = torch.rand(1, 1, 1, 13, generator=gen) < 0.7
    m[..., :2] = True
    return m


def add_h1k(gen):  # rank 3 [Hq, 1, Lk], right-aligned to [B, Hq, Lq, Lk]
    return torch.randn(4, 1, 14, generator=gen)


CASES = [
    lambda: make_case("plain", 1, 2, 4, 4, 7, 9, 16, 16),
    lambda: make_case("causal", 2, 2, 2, 2, 12, 12, 8, 8, causal=1),
    lambda: make_case("causal_lq_lt_lk", 3, 1, 2, 2, 8, 13, 8, 8, causal=1),
    lambda: make_case("causal_lq_gt_lk", 4, 1, 2, 2, 13, 8, 8, 8, causal=1),
    lambda: make_case("window", 5, 2, 2, 2, 16, 16, 8, 8, wl=3, wr=2),
    lambda: make_case("window_left_causal", 6, 1, 2, 2, 15, 15, 8, 8, causal=1, wl=4),
    lambda: make_case("key_lens", 7, 2, 2, 2, 6, 11, 8, 8, key_lens=[9, 5]),
    lambda: make_case("bool_mask_2d", 8, 2, 2, 2, 9, 11, 8, 8, mask=bool_2d_with_empty_row),
    lambda: make_case("bool_mask_b11k", 9, 2, 2, 2, 6, 10, 8, 8, mask=bool_b11k),
    lambda: make_case("add_mask", 10, 2, 3, 3, 8, 10, 8, 8, mask=add_full),
    lambda: make_case("gqa", 11, 2, 8, 2, 6, 7, 8, 8),
    lambda: make_case("dv_ne_d", 12, 2, 2, 2, 5, 9, 16, 24),
    lambda: make_case("masked_batch", 13, 2, 2, 2, 5, 8, 8, 8, key_lens=[8, 0]),
    # logits ~1e3 with a spread of ~1e3: one-hot rows
    lambda: make_case("large_logits", 14, 1, 2, 2, 8, 8, 16, 16, qk_gain=31.6),
    # logits ~1e3 with a spread of ~1: exp overflows without the max shift
    lambda: make_case("large_offset", 18, 1, 2, 2, 8, 8, 16, 16, scale=1.0, qk_offset=31.625),
    lambda: make_case("scale", 15, 1, 2, 2, 6, 7, 8, 8, scale=0.375),
    lambda: make_case("combined", 16, 2, 4, 2, 12, 14, 8, 12, causal=1, wl=5,
                      key_lens=[14, 9], mask=add_h1k),
    lambda: make_case("big", 17, 2, 4, 2, 40, 33, 32, 32, causal=1),
    # F16 / BF16 tensors in the file (attn sdpa runs the fp16 / bf16 kernels)
    lambda: make_case("bf16_causal_gqa", 19, 2, 4, 2, 12, 12, 16, 16, causal=1,
                      key_lens=[12, 7], lowp=torch.bfloat16),
    lambda: make_case("f16_add_mask", 20, 2, 3, 3, 8, 10, 8, 8, mask=add_full,
                      lowp=torch.float16),
    lambda: make_case("bf16_window_dv", 21, 1, 2, 1, 9, 13, 8, 24, wl=3, wr=1,
                      mask=bool_b11k_13, lowp=torch.bfloat16),
]


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else "tests/golden"
    os.makedirs(outdir, exist_ok=True)
    torch.set_grad_enabled(True)
    only = sys.argv[2].split(",") if len(sys.argv) > 2 else None
    for case in CASES:
        name, tensors, meta = case()
        if only and name not in only:
            continue
        path = os.path.join(outdir, "sdpa_%s.safetensors" % name)
        st.save(path, tensors, meta)
        print(path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
