"""attn's fused flash attention as a PyTorch autograd op (CPU; float32 and
bfloat16), with PyTorch 2's torch.nn.functional.scaled_dot_product_attention
signature, so a model written for PyTorch 2 runs on Debian's torch 1.13:

    from attn.torch import scaled_dot_product_attention
    out = scaled_dot_product_attention(q, k, v, attn_mask=None, is_causal=True)

and a whole torch.nn.TransformerEncoderLayer computed by libattn, forward and
backward (attn.torch.TransformerEncoderLayer, attn.torch.from_torch(layer);
python/attn/_torch_layer.py), SDPAEncoderLayer, torch's layer with only its
attention through this op, and sdpa_qkvpacked, the op on one packed
[B, L, 3, H, D] projection with no copy in or out (python/attn/_torch_qkvpacked.py).

Shapes: query [..., L, E], key [..., S, E], value [..., S, Ev] -> [..., L, Ev]
(the same leading dims; with enable_gqa=True the head dim, third from the
right, of key/value may divide the query's). attn_mask broadcasts to
[..., L, S]: bool True = may attend, float added to the logits. is_causal:
key j allowed for query i iff j <= i (top-left aligned, as PyTorch).

dropout_p > 0: dropout on the attention probabilities inside the flash
kernels (attn/sdpa.h: the keep mask is a counter-based hash, regenerated in
the backward, never stored), seeded per call from torch's default generator
(torch.manual_seed makes it repeat); applied whenever dropout_p > 0, as
PyTorch's function (a module passes dropout_p=self.p if self.training else
0). Kept probabilities are scaled by 1/(1 - dropout_p) as PyTorch's; the
masks themselves differ from PyTorch's RNG. bfloat16 with dropout runs the
float32 kernels on the converted values (bf16 flash has no dropout), the
output rounded to bf16.

Differences from PyTorch, all refused with a message rather than silently
different: a mask that requires grad, attn_mask together with
is_causal, float16/float64 tensors, tensors not on the CPU, dropout_p outside
[0, 1). A query row with no allowed key gives 0 (PyTorch: NaN) and zero
gradient.

Tensors go to the library by data_ptr() without copies when their last dim
is contiguous (e.g. [B, L, H, E] transposed to [B, H, L, E], or q, k, v as
views into one projection); others are copied once. The backward copies q,
k, v only when their layout is not dense (the gradients take their strides). bf16: q, k, v are read as bf16,
softmax and accumulators are f32, the output is rounded to bf16; gradients
come back in the inputs' dtype."""
from __future__ import annotations

import math
from typing import Optional

import torch

from . import _desc
from ._lib import Error

_DTYPES = (torch.float32, torch.bfloat16)


def _check_tensor(name, t):
    if not isinstance(t, torch.Tensor):
        raise Error("%s: expected a torch.Tensor, got %s" % (name, type(t).__name__))
    if t.device.type != "cpu":
        raise Error("%s: on device '%s'; attn's op runs on CPU tensors only (move it with "
                    ".cpu(), or use torch's own function on that device)" % (name, t.device))
    if t.dtype not in _DTYPES:
        raise Error("%s: dtype %s; attn's op takes float32 or bfloat16" % (name, t.dtype))
    if t.dim() < 2:
        raise Error("%s: %d dims, expected [..., L, E]" % (name, t.dim()))


def _check_options(attn_mask, dropout_p, is_causal):
    if not (isinstance(dropout_p, (int, float)) and 0.0 <= dropout_p < 1.0):
        raise Error("dropout_p=%r: must be a number in [0, 1)" % (dropout_p,))
    if attn_mask is None:
        return
    if not isinstance(attn_mask, torch.Tensor):
        raise Error("attn_mask: expected a torch.Tensor, got %s" % type(attn_mask).__name__)
    if attn_mask.device.type != "cpu":
        raise Error("attn_mask: on device '%s'; attn's op runs on CPU tensors only"
                    % attn_mask.device)
    if attn_mask.requires_grad:
        raise Error("attn_mask: requires grad; attn's op computes no gradient for the mask")
    if is_causal:
        raise Error("attn_mask and is_causal=True together: give one (as PyTorch)")


def _rows(t):
    """t, or a contiguous copy when the library cannot read it in place: its
    last dim must be contiguous and no dim of size > 1 may have stride 0.
    Other strides are free (e.g. q, k, v as views into one [B, L, 3, H, E]
    projection)."""
    if (t.shape[-1] > 1 and t.stride(-1) != 1) or \
            any(s == 0 and n > 1 for s, n in zip(t.stride(), t.shape)):
        return t.contiguous()
    return t


def _dense(t):
    """t, or a contiguous copy when its layout is not dense and
    non-overlapping (strides of a permutation of a contiguous tensor, which
    empty_like reproduces: the gradients take the strides of q, k, v)."""
    dims = sorted((s, n) for s, n in zip(t.stride(), t.shape) if n > 1)
    expect = 1
    for s, n in dims:
        if s != expect:
            return t.contiguous()
        expect *= n
    return _rows(t)


def _as_bhld(t):
    """[..., L, E] -> a 4-D view [B, H, L, E]: H = the dim third from the
    right (1 for 2-D), B = the product of the dims before it (a copy only
    when those do not merge)."""
    if t.dim() == 2:
        return t.unsqueeze(0).unsqueeze(0)
    if t.dim() == 3:
        return t.unsqueeze(0)
    if t.dim() == 4:
        return t
    return t.reshape((-1,) + tuple(t.shape[-3:]))


def _strides3(t):
    s = t.stride()
    return (s[0], s[1], s[2])


class _Problem:
    """Descriptor and 4-D operands of one call; built again in backward from
    the saved tensors (the descriptor holds raw pointers)."""

    def __init__(self, q, k, v, mask, causal, scale, out_stride=None, dropout=(0.0, 0)):
        B, Hq, L, E = q.shape
        _, Hkv, S, _ = k.shape
        Ev = v.shape[3]
        d = self.desc = _desc.new_desc(B, Hq, Hkv, L, S, E, Ev)
        d.q_stride[:] = _strides3(q)
        d.k_stride[:] = _strides3(k)
        d.v_stride[:] = _strides3(v)
        if out_stride is not None:  # else contiguous [B, Hq, L, Ev] (out and dout)
            d.o_stride[:] = out_stride
        d.scale, d.has_scale = scale, 1
        d.causal = 1 if causal else 0
        d.dropout_p, d.dropout_seed = dropout  # (p, seed): the backward regenerates the mask
        if mask is not None:
            field = "bool_mask" if mask.dtype == torch.bool else "add_mask"
            setattr(d, field, mask.data_ptr())
            getattr(d, field + "_stride")[:] = mask.stride()
        self.bf16 = q.dtype == torch.bfloat16
        self.shape = (B, Hq, L, Ev)


def _mask4(attn_mask, L, S, lead):
    """attn_mask broadcast to [B, Hq, L, S] (a view: zero strides on broadcast dims)."""
    m = attn_mask
    if m.dtype != torch.bool:
        m = m.float()
    full = tuple(lead) + (L, S)
    try:
        m = m.expand(full)
    except RuntimeError:
        raise Error("attn_mask: shape %s does not broadcast to %s" % (
            tuple(attn_mask.shape), full)) from None
    return _as_bhld(m) if m.dim() != 4 else m


def _dropout(dropout_p):
    """(p, seed) of a call: a seed from torch's default generator when p > 0."""
    if not dropout_p:
        return (0.0, 0)
    return (float(dropout_p), int(torch.randint(0, 2 ** 62, (1,)).item()))


def _f32_for_dropout(t, dropout_p):
    """bf16 with dropout: the f32 kernels on the converted values."""
    return t.float() if dropout_p and t.dtype == torch.bfloat16 else t


class _AttnSDPA(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, mask, causal, scale, dropout):
        p = _Problem(q, k, v, mask, causal, scale, dropout=dropout)
        B, Hq, L, Ev = p.shape
        out = torch.empty((B, Hq, L, Ev), dtype=torch.float32)
        lse = torch.empty((B, Hq, L), dtype=torch.float32)
        _desc.forward(p.desc, 2, p.bf16, q.data_ptr(), k.data_ptr(), v.data_ptr(),
                      out.data_ptr(), lse.data_ptr())
        ctx.causal, ctx.scale, ctx.dropout = causal, scale, dropout
        ctx.save_for_backward(q, k, v, mask, out, lse)
        return out if not p.bf16 else out.to(torch.bfloat16)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dout):
        q, k, v, mask, out, lse = ctx.saved_tensors
        q, k, v = _dense(q), _dense(k), _dense(v)
        p = _Problem(q, k, v, mask, ctx.causal, ctx.scale, dropout=ctx.dropout)
        dout = dout.float().contiguous()
        # the gradients take the strides of q, k, v (the descriptor's)
        grads = [torch.empty_like(t, dtype=torch.float32) for t in (q, k, v)]
        for g, t in zip(grads, (q, k, v)):
            if g.stride() != t.stride():
                raise Error("internal: gradient layout %s differs from %s" % (g.stride(), t.stride()))
        _desc.backward(p.desc, 2, p.bf16, q.data_ptr(), k.data_ptr(), v.data_ptr(),
                       out.data_ptr(), lse.data_ptr(), dout.data_ptr(),
                       *(g.data_ptr() for g in grads))
        dq, dk, dv = (g.to(t.dtype) for g, t in zip(grads, (q, k, v)))
        return dq, dk, dv, None, None, None, None


def scaled_dot_product_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                                 attn_mask: Optional[torch.Tensor] = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: Optional[float] = None,
                                 enable_gqa: bool = False) -> torch.Tensor:
    """softmax(query keyᵀ * scale + attn_mask) value, forward and backward
    by attn's flash kernels. See the module's doc for shapes and semantics."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        _check_tensor(name, t)
    if not (query.dtype == key.dtype == value.dtype):
        raise Error("query, key, value: dtypes %s, %s, %s differ" % (query.dtype, key.dtype,
                                                                    value.dtype))
    if query.dim() != key.dim() or query.dim() != value.dim():
        raise Error("query, key, value: %d, %d, %d dims (must be equal)" % (
            query.dim(), key.dim(), value.dim()))
    L, E = query.shape[-2:]
    S = key.shape[-2]
    if key.shape[-1] != E:
        raise Error("key: last dim %d differs from query's %d" % (key.shape[-1], E))
    if value.shape[-2] != S:
        raise Error("value: length %d differs from key's %d" % (value.shape[-2], S))
    if key.shape[:-2] != value.shape[:-2]:
        raise Error("key, value: leading dims %s and %s differ" % (
            tuple(key.shape[:-2]), tuple(value.shape[:-2])))
    lead = tuple(query.shape[:-2])
    klead = tuple(key.shape[:-2])
    if klead != lead:
        gqa_ok = enable_gqa and query.dim() >= 3 and klead[:-1] == lead[:-1] and \
            klead[-1] > 0 and lead[-1] % klead[-1] == 0
        if not gqa_ok:
            raise Error("query, key: leading dims %s and %s differ%s" % (
                lead, klead, "" if enable_gqa else " (enable_gqa=True for fewer key/value heads)"))
    _check_options(attn_mask, dropout_p, is_causal)
    scale = 1.0 / math.sqrt(E) if scale is None else float(scale)
    q4, k4, v4 = (_rows(_f32_for_dropout(_as_bhld(t), dropout_p)) for t in (query, key, value))
    mask = None if attn_mask is None else _mask4(attn_mask, L, S, lead)
    out = _AttnSDPA.apply(q4, k4, v4, mask, bool(is_causal), scale, _dropout(dropout_p))
    return out.reshape(lead + (L, value.shape[-1])).to(query.dtype)


from ._torch_qkvpacked import sdpa_qkvpacked  # noqa: E402,F401 (uses the op above)
from ._torch_encoder import SDPAEncoderLayer  # noqa: E402
from ._torch_layer import TransformerEncoderLayer, from_torch  # noqa: E402,F401
