"""numpy arguments at the library boundary: dtype checks and conversions
with messages naming the argument, strides in elements, bf16 rounding."""
import numpy as np

from ._lib import Error


def as_float32(name, a):
    """a as a float32 array: float32 passes as is (no copy), other float
    dtypes are converted, anything else is refused naming the argument."""
    a = np.asarray(a)
    if a.dtype == np.float32:
        return a
    if a.dtype.kind == "f":
        return a.astype(np.float32)
    raise Error("%s: dtype %s, expected a float array (float32; other float dtypes are "
                "converted)" % (name, a.dtype))


def elem_strides(a):
    """Strides of a in elements, or None when they are not whole elements or negative."""
    out = []
    for s in a.strides:
        if s < 0 or s % a.itemsize:
            return None
        out.append(s // a.itemsize)
    return out


def rows_view(name, a):
    """a ready for a descriptor whose last dim must be contiguous and whose
    other strides are free (zero-copy when they allow, else a C-contiguous copy)."""
    st = elem_strides(a)
    if st is None or (a.shape[-1] > 1 and st[-1] != 1) or \
            (all(s == 0 for s in st[:-1]) and any(n > 1 for n in a.shape[:-1])):
        return np.ascontiguousarray(a)
    return a


def to_4d(name, a):
    if a.ndim < 2 or a.ndim > 4:
        raise Error("%s: %d dims, expected [L, D], [H, L, D] or [B, H, L, D]" % (name, a.ndim))
    return a.reshape((1,) * (4 - a.ndim) + a.shape) if a.ndim < 4 else a


def bf16_bits(name, a):
    """bf16 bit patterns (uint16) of a: uint16 arrays are taken as such,
    float arrays are rounded to nearest even."""
    a = np.asarray(a)
    if a.dtype == np.uint16:
        return np.ascontiguousarray(a)
    a = np.ascontiguousarray(as_float32(name, a))
    u = a.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(a)
    if nan.any():
        r[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)  # stays a quiet NaN
    return r


def bf16_to_float32(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def ptr(a):
    return a.ctypes.data if a is not None else None
