#!/usr/bin/python3
"""Where the time of one TransformerEncoderLayer training step goes, per op:
A (torch's layer) and C (SDPAEncoderLayer with attn's op), the layers of
tools/bench_torch_op.py, on one thread. Each aten op is timed by the CPU
time of the calling thread around its dispatch (a TorchDispatchMode under
autograd, so the backward's ops count too); attn's forward and backward
library calls are timed the same way. Thread CPU time is what a busy
machine disturbs least; with one thread (torch, attn and OpenBLAS) all the
work runs on the calling thread. Prints, per layer, the fastest of --steps
steps and its ops, largest first:

  /usr/bin/python3 tools/profile_torch_op.py --n 1024 [--causal] [--steps 4] [--dropout 0.1]"""
import argparse
import collections
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_torch_op as bench  # noqa: E402


def attn_calls(acc, cnt):
    """Times attn's library calls (attn._desc.forward/backward) into acc."""
    from attn import _desc
    for name in ("forward", "backward"):
        real = getattr(_desc, name)

        def timed(*a, _real=real, _key="attn sdpa " + name):
            t0 = time.thread_time()
            try:
                return _real(*a)
            finally:
                acc[_key] += time.thread_time() - t0
                cnt[_key] += 1
        setattr(_desc, name, timed)


def profile(layer, x, w, kw, steps, acc, cnt):
    from torch.utils._python_dispatch import TorchDispatchMode
    torch = bench.torch

    class PerOp(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            t0 = time.thread_time()
            out = func(*args, **(kwargs or {}))
            key = func.overloadpacket.__name__
            acc[key] += time.thread_time() - t0
            cnt[key] += 1
            return out

    opt = torch.optim.SGD(layer.parameters(), lr=1e-3)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = (layer(x, **kw) * w).mean()
        loss.backward()
        opt.step()
    step()  # warm-up
    best = None
    for _ in range(steps):
        acc.clear()
        cnt.clear()
        t0 = time.thread_time()
        with PerOp():
            step()
        total = time.thread_time() - t0
        if best is None or total < best[0]:
            best = (total, dict(acc), dict(cnt))
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--d-model", type=int, default=512)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--ff", type=int, default=2048)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--dropout", type=float, default=0.1,
                    help="dropout of the layers, attention included (default 0.1, as "
                         "bench_torch_op.py and torch's layer)")
    ap.add_argument("--steps", type=int, default=4, help="profiled steps (the fastest is shown)")
    a = ap.parse_args()
    bench.import_torch("env")
    torch, attn = bench.torch, bench.attn
    torch.set_num_threads(1)
    attn.set_num_threads(1)
    torch.ones(2, 2) @ torch.ones(2, 2)  # loads torch's BLAS
    bench.set_blas_threads(1)
    a.dtype = "f32"
    A, _, C, _ = bench.layers(a, a.dropout)
    n = a.n
    x = torch.randn(a.batch, n, a.d_model, generator=torch.Generator().manual_seed(n))
    w = torch.randn(a.batch, n, a.d_model, generator=torch.Generator().manual_seed(n + 1))
    kw_a = {"src_mask": torch.ones(n, n, dtype=torch.bool).triu(1)} if a.causal else {}
    kw_c = {"is_causal": True} if a.causal else {}
    acc, cnt = collections.defaultdict(float), collections.Counter()
    attn_calls(acc, cnt)
    for name, layer, kw in (("A torch's layer", A, kw_a), ("C with attn's op", C, kw_c)):
        total, ops, calls = profile(layer, x, w, kw, a.steps, acc, cnt)
        print("%s: TransformerEncoderLayer(%d, %d) step, batch %d, N %d%s, 1 thread: %.1f ms "
              "thread CPU (fastest of %d)" % (name, a.d_model, a.heads, a.batch, n,
                                              ", causal" if a.causal else "", total * 1e3,
                                              a.steps))
        shown = [k for k in sorted(ops, key=lambda k: -ops[k]) if ops[k] >= 0.5e-3]
        for key in shown:
            print("  %-34s %8.1f ms  x%d" % (key, ops[key] * 1e3, calls[key]))
        print("  %-34s %8.1f ms" % ("(Python, autograd, ops < 0.5 ms)",
                                     (total - sum(ops[k] for k in shown)) * 1e3))
    return 0


if __name__ == "__main__":
    sys.exit(main())
