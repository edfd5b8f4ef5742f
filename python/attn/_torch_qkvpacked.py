"""attn.torch.sdpa_qkvpacked: self-attention on one packed projection, as
flash-attn's flash_attn_qkvpacked_func:

    qkv [B, L, 3, H, D]  ->  out [B, L, H, D]

qkv is e.g. a Linear's [B, L, 3 * H * D] output viewed (the in-projection of
nn.MultiheadAttention), out viewed as [B, L, H * D] is the out-projection's
input. Nothing is transposed or copied on the way in or out: the library
reads q, k, v in place through their strides, writes out in [B, L, H, D],
reads the out-projection's gradient in that layout, and writes dq, dk, dv
straight into one [B, L, 3, H, D] gradient (what autograd would otherwise
assemble from three [B, H, L, D] gradients with a stack and a transposing
copy). Masks, scale, dtypes and dropout_p as attn.torch.scaled_dot_product_attention."""
from __future__ import annotations

import math
from typing import Optional

import torch

from . import _desc
from ._lib import Error
from .torch import _check_options, _check_tensor, _dropout, _f32_for_dropout, _mask4, _Problem


def _heads(qkv):
    """q, k, v as [B, H, L, D] views of a contiguous [B, L, 3, H, D] qkv."""
    q, k, v = qkv.unbind(2)
    return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)


def _out_stride(qkv):
    B, L, _, H, D = qkv.shape
    return (L * H * D, D, H * D)  # b, h, l strides of a contiguous [B, L, H, D]


class _AttnSDPAPacked(torch.autograd.Function):
    @staticmethod
    def forward(ctx, qkv, mask, causal, scale, dropout):
        B, L, _, H, D = qkv.shape
        q, k, v = _heads(qkv)
        p = _Problem(q, k, v, mask, causal, scale, _out_stride(qkv), dropout)
        out = torch.empty((B, L, H, D), dtype=torch.float32)
        lse = torch.empty((B, H, L), dtype=torch.float32)
        _desc.forward(p.desc, 2, p.bf16, q.data_ptr(), k.data_ptr(), v.data_ptr(),
                      out.data_ptr(), lse.data_ptr())
        ctx.causal, ctx.scale, ctx.dropout = causal, scale, dropout
        ctx.save_for_backward(qkv, mask, out, lse)
        return out if not p.bf16 else out.to(torch.bfloat16)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dout):
        qkv, mask, out, lse = ctx.saved_tensors
        q, k, v = _heads(qkv)
        p = _Problem(q, k, v, mask, ctx.causal, ctx.scale, _out_stride(qkv), ctx.dropout)
        dout = dout.float().contiguous()  # the layout of out (no copy when it is already)
        # every element of dqkv is written by the library (dq, dk, dv are overwritten)
        dqkv = torch.empty(qkv.shape, dtype=torch.float32)
        dq, dk, dv = _heads(dqkv)
        _desc.backward(p.desc, 2, p.bf16, q.data_ptr(), k.data_ptr(), v.data_ptr(),
                       out.data_ptr(), lse.data_ptr(), dout.data_ptr(),
                       dq.data_ptr(), dk.data_ptr(), dv.data_ptr())
        return dqkv.to(qkv.dtype), None, None, None, None


def sdpa_qkvpacked(qkv: torch.Tensor, attn_mask: Optional[torch.Tensor] = None,
                   dropout_p: float = 0.0, is_causal: bool = False,
                   scale: Optional[float] = None) -> torch.Tensor:
    """Self-attention of qkv [B, L, 3, H, D] (q, k, v stacked on dim 2) ->
    [B, L, H, D]; attn_mask broadcasts to [B, H, L, L]. Forward and backward
    by attn's flash kernels; see the module's doc."""
    _check_tensor("qkv", qkv)
    if qkv.dim() != 5 or qkv.shape[2] != 3:
        raise Error("qkv: shape %s, expected [B, L, 3, H, D]" % (tuple(qkv.shape),))
    _check_options(attn_mask, dropout_p, is_causal)
    B, L, _, H, D = qkv.shape
    scale = 1.0 / math.sqrt(D) if scale is None else float(scale)
    mask = None if attn_mask is None else _mask4(attn_mask, L, L, (B, H))
    dtype = qkv.dtype
    qkv = _f32_for_dropout(qkv, dropout_p).contiguous()
    out = _AttnSDPAPacked.apply(qkv, mask, bool(is_causal), scale, _dropout(dropout_p))
    return out.to(dtype)
