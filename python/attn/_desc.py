"""attn_sdpa_desc (include/attn/sdpa.h) as a ctypes Structure, and the raw
forward/backward calls on data pointers shared by the numpy API (attn.sdpa)
and the PyTorch op (attn.torch). tests/test_api.py checks the field list
against the header, so a change there cannot go unnoticed."""
import ctypes

from . import _lib

_i64 = ctypes.c_int64
_p = ctypes.c_void_p


class SdpaDesc(ctypes.Structure):
    _fields_ = [
        ("B", _i64), ("Hq", _i64), ("Hkv", _i64), ("Lq", _i64), ("Lk", _i64), ("D", _i64),
        ("Dv", _i64),
        ("scale", ctypes.c_float),
        ("has_scale", ctypes.c_int),
        ("causal", ctypes.c_int),
        ("window_left", _i64), ("window_right", _i64),
        ("key_lens", _p),
        ("bool_mask", _p),
        ("bool_mask_stride", _i64 * 4),
        ("add_mask", _p),
        ("add_mask_stride", _i64 * 4),
        ("q_stride", _i64 * 3), ("k_stride", _i64 * 3), ("v_stride", _i64 * 3),
        ("o_stride", _i64 * 3),
        ("q_offset", _i64),
        ("alibi_slopes", _p),
        ("rel_bias", _p),
        ("rel_buckets", _i64), ("rel_max_distance", _i64),
        ("rel_bidirectional", ctypes.c_int),
        ("shaw_k", _p), ("shaw_v", _p),
        ("shaw_max", _i64),
        ("block_mask", _p),
        ("block_size", _i64),
        ("block_cols", _i64),
        ("rel_bias_grad", _p), ("shaw_k_grad", _p), ("shaw_v_grad", _p),
        # logit softcap and attention sinks (NULL / 0 = off)
        ("softcap", ctypes.c_float), ("sinks", _p), ("sinks_grad", _p),
        # per-batch alignment and ALiBi slopes
        ("q_offsets", _p), ("alibi_slopes_bstride", _i64), ("alibi_slopes_grad", _p),
        # user modifiers (attn/sdpa_mods.h): not exposed to Python, always NULL
        ("mods", _p),
        # attention dropout (dropout_p 0 = off; the mask from a hash of the seed, offset,
        # b + dropout_batch0, h, i, j)
        ("dropout_p", ctypes.c_float), ("dropout_seed", ctypes.c_uint64),
        ("dropout_offset", ctypes.c_uint64), ("dropout_batch0", _i64),
        # prefix-LM: with causal, keys j < prefix_lens[b] visible to every query
        ("prefix_lens", _p),
    ]


# attn_sdpa_args: the element type, path, layout and tensors of one call
ATTN_F32, ATTN_BF16 = 0, 2


class SdpaArgs(ctypes.Structure):
    _fields_ = [
        ("dtype", ctypes.c_int), ("path", ctypes.c_int), ("varlen", _p),
        ("q", _p), ("k", _p), ("v", _p),
        ("out", _p), ("lse", _p), ("probs", _p),
        ("dout", _p), ("dq", _p), ("dk", _p), ("dv", _p),
        ("probs_rows", _p),
    ]


def new_desc(B, Hq, Hkv, Lq, Lk, D, Dv):
    d = SdpaDesc()
    _lib.lib.attn_sdpa_desc_init(ctypes.byref(d), B, Hq, Hkv, Lq, Lk, D, Dv)
    return d


def dropout_mask(d, b, h, out):
    """The keep mask [Lq, Lk] of (b, h) under d's dropout fields into out
    (a pointer to Lq * Lk bytes; 1 = kept)."""
    _lib.check(_lib.lib.attn_sdpa_dropout_mask(ctypes.byref(d), b, h, out), "sdpa dropout mask")


def forward(d, backend, bf16, q, k, v, out, lse, probs=0):
    """Pointers (ints); bf16: q, k, v are bf16 bit patterns (flash: its best path)."""
    a = SdpaArgs(dtype=ATTN_BF16 if bf16 else ATTN_F32, path=0 if bf16 else backend,
                 q=q, k=k, v=v, out=out, lse=lse, probs=probs or None)
    _lib.check(_lib.lib.attn_sdpa_forward(ctypes.byref(d), ctypes.byref(a)), "sdpa forward")


def backward(d, backend, bf16, q, k, v, out, lse, dout, dq, dk, dv):
    a = SdpaArgs(dtype=ATTN_BF16 if bf16 else ATTN_F32, path=0 if bf16 else backend,
                 q=q, k=k, v=v, out=out, lse=lse, dout=dout, dq=dq, dk=dk, dv=dv)
    _lib.check(_lib.lib.attn_sdpa_backward(ctypes.byref(d), ctypes.byref(a)), "sdpa backward")
