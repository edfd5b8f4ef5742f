"""attn.torch.TransformerEncoderLayer: torch.nn.TransformerEncoderLayer whose
forward AND backward run as one call each into libattn (attn_encoder_ext:
projections, attention, feed-forward, LayerNorms, dropout), through one
torch.autograd.Function.

Memory: the parameters stay torch Parameters under torch's state_dict names,
but their storage is one flat float32 tensor in attn's layout (64-byte
aligned views) whose pointer goes to the library on every call: no copy of
the weights per step, and any torch optimizer updates them in place. A
Parameter replaced or moved (`layer.linear1.weight = nn.Parameter(...)`,
`.to()`) is noticed at the next forward and the weights are gathered into a
new flat tensor again (one copy then). The backward writes every parameter
gradient into one new zeroed flat tensor and returns views of it: autograd
stores them as .grad without a copy when .grad is None
(zero_grad(set_to_none=True)), else adds them (one pass). Remaining copies:
src is made contiguous (a copy only when it is not, or with batch_first=False:
one transpose each way), dout likewise, and the float/byte masks are
converted to contiguous float32 / bool when given otherwise.

Dropout (training, p > 0) uses attn's counter-based RNG, seeded per call from
torch's default generator (so torch.manual_seed makes runs repeat), applied
where torch's layer applies it (attention probabilities, both residual
branches, the feed-forward's hidden layer); the masks differ from torch's."""
from __future__ import annotations

from typing import Any, Callable, Optional, Union

import torch
import torch.nn.functional as F
from torch import nn

from . import _encoder_ext
from ._lib import Error
from ._torch_encoder import _SelfAttention

_ALIGN = 16  # floats (64 bytes)


def _aligned_zeros(numel):
    buf = torch.zeros(numel + _ALIGN)
    skip = (-(buf.data_ptr() // 4)) % _ALIGN
    return buf[skip:skip + numel]


def _activation_name(activation):
    if isinstance(activation, str):
        if activation in ("relu", "gelu"):
            return activation
    elif activation is F.relu or activation is torch.relu or isinstance(activation, nn.ReLU):
        return "relu"
    elif activation is F.gelu or (isinstance(activation, nn.GELU) and
                                  getattr(activation, "approximate", "none") == "none"):
        return "gelu"
    elif isinstance(activation, nn.GELU) and activation.approximate == "tanh":
        return "gelu_tanh"
    raise Error("activation %r: attn's layer has relu, gelu (and nn.GELU(approximate='tanh'))"
                % (activation,))


def is_causal_mask(mask, L):
    """True when mask ([L, L], torch's module convention) is exactly the
    causal mask: bool True above the diagonal only, or float -inf above and
    0 on and below it (nn.Transformer.generate_square_subsequent_mask). As
    torch 2's _detect_is_causal_mask: the layer then runs the causal kernel,
    which skips the masked blocks, instead of reading the mask."""
    if mask is None or mask.dim() != 2 or tuple(mask.shape) != (L, L):
        return False
    above = torch.ones(L, L, dtype=torch.bool).triu(1)
    if mask.dtype == torch.bool:
        return torch.equal(mask, above)
    if not mask.is_floating_point():
        return False
    return bool(torch.equal(mask == float("-inf"), above) and
                not mask.masked_select(~above).any())


class _EncoderFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, run, src, flat, *params):
        ext, training, seed, precision, masks, keep = run
        B, L, E = src.shape
        out = torch.empty_like(src)
        ctx.saved = ext.forward(flat.data_ptr(), training, seed, precision, masks,
                                src.data_ptr(), B, L, out.data_ptr())
        ctx.ext, ctx.flat, ctx.keep = ext, flat, keep
        ctx.save_for_backward(src, *params)  # in-place changes before backward are caught
        return out

    @staticmethod
    def backward(ctx, dout):
        src, *params = ctx.saved_tensors
        ext = ctx.ext
        grad = _aligned_zeros(ext.numel)
        dsrc = torch.zeros_like(src)
        dout = dout.contiguous().float()
        ext.backward(ctx.flat.data_ptr(), grad.data_ptr(), ctx.saved, src.data_ptr(),
                     dout.data_ptr(), dsrc.data_ptr())
        grads = [grad[off:off + p.numel()].view(p.shape) if need else None
                 for (_, _, off), p, need in zip(ext.layout, params, ctx.needs_input_grad[3:])]
        return (None, dsrc if ctx.needs_input_grad[1] else None, None, *grads)


class TransformerEncoderLayer(nn.Module):
    """torch.nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=2048,
    dropout=0.1, activation="relu", layer_norm_eps=1e-5, batch_first=False,
    norm_first=False, bias=True, device=None, dtype=None) computed by libattn,
    forward and backward (float32 parameters on the CPU). Same state_dict
    names and initialisation as torch's; precision="bf16" runs the layer's
    matrix products with bf16 inputs and f32 accumulation (f32 weights,
    gradients, softmax and LayerNorm). forward(src, src_mask=None,
    src_key_padding_mask=None, is_causal=False)."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1,
                 activation: Union[str, Callable[[torch.Tensor], torch.Tensor]] = "relu",
                 layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device: Any = None,
                 dtype: Optional[torch.dtype] = None, precision: str = "f32") -> None:
        super().__init__()
        if device is not None and torch.device(device).type != "cpu":
            raise Error("device %s: attn's layer runs on the CPU" % (device,))
        if dtype not in (None, torch.float32):
            raise Error("dtype %s: attn's layer keeps float32 parameters (precision='bf16' for "
                        "bf16 matrix products)" % (dtype,))
        if precision not in _encoder_ext.PRECISIONS:
            raise Error("precision %r: 'f32' or 'bf16'" % (precision,))
        act = _activation_name(activation)
        self._ext = _encoder_ext.EncoderExt(int(d_model), int(nhead), int(dim_feedforward),
                                            float(dropout), act, float(layer_norm_eps),
                                            norm_first, bias)
        self.self_attn = _SelfAttention(d_model, nhead, bias)
        self.linear1 = nn.Linear(d_model, dim_feedforward, bias=bias)
        self.linear2 = nn.Linear(dim_feedforward, d_model, bias=bias)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps)
        if not bias:
            self.norm1.bias = self.norm2.bias = None  # type: ignore[assignment]
        self.d_model, self.nhead, self.dim_feedforward = d_model, nhead, dim_feedforward
        self.dropout_p, self.activation_name = float(dropout), act
        self.layer_norm_eps = layer_norm_eps
        self.batch_first, self.norm_first, self.bias = batch_first, norm_first, bias
        self.precision = precision
        self._flat = None
        self._bind()

    def extra_repr(self):
        return "d_model=%d, nhead=%d, dim_feedforward=%d, dropout=%g, activation=%s, " \
               "norm_first=%s, batch_first=%s, precision=%s" % (
                   self.d_model, self.nhead, self.dim_feedforward, self.dropout_p,
                   self.activation_name, self.norm_first, self.batch_first, self.precision)

    def _params(self):
        named = dict(self.named_parameters())
        out = []
        for name, shape, _ in self._ext.layout:
            p = named.get(name)
            if p is None:
                raise Error("parameter '%s' is missing (attn's layer needs every parameter of "
                            "torch's)" % name)
            if p.device.type != "cpu" or p.dtype != torch.float32 or tuple(p.shape) != shape:
                raise Error("parameter '%s': %s %s on %s; attn's layer needs float32 %s on the "
                            "CPU" % (name, p.dtype, tuple(p.shape), p.device, shape))
            out.append(p)
        return out

    def _bound(self, params):
        if self._flat is None:
            return False
        base = self._flat.data_ptr()
        return all(p.data_ptr() == base + 4 * off and p.is_contiguous()
                   for p, (_, _, off) in zip(params, self._ext.layout))

    @torch.no_grad()
    def _bind(self):
        """Gathers the parameters into one flat tensor in attn's layout and
        makes each Parameter a view of it (one copy)."""
        params = self._params()
        flat = _aligned_zeros(self._ext.numel)
        for p, (_, shape, off) in zip(params, self._ext.layout):
            view = flat[off:off + p.numel()].view(shape)
            view.copy_(p)
            p.data = view
        self._flat = flat

    def _masks(self, src_mask, kpm, is_causal, B, L):
        m = _encoder_ext.Masks()
        keep = []
        if kpm is not None:
            kpm = self._mask_tensor("src_key_padding_mask", kpm, [(B, L)])
            m.key_padding, m.key_padding_float = kpm.data_ptr(), int(kpm.dtype != torch.bool)
            keep.append(kpm)
        if src_mask is not None:
            src_mask = self._mask_tensor("src_mask", src_mask, [(L, L), (B * self.nhead, L, L)])
            if is_causal_mask(src_mask, L):
                src_mask, is_causal = None, True
        if src_mask is not None:
            m.attn_mask, m.attn_mask_float = src_mask.data_ptr(), int(src_mask.dtype != torch.bool)
            m.attn_mask_per_head = int(src_mask.dim() == 3)
            keep.append(src_mask)
        m.causal = int(bool(is_causal))
        return m, keep

    @staticmethod
    def _mask_tensor(name, t, shapes):
        if not isinstance(t, torch.Tensor):
            raise Error("%s: expected a torch.Tensor, got %s" % (name, type(t).__name__))
        if t.device.type != "cpu":
            raise Error("%s: on device '%s'; attn's layer runs on the CPU" % (name, t.device))
        if tuple(t.shape) not in shapes:
            raise Error("%s: shape %s, expected %s" % (name, tuple(t.shape),
                                                       " or ".join(str(s) for s in shapes)))
        if t.requires_grad:
            raise Error("%s: requires grad; attn's layer computes no gradient for masks" % name)
        if t.dtype == torch.uint8:
            t = t.bool()
        elif t.dtype != torch.bool and not t.is_floating_point():
            raise Error("%s: dtype %s (bool or float)" % (name, t.dtype))
        return t.contiguous() if t.dtype == torch.bool else t.float().contiguous()

    def forward(self, src: torch.Tensor, src_mask: Optional[torch.Tensor] = None,
                src_key_padding_mask: Optional[torch.Tensor] = None,
                is_causal: bool = False) -> torch.Tensor:
        """src [B, L, E] (batch_first) or [L, B, E], or unbatched [L, E],
        float32 (bfloat16: computed in f32, the output rounded to bf16); masks
        as torch's (bool True = not allowed, float added): src_mask [L, L] or
        [B * nhead, L, L], src_key_padding_mask [B, L]. is_causal=True: key j
        allowed for query i only if j <= i (with src_mask too: both apply). A
        src_mask that is exactly the causal mask (bool or float, as
        generate_square_subsequent_mask) runs as is_causal=True."""
        if not isinstance(src, torch.Tensor):
            raise Error("src: expected a torch.Tensor, got %s" % type(src).__name__)
        if src.device.type != "cpu" or src.dtype not in (torch.float32, torch.bfloat16):
            raise Error("src: %s on %s; attn's layer takes float32 (or bfloat16) CPU tensors"
                        % (src.dtype, src.device))
        in_dtype = src.dtype
        src = src.float()  # bf16 (e.g. from an autocast region): a copy in, one out
        if src.dim() not in (2, 3) or src.shape[-1] != self.d_model:
            raise Error("src: shape %s, expected [B, L, %d]%s or [L, %d]" % (
                tuple(src.shape), self.d_model, "" if self.batch_first else " as [L, B, E]",
                self.d_model))
        unbatched = src.dim() == 2
        x = src.unsqueeze(0) if unbatched else src if self.batch_first else src.transpose(0, 1)
        x = x.contiguous()
        B, L, _ = x.shape
        if unbatched and src_key_padding_mask is not None and src_key_padding_mask.dim() == 1:
            src_key_padding_mask = src_key_padding_mask.unsqueeze(0)
        params = self._params()
        if not self._bound(params):
            self._bind()
        masks, keep = self._masks(src_mask, src_key_padding_mask, is_causal, B, L)
        training = self.training and self.dropout_p > 0
        seed = int(torch.randint(0, 2 ** 62, (1,)).item()) if training else 0
        run = (self._ext, training, seed, self.precision, masks, keep)
        y = _EncoderFunction.apply(run, x, self._flat, *params)
        y = y.squeeze(0) if unbatched else y if self.batch_first else y.transpose(0, 1)
        return y.to(in_dtype)


def from_torch(layer: nn.TransformerEncoderLayer, precision: str = "f32") -> "TransformerEncoderLayer":
    """A new attn.torch.TransformerEncoderLayer with the configuration and a
    copy of the weights of a torch.nn.TransformerEncoderLayer (in its
    training/eval mode). Refused with a message: an activation other than
    relu/gelu, differing dropout probabilities, biases on some parts only."""
    if not isinstance(layer, nn.TransformerEncoderLayer):
        raise Error("from_torch: expected a torch.nn.TransformerEncoderLayer, got %s"
                    % type(layer).__name__)
    sa = layer.self_attn
    if not getattr(sa, "_qkv_same_embed_dim", True):
        raise Error("from_torch: self_attn with separate q/k/v projection weights")
    ps = {layer.dropout.p, layer.dropout1.p, layer.dropout2.p, sa.dropout}
    if len(ps) != 1:
        raise Error("from_torch: dropout probabilities %s differ (attn's layer has one)"
                    % sorted(ps))
    biases = {sa.in_proj_bias is not None, sa.out_proj.bias is not None,
              layer.linear1.bias is not None, layer.linear2.bias is not None,
              layer.norm1.bias is not None, layer.norm2.bias is not None}
    if len(biases) != 1:
        raise Error("from_torch: biases on some parts of the layer only")
    act = getattr(layer, "activation", "relu")
    m = TransformerEncoderLayer(sa.embed_dim, sa.num_heads, layer.linear1.out_features,
                                dropout=ps.pop(), activation=act,
                                layer_norm_eps=layer.norm1.eps,
                                batch_first=getattr(layer, "batch_first",
                                                    getattr(sa, "batch_first", False)),
                                norm_first=getattr(layer, "norm_first", False),
                                bias=biases.pop(), precision=precision)
    m.load_state_dict(layer.state_dict())
    return m.train(layer.training)
