"""attn.torch.SDPAEncoderLayer: torch.nn.TransformerEncoderLayer (batch
first, torch's Linear/LayerNorm) with its self-attention computed by a pluggable
scaled_dot_product_attention (attn's fused op by default). Same state_dict
names, so weights move both ways with load_state_dict."""
from __future__ import annotations

from typing import Callable, Optional, Union

import torch
import torch.nn.functional as F
from torch import nn

from ._torch_qkvpacked import sdpa_qkvpacked
from .torch import scaled_dot_product_attention


class _SelfAttention(nn.Module):
    """The parameters of nn.MultiheadAttention (packed in-projection)."""

    def __init__(self, d_model, nhead, bias):
        super().__init__()
        self.embed_dim, self.num_heads = d_model, nhead
        self.in_proj_weight = nn.Parameter(torch.empty(3 * d_model, d_model))
        self.in_proj_bias = nn.Parameter(torch.zeros(3 * d_model)) if bias else None
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        nn.init.xavier_uniform_(self.in_proj_weight)
        if bias:
            nn.init.zeros_(self.out_proj.bias)


def _allowed_or_added(attn_mask, key_padding_mask, B, L):
    """The module masks (bool True = NOT allowed, float added) as one mask for
    the function (bool True = may attend, float added), [B, 1, L, L] or None."""
    masks = [m for m in (None if attn_mask is None else attn_mask.reshape(
        (-1, 1, L, L) if attn_mask.dim() == 2 else (B, -1, L, L)),
        None if key_padding_mask is None else key_padding_mask.reshape(B, 1, 1, L))
        if m is not None]
    if not masks:
        return None
    if all(m.dtype == torch.bool for m in masks):
        allowed = ~masks[0]
        for m in masks[1:]:
            allowed = allowed & ~m
        return allowed
    total = None
    for m in masks:
        add = m.float() if m.dtype != torch.bool else \
            torch.zeros(m.shape).masked_fill(m, float("-inf"))
        total = add if total is None else total + add
    return total


class SDPAEncoderLayer(nn.Module):
    """nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout,
    activation, layer_norm_eps, batch_first=True, norm_first, bias) whose
    attention runs through `attention` (a function with PyTorch 2's
    scaled_dot_product_attention signature; attn's op by default). dropout
    applies where torch's layer applies it, in training mode only (as
    nn.Dropout): the attention probabilities' inside the op (dropout_p), the
    others with torch's nn.Dropout."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.0,
                 activation: Union[str, Callable[[torch.Tensor], torch.Tensor]] = "relu",
                 layer_norm_eps: float = 1e-5, batch_first: bool = True,
                 norm_first: bool = False, bias: bool = True,
                 attention: Callable[..., torch.Tensor] = scaled_dot_product_attention) -> None:
        super().__init__()
        if not batch_first:
            raise ValueError("batch_first=False is not supported (inputs are [B, L, E])")
        if d_model % nhead:
            raise ValueError("d_model %d is not a multiple of nhead %d" % (d_model, nhead))
        self.self_attn = _SelfAttention(d_model, nhead, bias)
        self.linear1 = nn.Linear(d_model, dim_feedforward, bias=bias)
        self.linear2 = nn.Linear(dim_feedforward, d_model, bias=bias)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.dropout, self.dropout1, self.dropout2 = (nn.Dropout(dropout) for _ in range(3))
        self.activation = {"relu": F.relu, "gelu": F.gelu}.get(activation, activation)  # type: ignore[arg-type]
        if isinstance(self.activation, str):
            raise ValueError("activation '%s': relu, gelu or a callable" % activation)
        self.norm_first = norm_first
        self.attention = attention
        self.dropout_p = float(dropout)  # the attention probabilities' (torch: self_attn.dropout)

    def _sa_block(self, x, src_mask, src_key_padding_mask, is_causal):
        B, L, E = x.shape
        H = self.self_attn.num_heads
        qkv = F.linear(x, self.self_attn.in_proj_weight, self.self_attn.in_proj_bias)
        qkv = qkv.view(B, L, 3, H, E // H)
        mask = _allowed_or_added(src_mask, src_key_padding_mask, B, L)
        p = self.dropout_p if self.training else 0.0
        if self.attention is scaled_dot_product_attention:
            # attn's op on the packed projection: no copy in or out, forward or backward
            o = sdpa_qkvpacked(qkv, attn_mask=mask, dropout_p=p, is_causal=is_causal)
        else:
            q, k, v = qkv.permute(2, 0, 3, 1, 4)  # [B, H, L, hd] views
            o = self.attention(q, k, v, attn_mask=mask, dropout_p=p,
                               is_causal=is_causal).transpose(1, 2)
        return self.dropout1(self.self_attn.out_proj(o.reshape(B, L, E)))

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(self, src: torch.Tensor, src_mask: Optional[torch.Tensor] = None,
                src_key_padding_mask: Optional[torch.Tensor] = None,
                is_causal: bool = False) -> torch.Tensor:
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff_block(x))
