"""attn.sdpa / attn.sdpa_backward on numpy arrays (include/attn/sdpa.h).

Shapes: q [B, Hq, Lq, D], k [B, Hkv, Lk, D], v [B, Hkv, Lk, Dv] (or the same
without B, or without B and H); Hq a multiple of Hkv (grouped-query).
float32 arrays whose last dim is contiguous go to the library without a copy
in the forward (any other strides, e.g. a transposed [B, L, H, D] view);
other float dtypes are converted; anything else is refused."""
from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any, Optional, Tuple, Union, overload

try:
    from typing import Literal
except ImportError:  # Python 3.7
    from typing_extensions import Literal  # type: ignore[assignment]

import numpy as np

from . import _desc
from ._arrays import as_float32, bf16_bits, elem_strides, ptr, rows_view, to_4d
from ._lib import Error, backend_code, check, lib

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

_PRECISIONS = ("f32", "bf16")


class _Problem:
    """A validated call: the descriptor, the 4-D operands and every array the
    descriptor points into (kept alive while the call runs)."""

    def __init__(self, q, k, v, mask, causal, window, scale, backend, key_lens, q_offset, alibi,
                 rel_bias, rel_max_distance, rel_bidirectional, shaw_k, shaw_v, block_mask,
                 block_size, precision, contiguous, prefix_lens=None, softcap=0.0):
        if precision not in _PRECISIONS:
            raise Error("precision: '%s', expected f32 or bf16" % (precision,))
        self.bf16 = precision == "bf16"
        self.backend = backend_code(backend)
        if self.bf16 and backend == "math":
            raise Error("precision='bf16' runs on the flash backend only (backend='math' given)")
        self.rank = np.ndim(q)
        ops = []
        for name, a in (("q", q), ("k", k), ("v", v)):
            a = np.asarray(a)
            if not (self.bf16 and a.dtype == np.uint16):
                a = as_float32(name, a)
            if a.ndim != self.rank:
                raise Error("%s: %d dims but q has %d" % (name, a.ndim, self.rank))
            a = to_4d(name, a)
            if self.bf16:
                a = bf16_bits(name, a)
            elif contiguous:
                a = np.ascontiguousarray(a)
            else:
                a = rows_view(name, a)
            ops.append(a)
        self.q, self.k, self.v = ops
        B, Hq, Lq, D = self.q.shape
        Bk, Hkv, Lk, Dk = self.k.shape
        Bv, Hv, Lv, Dv = self.v.shape
        if Bk != B or Bv != B:
            raise Error("batch: q has %d, k %d, v %d" % (B, Bk, Bv))
        if Hv != Hkv or Lv != Lk:
            raise Error("v: heads and length %dx%d differ from k's %dx%d" % (Hv, Lv, Hkv, Lk))
        if Dk != D:
            raise Error("k: head dim %d differs from q's %d" % (Dk, D))
        if Hkv == 0 or Hq % Hkv:
            raise Error("heads: q has %d, k/v %d (q's must be a multiple)" % (Hq, Hkv))
        self.shape = (B, Hq, Lq, Lk, D, Dv)
        d = self.desc = _desc.new_desc(B, Hq, Hkv, Lq, Lk, D, Dv)
        self.keep = []
        for field, a in (("q_stride", self.q), ("k_stride", self.k), ("v_stride", self.v)):
            getattr(d, field)[:] = elem_strides(a)[:3]
        if scale is not None:
            d.scale, d.has_scale = float(scale), 1
        d.causal = 1 if causal else 0
        if window is not None:
            left, right = (window, window) if np.ndim(window) == 0 else window
            d.window_left = -1 if left is None else int(left)
            d.window_right = -1 if right is None else int(right)
        d.q_offset = int(q_offset)
        if mask is not None:
            self._mask(mask)
        if key_lens is not None:
            kl = np.ascontiguousarray(key_lens, dtype=np.int32)
            if kl.shape != (B,):
                raise Error("key_lens: shape %s, expected [%d] (one length per batch)" % (kl.shape, B))
            d.key_lens = self._keep(kl)
        if prefix_lens is not None:
            pl = np.ascontiguousarray(prefix_lens, dtype=np.int32)
            if pl.shape != (B,):
                raise Error("prefix_lens: shape %s, expected [%d] (one prefix length per batch)"
                            % (pl.shape, B))
            d.prefix_lens = self._keep(pl)
        if softcap:
            d.softcap = float(softcap)
        if alibi is not None and alibi is not False:
            if alibi is True:
                slopes = np.empty(Hq, np.float32)
                check(lib.attn_alibi_slopes(Hq, ptr(slopes)), "alibi")
            else:
                slopes = np.ascontiguousarray(as_float32("alibi", alibi))
                if slopes.shape != (Hq,):
                    raise Error("alibi: shape %s, expected [%d] slopes (or True)" % (slopes.shape, Hq))
            d.alibi_slopes = self._keep(slopes)
        self.rel_bias = self.shaw_k = self.shaw_v = None
        if rel_bias is not None:
            rb = self.rel_bias = self._table("rel_bias", rel_bias, Hq, None)
            d.rel_bias, d.rel_buckets = ptr(rb), rb.shape[1]
            d.rel_max_distance, d.rel_bidirectional = int(rel_max_distance), int(bool(rel_bidirectional))
        if shaw_k is not None:
            sk = self.shaw_k = self._table("shaw_k", shaw_k, None, D)
            d.shaw_k, d.shaw_max = ptr(sk), (sk.shape[0] + 1) // 2
        if shaw_v is not None:
            if shaw_k is None:
                raise Error("shaw_v: needs shaw_k (the Shaw table's key part)")
            sv = self.shaw_v = self._table("shaw_v", shaw_v, self.shaw_k.shape[0], Dv)
            d.shaw_v = ptr(sv)
        if block_mask is not None:
            bm = np.ascontiguousarray(np.asarray(block_mask).astype(np.uint8, copy=False))
            if bm.ndim != 2 or not block_size:
                raise Error("block_mask: expected [query blocks, key blocks] with block_size > 0")
            d.block_mask, d.block_size, d.block_cols = self._keep(bm), int(block_size), bm.shape[1]

    def _keep(self, a):
        self.keep.append(a)
        return ptr(a)

    def _table(self, name, a, rows, cols):
        a = np.ascontiguousarray(as_float32(name, a))
        if a.ndim != 2 or (rows is not None and a.shape[0] != rows) or \
                (cols is not None and a.shape[1] != cols):
            raise Error("%s: shape %s, expected [%s, %s]" % (name, a.shape, rows or "n", cols or "n"))
        return a

    def _mask(self, mask):
        B, Hq, Lq, Lk = self.shape[:4]
        m = np.asarray(mask)
        if m.dtype == np.bool_:
            m = m.view(np.uint8)
            field = "bool_mask"
        else:
            m = as_float32("mask", m)
            field = "add_mask"
        if elem_strides(m) is None:
            m = np.ascontiguousarray(m)
        try:
            m = np.broadcast_to(m, (B, Hq, Lq, Lk))
        except ValueError:
            raise Error("mask: shape %s does not broadcast to [B, H, Lq, Lk] = [%d, %d, %d, %d]"
                        % (np.shape(mask), B, Hq, Lq, Lk)) from None
        setattr(self.desc, field, self._keep(m))
        getattr(self.desc, field + "_stride")[:] = elem_strides(m)

    def out_shape(self, last):
        lead = (self.shape[0], self.shape[1], self.shape[2])
        return lead[4 - self.rank:] + ((last,) if last is not None else ())


# The peers' spellings of the same keywords (docs/ARCHITECTURE.md, "One descriptor"):
# PyTorch 2's is_causal, FlashAttention's window_size (left, right) with -1 for
# unbounded, ggml's logit_softcap. Both spellings at once must agree.
_UNSET = object()


def _peer_spellings(causal, window, variants):
    is_causal = variants.pop("is_causal", _UNSET)
    if is_causal is not _UNSET:
        if causal and not is_causal:
            raise Error("causal=True and is_causal=False disagree")
        causal = causal or bool(is_causal)
    window_size = variants.pop("window_size", _UNSET)
    if window_size is not _UNSET:
        if window is not None:
            raise Error("window and window_size both given (one spelling of the window)")
        try:
            left, right = (int(x) for x in window_size)
        except (TypeError, ValueError):
            raise Error("window_size: %r, expected (left, right) integers, -1 = unbounded"
                        % (window_size,)) from None
        if left < -1 or right < -1:
            raise Error("window_size: %r, each must be >= -1 (-1 = unbounded)" % (window_size,))
        window = (None if left < 0 else left, None if right < 0 else right)
    logit_softcap = variants.pop("logit_softcap", _UNSET)
    if logit_softcap is not _UNSET:
        softcap = variants.get("softcap", _UNSET)
        if softcap is not _UNSET and float(softcap) != float(logit_softcap):
            raise Error("softcap=%r and logit_softcap=%r disagree" % (softcap, logit_softcap))
        variants["softcap"] = logit_softcap
    return causal, window


def _problem(q, k, v, mask=None, causal=False, window=None, scale=None, backend="auto",
             key_lens=None, q_offset=0, alibi=None, rel_bias=None, rel_max_distance=128,
             rel_bidirectional=True, shaw_k=None, shaw_v=None, block_mask=None, block_size=0,
             precision="f32", contiguous=False, prefix_lens=None, softcap=0.0):
    return _Problem(q, k, v, mask, causal, window, scale, backend, key_lens, q_offset, alibi,
                    rel_bias, rel_max_distance, rel_bidirectional, shaw_k, shaw_v, block_mask,
                    block_size, precision, contiguous, prefix_lens, softcap)


Window = Union[int, Tuple[Optional[int], Optional[int]], None]


@overload
def sdpa(q: ArrayLike, k: ArrayLike, v: ArrayLike, mask: Optional[ArrayLike] = None,
         causal: bool = False, window: Window = None, scale: Optional[float] = None,
         backend: str = "auto", return_lse: Literal[False] = False,
         return_probs: Literal[False] = False, **variants: Any) -> np.ndarray: ...
@overload
def sdpa(q: ArrayLike, k: ArrayLike, v: ArrayLike, mask: Optional[ArrayLike] = None,
         causal: bool = False, window: Window = None, scale: Optional[float] = None,
         backend: str = "auto", *, return_lse: Literal[True],
         return_probs: Literal[False] = False, **variants: Any) -> Tuple[np.ndarray, np.ndarray]: ...
@overload
def sdpa(q: ArrayLike, k: ArrayLike, v: ArrayLike, mask: Optional[ArrayLike] = None,
         causal: bool = False, window: Window = None, scale: Optional[float] = None,
         backend: str = "auto", *, return_lse: Literal[False] = False,
         return_probs: Literal[True], **variants: Any) -> Tuple[np.ndarray, np.ndarray]: ...
@overload
def sdpa(q: ArrayLike, k: ArrayLike, v: ArrayLike, mask: Optional[ArrayLike] = None,
         causal: bool = False, window: Window = None, scale: Optional[float] = None,
         backend: str = "auto", *, return_lse: Literal[True], return_probs: Literal[True],
         **variants: Any) -> Tuple[np.ndarray, np.ndarray, np.ndarray]: ...
@overload
def sdpa(q: ArrayLike, k: ArrayLike, v: ArrayLike, mask: Optional[ArrayLike] = None,
         causal: bool = False, window: Window = None, scale: Optional[float] = None,
         backend: str = "auto", return_lse: bool = False, return_probs: bool = False,
         **variants: Any) -> Union[np.ndarray, Tuple[np.ndarray, ...]]: ...


def sdpa(q: ArrayLike, k: ArrayLike, v: ArrayLike, mask: Optional[ArrayLike] = None,
         causal: bool = False, window: Window = None, scale: Optional[float] = None,
         backend: str = "auto", return_lse: bool = False, return_probs: bool = False,
         **variants: Any) -> Union[np.ndarray, Tuple[np.ndarray, ...]]:
    """Scaled dot-product attention: softmax(scale * q kᵀ + mask) v.

    q [B, Hq, Lq, D], k [B, Hkv, Lk, D], v [B, Hkv, Lk, Dv] (B and H may be
    left out together or B alone); returns out [.., Lq, Dv] float32, and
    with return_lse the log-sum-exp [.., Lq] (needed by sdpa_backward), with
    return_probs the probabilities [.., Lq, Lk] (0 where masked).

    mask: bool (True = may attend, as PyTorch 2's attn_mask) or float (added
      to the logits), broadcast to [B, Hq, Lq, Lk] without copying.
    causal: key j allowed for query i iff j <= i + q_offset.
    window: w (= (w, w)) or (left, right): keys i-left <= j <= i+right (None: unbounded).
    scale: default 1/sqrt(D). backend: "auto", "flash" or "math".
    variants (keywords): key_lens [B] int, q_offset int, alibi (True or slopes
      [Hq]), rel_bias [Hq, buckets] (+ rel_max_distance=128,
      rel_bidirectional=True: T5), shaw_k [2M-1, D] / shaw_v [2M-1, Dv]
      (Shaw relative positions), block_mask [nqb, nkb] + block_size
      (block-sparse), prefix_lens [B] int (with causal: keys j < prefix_lens[b]
      seen by every query, prefix-LM), softcap (> 0: softcap * tanh(logit /
      softcap)), precision="bf16" (q, k, v rounded to bf16, or uint16 bf16 bit
      patterns; f32 softmax and output; flash only).
    The peers' spellings are accepted: is_causal (PyTorch 2), window_size=(left,
      right) with -1 = unbounded (FlashAttention), logit_softcap (ggml).
    A query row with no allowed key gives out 0 and lse -inf."""
    causal, window = _peer_spellings(causal, window, variants)
    p = _problem(q, k, v, mask, causal, window, scale, backend, **variants)
    B, Hq, Lq, Lk, D, Dv = p.shape
    out = np.empty((B, Hq, Lq, Dv), np.float32)
    lse = np.empty((B, Hq, Lq), np.float32)
    probs = None
    if return_probs:
        if p.bf16:
            raise Error("return_probs: not available with precision='bf16'")
        probs = np.empty((B, Hq, Lq, Lk), np.float32)
    _desc.forward(p.desc, p.backend, p.bf16, ptr(p.q), ptr(p.k), ptr(p.v), ptr(out), ptr(lse),
                  ptr(probs))
    res = [out.reshape(p.out_shape(Dv))]
    if return_lse:
        res.append(lse.reshape(p.out_shape(None)))
    if probs is not None:
        res.append(probs.reshape(p.out_shape(Lk)))
    return res[0] if len(res) == 1 else tuple(res)


class Grads(tuple):
    """(dq, dk, dv), with .rel_bias, .shaw_k, .shaw_v: the learned tables'
    gradients where those tables were given (else None)."""

    dq: np.ndarray
    dk: np.ndarray
    dv: np.ndarray
    rel_bias: Optional[np.ndarray]
    shaw_k: Optional[np.ndarray]
    shaw_v: Optional[np.ndarray]

    def __new__(cls, dq: np.ndarray, dk: np.ndarray, dv: np.ndarray,
                rel_bias: Optional[np.ndarray] = None, shaw_k: Optional[np.ndarray] = None,
                shaw_v: Optional[np.ndarray] = None) -> "Grads":
        t = super().__new__(cls, (dq, dk, dv))  # type: ignore[arg-type]
        t.dq, t.dk, t.dv = dq, dk, dv
        t.rel_bias, t.shaw_k, t.shaw_v = rel_bias, shaw_k, shaw_v
        return t


def sdpa_backward(q: ArrayLike, k: ArrayLike, v: ArrayLike, out: ArrayLike, lse: ArrayLike,
                  dout: ArrayLike, mask: Optional[ArrayLike] = None, causal: bool = False,
                  window: Window = None, scale: Optional[float] = None, backend: str = "auto",
                  **variants: Any) -> Grads:
    """Gradients of sdpa: dq, dk, dv (float32, the shapes of q, k, v) from
    the forward's out and lse and dout = dLoss/dout, with the same q, k, v
    and options as the forward. Returns Grads (a tuple dq, dk, dv; with
    rel_bias / shaw_k / shaw_v given, also their gradients as attributes)."""
    causal, window = _peer_spellings(causal, window, variants)
    p = _problem(q, k, v, mask, causal, window, scale, backend, contiguous=True, **variants)
    B, Hq, Lq, Lk, D, Dv = p.shape
    o = np.ascontiguousarray(as_float32("out", out)).reshape(-1)
    do = np.ascontiguousarray(as_float32("dout", dout)).reshape(-1)
    ls = np.ascontiguousarray(as_float32("lse", lse)).reshape(-1)
    for name, a, n in (("out", o, B * Hq * Lq * Dv), ("dout", do, B * Hq * Lq * Dv),
                       ("lse", ls, B * Hq * Lq)):
        if a.size != n:
            raise Error("%s: %d elements, expected %d (shape %s)" % (
                name, a.size, n, p.out_shape(Dv if name != "lse" else None)))
    dq = np.empty(p.q.shape, np.float32)
    dk = np.empty(p.k.shape, np.float32)
    dv = np.empty(p.v.shape, np.float32)
    tables = {}
    for name in ("rel_bias", "shaw_k", "shaw_v"):
        t = getattr(p, name)
        if t is not None:
            tables[name] = np.empty_like(t)
            setattr(p.desc, name + "_grad", ptr(tables[name]))
    _desc.backward(p.desc, p.backend, p.bf16, ptr(p.q), ptr(p.k), ptr(p.v), ptr(o), ptr(ls),
                   ptr(do), ptr(dq), ptr(dk), ptr(dv))
    lead = 4 - p.rank
    return Grads(dq.reshape(dq.shape[lead:]), dk.reshape(dk.shape[lead:]),
                 dv.reshape(dv.shape[lead:]), **tables)
