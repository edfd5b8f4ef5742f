#!/usr/bin/python3
"""attn's and PyTorch's side of `make bench-peers`: a long-lived process that
bench_peers.py drives with one JSON request per line on stdin; each answer is
one line "@@ {json}" on stdout (ort_worker.js speaks the same protocol).

    /usr/bin/python3 py_worker.py attn|torch THREADS

Requests (tensors are raw little-endian f32 files, [B, H, N, D]):
  {"op": "hello"}                                     -> version, details
  {"op": "load", "dir", "B", "H", "N", "D", "causal"}  q, k, v, dout from dir
  {"op": "time", "reps", "backward"}                  -> wall seconds per run
  {"op": "dump", "path", "backward"}                  out, or dq dk dv (path + ".dq" ...)

attn: the Python package over libattn.so (python/, ctypes: the same
attn_sdpa_forward / attn_sdpa_backward as the C API), backend auto.
torch: softmax(q kᵀ / sqrt(D)) v in plain torch ops (torch 1.13 has no
fused CPU attention; its private _scaled_dot_product_attention is this same
math), forward under no_grad; backward is autograd's of that formula, timed
alone: one forward builds the graph (kept), each timed run is one
torch.autograd.grad over it. Both tools use THREADS threads; for torch that
includes OpenBLAS's own pool (Debian's torch does its matmuls there)."""
import ctypes
import json
import math
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))


def reply(obj):
    sys.stdout.write("@@ " + json.dumps(obj) + "\n")
    sys.stdout.flush()


def read_f32(path, shape):
    a = np.fromfile(path, dtype="<f4")
    if a.size != int(np.prod(shape)):
        raise ValueError("%s: %d floats, expected %d" % (path, a.size, int(np.prod(shape))))
    return a.reshape(shape)


def write_f32(path, a):
    np.ascontiguousarray(a, dtype="<f4").tofile(path)


class AttnTool:
    def __init__(self, threads):
        import attn
        self.attn = attn
        attn.set_num_threads(threads)
        self.x = None

    def hello(self):
        a = self.attn
        return {"tool": "attn", "version": a.version(), "isa": a.isa(),
                "threads": a.num_threads(), "library": a.library_path}

    def load(self, qkvd, causal):
        self.x = qkvd
        self.causal = causal
        self.saved = None

    def _saved(self):
        if self.saved is None:  # the forward's out and lse, for the backward
            q, k, v, _ = self.x
            self.saved = self.attn.sdpa(q, k, v, causal=self.causal, return_lse=True)
        return self.saved

    def run(self, backward):
        q, k, v, dout = self.x
        if not backward:
            return self.attn.sdpa(q, k, v, causal=self.causal)
        out, lse = self._saved()
        return self.attn.sdpa_backward(q, k, v, out, lse, dout, causal=self.causal)


def set_blas_threads(n):
    """OpenBLAS's pool ignores torch.set_num_threads: set it too (None when
    no OpenBLAS is loaded)."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "openblas" in line.lower()}
    except OSError:
        return None
    for p in sorted(paths):
        try:
            lib = ctypes.CDLL(p)
            lib.openblas_set_num_threads(ctypes.c_int(n))
            return lib.openblas_get_num_threads()
        except (OSError, AttributeError):
            continue
    return None


class TorchTool:
    def __init__(self, threads):
        import torch
        self.torch = torch
        torch.set_num_threads(threads)
        torch.set_num_interop_threads(1)
        self.blas = set_blas_threads(threads)
        self.x = None

    def hello(self):
        t = self.torch
        return {"tool": "torch", "version": t.__version__, "threads": t.get_num_threads(),
                "openblas_threads": self.blas,
                "capability": t.backends.cpu.get_cpu_capability()
                if hasattr(t.backends, "cpu") else None}

    def attention(self, q, k, v):
        t = self.torch
        s = (q * (1.0 / math.sqrt(q.shape[-1]))) @ k.transpose(-2, -1)
        if self.causal:
            s.masked_fill_(self.mask, float("-inf"))  # in place: one [N, N] per head, not two
        return t.softmax(s, -1) @ v

    def load(self, qkvd, causal):
        t = self.torch
        self.graph = None
        self.x = [t.from_numpy(a) for a in qkvd]
        self.causal = causal
        N = qkvd[0].shape[-2]
        self.mask = ~t.ones(N, N, dtype=t.bool).tril() if causal else None

    def run(self, backward):
        t = self.torch
        q, k, v, dout = self.x
        if not backward:
            with t.no_grad():
                return self.attention(q, k, v).numpy()
        if self.graph is None:
            leaves = [a.detach().clone().requires_grad_(True) for a in (q, k, v)]
            self.graph = (leaves, self.attention(*leaves))
        leaves, out = self.graph
        grads = t.autograd.grad(out, leaves, dout, retain_graph=True)
        return tuple(g.numpy() for g in grads)


def main():
    tool_name, threads = sys.argv[1], int(sys.argv[2])
    tool = None
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
            op = req["op"]
            if tool is None:
                tool = (AttnTool if tool_name == "attn" else TorchTool)(threads)
            if op == "hello":
                reply(dict(ok=True, **tool.hello()))
            elif op == "load":
                shape = (req["B"], req["H"], req["N"], req["D"])
                tool.load([read_f32(os.path.join(req["dir"], n + ".f32"), shape)
                           for n in ("q", "k", "v", "dout")], bool(req["causal"]))
                reply({"ok": True})
            elif op == "time":
                times = []
                for _ in range(req["reps"]):
                    t0 = time.perf_counter()
                    tool.run(req["backward"])
                    times.append(time.perf_counter() - t0)
                reply({"ok": True, "times": times})
            elif op == "dump":
                res = tool.run(req["backward"])
                if req["backward"]:
                    for name, g in zip(("dq", "dk", "dv"), res):
                        write_f32(req["path"] + "." + name, g)
                else:
                    write_f32(req["path"], res)
                reply({"ok": True})
            elif op == "quit":
                return
            else:
                reply({"ok": False, "error": "unknown op '%s'" % op})
        except Exception as e:  # the driver prints it and stops: no table
            reply({"ok": False, "error": "%s: %s" % (type(e).__name__, e)})


if __name__ == "__main__":
    main()
