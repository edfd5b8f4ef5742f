#!/usr/bin/python3
"""Time of one TransformerEncoderLayer training step (forward, backward, SGD
step) four ways, same weights, same input, in one run:

  A  torch.nn.TransformerEncoderLayer: nn.MultiheadAttention, whose CPU
     training path in torch 1.13 is the math formula (bmm, softmax, bmm)
  B  attn.torch.SDPAEncoderLayer (torch's Linear/LayerNorm) with the math
     formula as its attention
  C  the same layer with attn's fused op (attn.torch.scaled_dot_product_attention)
  D  attn.torch.TransformerEncoderLayer: the whole layer, forward and
     backward, in libattn (one autograd.Function)

B isolates the attention (B and C differ only there); D is what a user gets
from attn.torch.from_torch(layer). For each N and mask, prints the CPU, the
thread counts, the median step time of each, the ratios A/D, C/D, A/C, B/C,
and checks that the four give the same loss.

Dropout: --dropout P (default 0.1, TransformerEncoderLayer's default) builds
all four with it, in training mode: torch's nn.Dropout and (A) its
MultiheadAttention's, B: F.dropout on the math formula's probabilities, C:
attn's op (dropout inside its flash kernels), D: attn's layer (the same). The
four draw from different RNGs, so their losses differ by design: the loss
check runs one step of the same four layers built with dropout 0 first.
Run it on a quiet machine (the issue-18 target: A / C and A / D >= 2 at N 1024):

  /usr/bin/python3 tools/bench_torch_op.py --n 1024 --causal no --steps 12 --dropout 0.1
  /usr/bin/python3 tools/bench_torch_op.py            # d 512, 8 heads, N 1024 and 2048, causal no and yes
  /usr/bin/python3 tools/bench_torch_op.py --n 1024 --causal --batch 4 --dtype bf16
  /usr/bin/python3 tools/bench_torch_op.py --n 64 --d-model 64 --heads 4 --steps 2   # smoke test

The package is found in python/ next to this script (ATTN_LIB overrides the library).

Threads: --threads sets torch's intra-op threads, attn's threads and, when
torch's BLAS is OpenBLAS (Debian's torch: its Linear and bmm), OpenBLAS's
own pool too, which torch.set_num_threads leaves at every CPU: without that,
"--threads 1" timed torch's matrix products on all CPUs against attn on one.
--clock cpu times the process's CPU time instead of the wall clock: on a
busy machine, with --threads 1, it still compares the work each side does
(every CPU the process runs on counts, so use it with one thread only).
--wait passive makes idle threads sleep at once: torch's OpenMP pool (which
attn shares: one libgomp) and OpenBLAS's pthread pool otherwise spin after
each call, and on a machine with as many CPUs as threads a spinning worker
of one pool takes a CPU from the working threads of the other."""
import ctypes
import argparse
import copy
import math
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "python"))
torch = attn = at = None  # imported by main() after --wait has set the environment

# --wait passive: the OpenMP pool (torch's and attn's: one libgomp) and
# OpenBLAS's pthread pool sleep as soon as their work is done instead of
# spinning for more (libgomp: 300000 spins; OpenBLAS: 2^28 cycles of
# sched_yield). Both read these when they are loaded, so before torch is.
WAIT_ENV = {"passive": {"OMP_WAIT_POLICY": "PASSIVE", "OPENBLAS_THREAD_TIMEOUT": "4"},
            "active": {"OMP_WAIT_POLICY": "ACTIVE"}}


def import_torch(wait):
    global torch, attn, at
    os.environ.update(WAIT_ENV.get(wait, {}))
    import torch
    import attn
    import attn.torch as at


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
    p = torch.softmax(s, -1)
    if dropout_p:
        p = torch.nn.functional.dropout(p, dropout_p)
    return p @ v


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def set_blas_threads(n):
    """OpenBLAS's thread count, when torch's BLAS is OpenBLAS (its pool is
    not torch's and ignores torch.set_num_threads); returns the count now in
    force, or None when no OpenBLAS is loaded."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "openblas" in line.lower()}
    except OSError:
        return None
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
            lib.openblas_set_num_threads(ctypes.c_int(n))
            return lib.openblas_get_num_threads()
        except (OSError, AttributeError):
            continue
    return None


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def time_steps(layer, x, w, kw, steps, warmup, dtype, clock=time.perf_counter):
    opt = torch.optim.SGD(layer.parameters(), lr=1e-3)
    times, loss = [], None
    for i in range(warmup + steps):
        t0 = clock()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bf16"):
            y = layer(x, **kw)
        loss = (y.float() * w).mean()
        loss.backward()
        opt.step()
        if i >= warmup:
            times.append(clock() - t0)
    return statistics.median(times), loss.item()


def layers(a, dropout):
    torch.manual_seed(0)
    A = torch.nn.TransformerEncoderLayer(a.d_model, a.heads, a.ff, dropout=dropout,
                                         batch_first=True)
    B = at.SDPAEncoderLayer(a.d_model, a.heads, a.ff, dropout=dropout, attention=math_attention)
    C = at.SDPAEncoderLayer(a.d_model, a.heads, a.ff, dropout=dropout)
    B.load_state_dict(A.state_dict())
    C.load_state_dict(A.state_dict())
    D = at.from_torch(A, precision=a.dtype)
    return A, B, C, D


def run_one(a, n, causal, net, net0):
    A, B, C, D = (copy.deepcopy(m) for m in net)  # every config starts from the same weights
    x = torch.randn(a.batch, n, a.d_model, generator=torch.Generator().manual_seed(n))
    w = torch.randn(a.batch, n, a.d_model, generator=torch.Generator().manual_seed(n + 1))
    # torch 1.13's layer has no is_causal: the same mask as a bool mask (True = not allowed)
    kw_a = {"src_mask": torch.ones(n, n, dtype=torch.bool).triu(1)} if causal else {}
    kw = {"is_causal": True} if causal else {}
    steps = a.steps if n <= 1024 else max(1, a.steps // 2)
    print("TransformerEncoderLayer(%d, %d, dim_feedforward=%d) training step: batch %d, N %d, %s%s; "
          "median of %d steps after %d warm-up (%s time); dropout %g"
          % (a.d_model, a.heads, a.ff, a.batch, n, a.dtype, ", causal" if causal else "",
             steps, a.warmup, a.clock, a.dropout))
    t, loss = {}, {}
    for name, layer, k in (("A", A, kw_a), ("B", B, kw), ("C", C, kw), ("D", D, kw)):
        t[name], loss[name] = time_steps(layer, x, w, k, steps, a.warmup,
                                         "f32" if name == "D" else a.dtype, CLOCKS[a.clock])
    for k, what in (("A", "torch nn.TransformerEncoderLayer (math attention)"),
                    ("B", "SDPAEncoderLayer, math formula as its attention"),
                    ("C", "SDPAEncoderLayer, attn's op"),
                    ("D", "attn's whole layer (attn.torch.TransformerEncoderLayer)")):
        print("  %s %-56s %9.2f ms" % (k, what, t[k] * 1e3))
    print("speedup of attn's layer: %.2fx over torch's layer (A/D), %.2fx over torch's layer "
          "with attn's op (C/D)" % (t["A"] / t["D"], t["C"] / t["D"]))
    print("speedup of attn's op: %.2fx over torch's layer (A/C), %.2fx with the rest equal (B/C)"
          % (t["A"] / t["C"], t["B"] / t["C"]))
    what = "last-step losses"
    if a.dropout:  # different RNGs: compare one step of the layers without dropout
        print("  (last-step losses with dropout %s: they differ by design, different RNGs)"
              % " ".join("%.6g" % loss[k] for k in "ABCD"))
        what = "first-step losses with dropout 0"
        for (name, k), m in zip((("A", kw_a), ("B", kw), ("C", kw), ("D", kw)), net0):
            _, loss[name] = time_steps(copy.deepcopy(m), x, w, k, 1, 0,
                                       "f32" if name == "D" else a.dtype)
    worst = max(abs(loss[k] - loss["A"]) for k in "BCD") / max(abs(loss["A"]), 1e-30)
    print("check: %s %s (max relative difference %.1e)"
          % (what, " ".join("%.6g" % loss[k] for k in "ABCD"), worst))
    tol = 1e-4 if a.dtype == "f32" else 5e-2
    if not worst <= tol:
        print("error: the layers disagree by more than %g; the timing is not comparable" % tol)
        return 1, t
    return 0, t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, nargs="+", default=[1024, 2048],
                    help="sequence lengths (default 1024 2048)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--d-model", type=int, default=512)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--ff", type=int, default=2048, help="feed-forward width (torch's default)")
    ap.add_argument("--steps", type=int, default=10,
                    help="timed steps (median reported; half of them for N > 1024)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--causal", nargs="?", const="yes", default="both", choices=("no", "yes", "both"),
                    help="causal mask: no, yes (also plain --causal) or both (default)")
    ap.add_argument("--dtype", choices=("f32", "bf16"), default="f32",
                    help="bf16: A-C under torch.autocast (the op gets bf16 q, k, v); D with "
                         "precision='bf16' (bf16 matrix products)")
    ap.add_argument("--dropout", type=float, default=0.1,
                    help="dropout of all four layers, attention probabilities included (default "
                         "0.1, torch's TransformerEncoderLayer default; 0: none)")
    ap.add_argument("--threads", type=int, default=0,
                    help="threads of torch and of attn alike (default: every logical CPU)")
    ap.add_argument("--clock", choices=tuple(CLOCKS), default="wall",
                    help="wall (default) or cpu: the process's CPU time (busy machine, 1 thread)")
    ap.add_argument("--wait", choices=("env",) + tuple(WAIT_ENV), default="env",
                    help="how idle threads wait: env (default: as the environment says), passive "
                         "(OMP_WAIT_POLICY=PASSIVE, OPENBLAS_THREAD_TIMEOUT=4: sleep at once; "
                         "with OpenBLAS's pool next to the OpenMP one, spinning workers of one "
                         "take CPUs from the other's) or active (OMP_WAIT_POLICY=ACTIVE)")
    a = ap.parse_args()
    import_torch(a.wait)
    threads = a.threads or os.cpu_count()
    torch.set_num_threads(threads)
    attn.set_num_threads(threads)
    torch.ones(2, 2) @ torch.ones(2, 2)  # loads torch's BLAS
    blas = set_blas_threads(threads)
    print("cpu: %s (%d logical CPUs); torch %s with %d threads%s; attn %s at level %s with %d "
          "threads; OMP_WAIT_POLICY=%s OPENBLAS_THREAD_TIMEOUT=%s"
          % (cpu_name(), os.cpu_count(), torch.__version__, torch.get_num_threads(),
             "" if blas is None else " (OpenBLAS %d)" % blas, attn.library_path,
             attn.isa(), attn.num_threads(), os.environ.get("OMP_WAIT_POLICY", "(unset)"),
             os.environ.get("OPENBLAS_THREAD_TIMEOUT", "(unset)")))
    if a.clock == "cpu" and threads > 1:
        print("note: --clock cpu adds up the CPU time of every thread; compare with --threads 1")
    if not 0.0 <= a.dropout < 1.0:
        ap.error("--dropout %g: must be in [0, 1)" % a.dropout)
    net = layers(a, a.dropout)
    net0 = layers(a, 0.0) if a.dropout else net
    rc, rows = 0, []
    for n in a.n:
        for causal in {"no": (False,), "yes": (True,), "both": (False, True)}[a.causal]:
            bad, t = run_one(a, n, causal, net, net0)
            rc |= bad
            rows.append((n, causal, t))
    print("\nsummary (ms per step, %s time; %s, batch %d, %d threads, wait %s, dropout %g)"
          % (a.clock, a.dtype, a.batch, threads, a.wait, a.dropout))
    print("| N | A torch's layer | C with attn's op | D attn's layer | A / D | C / D |")
    print("|---|---|---|---|---|---|")
    for n, causal, t in rows:
        print("| %d%s | %.0f | %.0f | %.0f | %.2fx | %.2fx |" % (
            n, ", causal" if causal else "", t["A"] * 1e3, t["C"] * 1e3, t["D"] * 1e3,
            t["A"] / t["D"], t["C"] / t["D"]))
    return rc


if __name__ == "__main__":
    sys.exit(main())
