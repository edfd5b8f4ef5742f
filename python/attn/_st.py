"""Named tensors through the library's safetensors sets (attn_st_*,
include/attn/safetensors.h): numpy dicts in and out, files read and written
by libattn (atomically), and the in-memory sets that attn_layer_run_st takes."""
from __future__ import annotations

import ctypes
import os
from typing import Any, Dict, Mapping, Optional, Tuple, Union

import numpy as np

from ._lib import Error, check, lib

# attn_dtype (include/attn/tensor.h) <-> numpy
_F32, _F16, _BF16, _I64, _I32, _I8, _U8, _BOOL = range(8)
_TO_NUMPY = {_F32: np.float32, _F16: np.float16, _I64: np.int64, _I32: np.int32, _I8: np.int8,
             _U8: np.uint8, _BOOL: np.bool_}
_FROM_NUMPY = {np.dtype(v): k for k, v in _TO_NUMPY.items()}


class _Tensor(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("ndim", ctypes.c_int),
                ("shape", ctypes.c_int64 * 8), ("data", ctypes.c_void_p)]


class StSet:
    """An owned attn_st handle (freed with the object or by close())."""

    def __init__(self, handle=None):
        if handle is None:
            h = ctypes.c_void_p()
            check(lib.attn_st_new(ctypes.byref(h)), "safetensors")
            handle = h.value
        self.handle = handle

    @classmethod
    def load(cls, path):
        h = ctypes.c_void_p()
        check(lib.attn_st_load(str(path).encode(), ctypes.byref(h)))
        return cls(h.value)

    def close(self):
        if self.handle:
            lib.attn_st_free(self.handle)
            self.handle = None

    def __del__(self):
        self.close()

    def names(self):
        return [lib.attn_st_name(self.handle, i).decode()
                for i in range(lib.attn_st_count(self.handle))]

    def metadata(self):
        out = {}
        for i in range(lib.attn_st_meta_count(self.handle)):
            key = lib.attn_st_meta_key(self.handle, i)
            out[key.decode()] = lib.attn_st_meta(self.handle, key).decode()
        return out

    def get(self, name):
        """A numpy copy of tensor name (BF16 widened to float32); None if absent."""
        p = lib.attn_st_get(self.handle, name.encode())
        if not p:
            return None
        t = _Tensor.from_address(p)
        shape = tuple(t.shape[:t.ndim])
        n = int(np.prod(shape, dtype=np.int64))
        if t.dtype == _BF16:
            bits = np.ctypeslib.as_array((ctypes.c_uint16 * n).from_address(t.data)) if n else \
                np.empty(0, np.uint16)
            return (bits.astype(np.uint32) << 16).view(np.float32).reshape(shape)
        dt = np.dtype(_TO_NUMPY[t.dtype])
        buf = (ctypes.c_char * (n * dt.itemsize)).from_address(t.data) if n else b""
        return np.frombuffer(buf, dtype=dt).reshape(shape).copy()

    def add(self, name, a):
        """Adds array a under name (data copied): float arrays as F32 (other
        float dtypes converted), bool, uint8, int8/32/64 as such."""
        a = np.asarray(a)
        if a.dtype.kind == "f" and a.dtype != np.float16:
            a = a.astype(np.float32, copy=False)
        if a.dtype not in _FROM_NUMPY:
            raise Error("%s: dtype %s cannot be stored (float, bool, uint8, int8/32/64)" % (name, a.dtype))
        a = np.ascontiguousarray(a)
        shape = (ctypes.c_int64 * max(a.ndim, 1))(*a.shape)
        check(lib.attn_st_add(self.handle, name.encode(), _FROM_NUMPY[a.dtype], a.ndim, shape,
                              a.ctypes.data), name)

    def set_meta(self, key, value):
        check(lib.attn_st_set_meta(self.handle, key.encode(), str(value).encode()), key)

    def save(self, path):
        check(lib.attn_st_save(self.handle, str(path).encode()))


def save_file(tensors: Mapping[str, Any], path: Union[str, "os.PathLike[str]"],
              metadata: Optional[Mapping[str, Any]] = None) -> None:
    """Writes a safetensors file (atomically) from a dict name -> array."""
    st = StSet()
    try:
        for k, v in (metadata or {}).items():
            st.set_meta(k, v)
        for name, a in tensors.items():
            st.add(name, a)
        st.save(path)
    finally:
        st.close()


def load_file(path: Union[str, "os.PathLike[str]"]) -> Tuple[Dict[str, np.ndarray], Dict[str, str]]:
    """(tensors, metadata) of a safetensors file: dicts of numpy arrays and strings."""
    st = StSet.load(path)
    try:
        return {n: st.get(n) for n in st.names()}, st.metadata()
    finally:
        st.close()
