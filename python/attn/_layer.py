"""attn.load_layer: a PyTorch-named layer file (the format of `attn layer`,
attn_layer_run_st in include/attn/nn.h) run from numpy.

The file holds the module's parameters under their state_dict names and
__metadata__ kind = mha | encoder | decoder | seed...; num_heads, norm_first,
activation, layer_norm_eps, ... Inputs a reference export left in the file
(and its outputs) are dropped at load; each call passes its own inputs."""
from __future__ import annotations

import ctypes
import os
from typing import TYPE_CHECKING, Dict, Mapping, Optional, Tuple, Union

import numpy as np

from ._lib import backend_code, check, lib
from ._st import StSet

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

# the inputs attn_layer_run_st accepts, by kind; the first is forward's x
_INPUTS = {
    "mha": ("query", "key", "value", "key_padding_mask", "attn_mask"),
    "encoder": ("src", "src_mask", "src_key_padding_mask"),
    "decoder": ("tgt", "memory", "tgt_mask", "memory_mask", "tgt_key_padding_mask",
                "memory_key_padding_mask"),
}
_ALL_INPUTS = {n for names in _INPUTS.values() for n in names} | {"x", "dout"}


def _is_output(name):
    return name in ("out", "attn_weights") or name.startswith("grad.")


class Layer:
    """A loaded layer. .kind, .metadata, .params (name -> array)."""

    kind: str
    metadata: Dict[str, str]
    params: Dict[str, np.ndarray]
    path: str

    def __init__(self, path: Union[str, "os.PathLike[str]"]) -> None:
        st = StSet.load(path)
        try:
            self.metadata = st.metadata()
            self.params = {n: st.get(n) for n in st.names()
                           if n not in _ALL_INPUTS and not _is_output(n)}
        finally:
            st.close()
        self.kind = self.metadata.get("kind", "")
        self.path = str(path)

    def input_names(self) -> Tuple[str, ...]:
        return _INPUTS.get(self.kind, ("x",))

    def run(self, inputs: Mapping[str, ArrayLike], dout: Optional[ArrayLike] = None,
            backend: str = "auto") -> Dict[str, np.ndarray]:
        """All outputs of one call as a dict: "out", "attn_weights" (mha) and,
        with dout (dLoss/dout, the shape of out), "grad.<name>" for every
        float input and parameter. inputs: name -> array under PyTorch's
        argument names (batch first; bool masks True = NOT allowed, float
        masks added, as torch.nn modules)."""
        code = backend_code(backend)
        st = StSet()
        try:
            for k, v in self.metadata.items():
                st.set_meta(k, v)
            for name, a in self.params.items():
                st.add(name, a)
            for name, x in inputs.items():
                if x is not None:
                    st.add(name, x)
            if dout is not None:
                st.add("dout", dout)
            out = ctypes.c_void_p()
            check(lib.attn_layer_run_st(st.handle, code, ctypes.byref(out)), self.path)
            res = StSet(out.value)
            try:
                return {n: res.get(n) for n in res.names()}
            finally:
                res.close()
        finally:
            st.close()

    def forward(self, x: ArrayLike, backend: str = "auto", **inputs: ArrayLike) -> np.ndarray:
        """The layer's output for x (query / src / tgt / x by kind) and the
        other inputs by name (e.g. memory=, src_mask=, key_padding_mask=)."""
        inputs = dict(inputs)
        inputs[self.input_names()[0]] = x
        return self.run(inputs, backend=backend)["out"]

    __call__ = forward


def load_layer(path: Union[str, "os.PathLike[str]"]) -> Layer:
    """Loads a layer file (see Layer)."""
    return Layer(path)
