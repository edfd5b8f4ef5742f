"""attn_encoder_ext (include/attn/nn_encoder_ext.h) over ctypes: a
TransformerEncoderLayer whose parameters live in the caller's memory (one
flat float32 buffer, 64-byte aligned, passed by pointer on every call).
Used by attn.torch.TransformerEncoderLayer; no torch here."""
import ctypes

from . import _lib

_p = ctypes.c_void_p
_i64 = ctypes.c_int64
_int = ctypes.c_int
_f = ctypes.c_float

ACTIVATIONS = {"relu": 0, "gelu": 1, "gelu_tanh": 2}
PRECISIONS = {"f32": 0, "bf16": 1}


class LayerConfig(ctypes.Structure):
    """attn_layer_config (include/attn/nn.h)."""
    _fields_ = [("d_model", _i64), ("nhead", _i64), ("dim_feedforward", _i64),
                ("dropout", _f), ("activation", _int), ("layer_norm_eps", _f),
                ("norm_first", _int), ("bias", _int)]


class Masks(ctypes.Structure):
    """attn_encoder_ext_masks."""
    _fields_ = [("key_padding", _p), ("key_padding_float", _int),
                ("attn_mask", _p), ("attn_mask_float", _int), ("attn_mask_per_head", _int),
                ("causal", _int)]


_PROTOS = {
    "attn_encoder_ext_new": (_int, [_p, _p]),
    "attn_encoder_ext_free": (None, [_p]),
    "attn_encoder_ext_numel": (_i64, [_p]),
    "attn_encoder_ext_count": (_int, [_p]),
    "attn_encoder_ext_param": (_int, [_p, _int, _p, _p, _p, _p]),
    "attn_encoder_ext_forward": (_int, [_p, _p, _int, ctypes.c_uint64, _int, _p, _p, _i64, _i64,
                                        _p, _p]),
    "attn_encoder_ext_backward": (_int, [_p, _p, _p, _p, _p, _p, _p]),
    "attn_encoder_ext_saved_free": (None, [_p]),
}
_fn = {}
for _name, (_res, _args) in _PROTOS.items():
    _fn[_name] = getattr(_lib.lib, _name)
    _fn[_name].restype = _res
    _fn[_name].argtypes = _args


class Saved:
    """One forward's saved activations (freed with this object)."""

    def __init__(self, handle):
        self.handle = handle

    def __del__(self):
        if self.handle:
            _fn["attn_encoder_ext_saved_free"](self.handle)
            self.handle = None


class EncoderExt:
    """The C layer of one configuration: its parameter layout (.numel,
    .layout = [(name, shape, offset)], offsets in floats) and raw calls."""

    def __init__(self, d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                 norm_first, bias):
        self.args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps,
                     norm_first, bias)
        c = LayerConfig(d_model, nhead, dim_feedforward, dropout, ACTIVATIONS[activation],
                        layer_norm_eps, int(bool(norm_first)), int(bool(bias)))
        h = _p()
        _lib.check(_fn["attn_encoder_ext_new"](ctypes.byref(c), ctypes.byref(h)))
        self.handle = h
        self.numel = _fn["attn_encoder_ext_numel"](h)
        self.layout = []
        name, ndim, shape, off = ctypes.c_char_p(), _int(), (_i64 * 4)(), _i64()
        for i in range(_fn["attn_encoder_ext_count"](h)):
            _lib.check(_fn["attn_encoder_ext_param"](h, i, ctypes.byref(name), ctypes.byref(ndim),
                                                     shape, ctypes.byref(off)))
            self.layout.append((name.value.decode(), tuple(shape[:ndim.value]), off.value))

    def __del__(self):
        if getattr(self, "handle", None):
            _fn["attn_encoder_ext_free"](self.handle)
            self.handle = None

    # a module holding one can be deep-copied and pickled: a new C layer
    def __reduce__(self):
        return (EncoderExt, self.args)

    def __deepcopy__(self, memo):
        return EncoderExt(*self.args)

    def forward(self, params, training, seed, precision, masks, src, B, L, out):
        saved = _p()
        _lib.check(_fn["attn_encoder_ext_forward"](
            self.handle, params, int(training), seed, PRECISIONS[precision], ctypes.byref(masks),
            src, B, L, out, ctypes.byref(saved)), "attn.torch.TransformerEncoderLayer forward")
        return Saved(saved)

    def backward(self, params, grad, saved, src, dout, dsrc):
        _lib.check(_fn["attn_encoder_ext_backward"](self.handle, params, grad, saved.handle, src,
                                                    dout, dsrc),
                   "attn.torch.TransformerEncoderLayer backward")
