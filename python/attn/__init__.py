"""attn from Python: numpy in and out over libattn.so (ctypes).

  attn.sdpa(q, k, v, ...)            fused attention forward (and lse, probs)
  attn.sdpa_backward(...)            its gradients
  attn.load_layer(path).forward(x)   a PyTorch-named layer file (`attn layer`)
  attn.viz.heatmap(w, tokens, path)  pictures of attention weights (`attn viz`)
  attn.diagnose(w, tokens)           what each head does (`attn diagnose`)
  attn.torch.scaled_dot_product_attention  the PyTorch autograd op (import attn.torch)
  attn.torch.TransformerEncoderLayer       the whole layer in attn, forward and backward
  attn.Error                         a failed library call, with its message
  attn.set_num_threads(n)            attn's own thread count (ATTN_NUM_THREADS)
  python -m attn ARGS...             the attn tool (the one shipped in the package)
"""
from ._lib import (Error, get_num_threads, isa, num_threads, path as library_path,
                   set_num_threads, version)
from ._sdpa import Grads, sdpa, sdpa_backward

__all__ = ["Error", "Grads", "sdpa", "sdpa_backward", "isa", "library_path", "get_num_threads",
           "num_threads", "set_num_threads", "version"]
from ._layer import Layer, load_layer
from ._st import load_file as load_safetensors, save_file as save_safetensors

__all__ += ["Layer", "load_layer", "load_safetensors", "save_safetensors"]
from . import viz
from ._diagnose import Diagnosis, diagnose

__all__ += ["viz", "Diagnosis", "diagnose"]
