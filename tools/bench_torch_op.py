#!/usr/bin/python3
"""Time of one TransformerEncoderLayer training step (forward, backward, SGD
step) with PyTorch's attention versus with attn's fused op
(attn.torch.scaled_dot_product_attention), same weights, same input:

  A  torch.nn.TransformerEncoderLayer: nn.MultiheadAttention, whose CPU
     training path in torch 1.13 is the math formula (bmm, softmax, bmm)
  B  attn.torch.TransformerEncoderLayer with the math formula as its attention
  C  attn.torch.TransformerEncoderLayer with attn's op (the default)

B isolates the attention: B and C differ only there. Prints the CPU, the
thread counts, the median step time of each and the ratios A/C and B/C,
and checks that the three give the same loss. Run it on a quiet machine:

  /usr/bin/python3 tools/bench_torch_op.py                 # d 512, 8 heads, N 1024, batch 1
  /usr/bin/python3 tools/bench_torch_op.py --causal --batch 4 --dtype bf16
  /usr/bin/python3 tools/bench_torch_op.py --n 64 --d-model 64 --heads 4 --steps 2   # smoke test

The package is found in python/ next to this script (ATTN_LIB overrides the library)."""
import argparse
import math
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "python"))
import torch  # noqa: E402

import attn  # noqa: E402
import attn.torch as at  # noqa: E402


def math_attention(q, k, v, attn_mask=None, is_causal=False, scale=None, dropout_p=0.0):
    """PyTorch 2's documented formula in plain torch ops (what torch 1.13's
    nn.MultiheadAttention computes on the CPU)."""
    s = q @ k.transpose(-2, -1) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if is_causal:
        L, S = q.shape[-2], k.shape[-2]
        s = s.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool \
            else s + attn_mask
    return torch.softmax(s, -1) @ v


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def time_steps(layer, x, w, kw, steps, warmup, dtype):
    opt = torch.optim.SGD(layer.parameters(), lr=1e-3)
    times, loss = [], None
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bf16"):
            y = layer(x, **kw)
        loss = (y.float() * w).mean()
        loss.backward()
        opt.step()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return statistics.median(times), loss.item()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1024, help="sequence length (default 1024)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--d-model", type=int, default=512)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--ff", type=int, default=2048, help="feed-forward width (torch's default)")
    ap.add_argument("--steps", type=int, default=10, help="timed steps (median reported)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--dtype", choices=("f32", "bf16"), default="f32",
                    help="bf16: the layers under torch.autocast (the op gets bf16 q, k, v)")
    ap.add_argument("--threads", type=int, default=0,
                    help="threads of torch and of attn alike (default: every logical CPU)")
    a = ap.parse_args()
    threads = a.threads or os.cpu_count()
    torch.set_num_threads(threads)
    attn.set_num_threads(threads)

    torch.manual_seed(0)
    A = torch.nn.TransformerEncoderLayer(a.d_model, a.heads, a.ff, dropout=0.0, batch_first=True)
    B = at.TransformerEncoderLayer(a.d_model, a.heads, a.ff, attention=math_attention)
    C = at.TransformerEncoderLayer(a.d_model, a.heads, a.ff)
    B.load_state_dict(A.state_dict())
    C.load_state_dict(A.state_dict())
    x = torch.randn(a.batch, a.n, a.d_model)
    w = torch.randn(a.batch, a.n, a.d_model)
    # torch 1.13's layer has no is_causal: the same mask as a bool mask (True = not allowed)
    kw_a = {"src_mask": torch.ones(a.n, a.n, dtype=torch.bool).triu(1)} if a.causal else {}
    kw_bc = {"is_causal": True} if a.causal else {}

    print("cpu: %s (%d logical CPUs); torch %s with %d threads; attn %s at level %s with %d threads"
          % (cpu_name(), os.cpu_count(), torch.__version__, torch.get_num_threads(),
             attn.library_path, attn.isa(), attn.num_threads()))
    print("TransformerEncoderLayer(%d, %d, dim_feedforward=%d) training step: batch %d, N %d, %s%s; "
          "median of %d steps after %d warm-up"
          % (a.d_model, a.heads, a.ff, a.batch, a.n, a.dtype, ", causal" if a.causal else "",
             a.steps, a.warmup))
    ta, la = time_steps(A, x, w, kw_a, a.steps, a.warmup, a.dtype)
    tb, lb = time_steps(B, x, w, kw_bc, a.steps, a.warmup, a.dtype)
    tc, lc = time_steps(C, x, w, kw_bc, a.steps, a.warmup, a.dtype)
    print("  A torch nn.TransformerEncoderLayer (math attention) %9.2f ms" % (ta * 1e3))
    print("  B same layer, math formula as its attention        %9.2f ms" % (tb * 1e3))
    print("  C same layer, attn's op                             %9.2f ms" % (tc * 1e3))
    print("speedup of attn's op: %.2fx over torch's layer (A/C), %.2fx with the rest equal (B/C)"
          % (ta / tc, tb / tc))
    worst = max(abs(lb - la), abs(lc - la)) / max(abs(la), 1e-30)
    print("check: last-step losses %.6g %.6g %.6g (max relative difference %.1e)" % (la, lb, lc, worst))
    tol = 1e-4 if a.dtype == "f32" else 5e-2
    if not worst <= tol:
        print("error: the layers disagree by more than %g; the timing is not comparable" % tol)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
