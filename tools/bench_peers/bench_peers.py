#!/usr/bin/python3
"""attn against ONNX Runtime and PyTorch on the same attention, interleaved in
one run (issue 37). `make bench-peers` installs ONNX Runtime first
(install_ort.sh) and runs this; by hand:

    /usr/bin/python3 tools/bench_peers/bench_peers.py --node-modules DIR [--attn-bin build/attn]
        [--n 1024 4096 8192] [--threads 2] [--rounds 3] [--budget 1.0] [--no-backward]
        [--peers ort,torch] [--batch 1] [--heads 8] [--dim 64] [--seed 0]

The tools, each in its own long-lived process (a worker) with THREADS
threads, on the same f32 q, k, v [B, H, N, D] (standard normal, one seed):
  attn   the library through its Python package (python/), backend auto
  ort    ONNX Runtime (onnxruntime-node, its C++ core) running a one-node
         com.microsoft MultiHeadAttention model (onnx_mha.js), CPU provider
  torch  Debian's torch 1.13 (OpenBLAS): softmax(q kᵀ / sqrt(D)) v
Cases: every N, full and causal, forward; backward (attn and torch: ORT has
none) unless --no-backward.

First every peer's result is checked against attn's on each case (max |diff|
over the output, or dq, dk, dv): a peer set up wrong (causal ignored, another
scale, a transposed layout) stops the run with the diffs, before any timing.
Then R rounds: each round measures the FMA peak (`attn bench peak`, at the
ISA level attn runs on: ATTN_CPU applies to both; the table's is the best
round's, with a warning when the rounds differ by over 10 %: a busy
machine) and times every case on
every tool, the tools' order rotated from round to round; a tool's figure in
a round is the median of its runs there (enough runs to fill --budget
seconds, after one untimed warm-up run), and the table shows the median over
the rounds. GFLOP/s count the useful work, the same for every tool:
4·B·H·D·(allowed query-key pairs) forward, 2.5x that backward (as `attn bench
sdpa`). Exit status 1, and no table, when a peer cannot be started or
disagrees with attn."""
import argparse
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# |peer - attn| <= ATOL + RTOL * max|attn| on every element: f32 attention on
# standard-normal inputs differs between correct implementations by ~1e-6
# (outputs) to ~1e-5 (gradients at N = 8192); a wrong setup differs by ~0.1.
ATOL, RTOL = 1e-4, 1e-3

# --malloc keep (the default), for every worker alike: glibc's malloc keeps
# what is freed (no mmap, no trim) on transparent huge pages. torch allocates
# fresh [N, N] tensors on every call; where page faults are dear (VMs) they
# were most of its time (x + 1 on 32 MiB: 150 ms of faults for 2 ms of adds
# on the project's VM), which no user of a caching allocator pays.
MALLOC_KEEP = ("glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736:"
               "glibc.malloc.hugetlb=1")


def fail(msg):
    sys.stderr.write("bench-peers: %s\n" % msg)
    sys.exit(1)


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


class Worker:
    """One tool's process; request() sends one JSON line and reads the
    answer line ("@@ {...}"), passing anything else it prints to stderr."""

    def __init__(self, name, argv, env=None):
        self.name = name
        try:
            self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      text=True, env=env, bufsize=1)
        except OSError as e:
            fail("%s: cannot start %s: %s" % (name, argv[0], e))

    def request(self, **req):
        try:
            self.p.stdin.write(json.dumps(req) + "\n")
            self.p.stdin.flush()
        except BrokenPipeError:
            fail("%s: the worker has exited (status %s)" % (self.name, self.p.poll()))
        for line in self.p.stdout:
            if line.startswith("@@ "):
                ans = json.loads(line[3:])
                if not ans.get("ok"):
                    fail("%s: %s: %s" % (self.name, req["op"], ans.get("error")))
                return ans
            sys.stderr.write("[%s] %s" % (self.name, line))
        fail("%s: the worker exited (status %s) during '%s'"
             % (self.name, self.p.wait(), req["op"]))

    def close(self):
        if self.p.poll() is None:
            try:
                self.p.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self.p.stdin.close()
            except BrokenPipeError:
                pass
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()


def start_workers(args):
    py = sys.executable
    worker = os.path.join(HERE, "py_worker.py")
    env = dict(os.environ)
    if args.malloc == "keep" and "GLIBC_TUNABLES" not in env:
        env["GLIBC_TUNABLES"] = MALLOC_KEEP
    lib = os.path.join(os.path.dirname(os.path.abspath(args.attn_bin)), "libattn.so")
    if "ATTN_LIB" not in env and os.path.exists(lib):
        env["ATTN_LIB"] = lib  # the library next to the attn tool that measures the peak
    w = {"attn": Worker("attn", [py, worker, "attn", str(args.threads)], env)}
    info = {"attn": w["attn"].request(op="hello")}
    if "torch" in args.peers:
        # torch on attn's instruction set, whatever the environment says (ATTN_CPU=avx2
        # on an AVX-512 CPU: torch's ATen kernels and OpenBLAS at AVX2 too; avx512:
        # OpenBLAS's SkylakeX kernels even where OPENBLAS_CORETYPE=Haswell is set), as
        # `attn bench train` does, and
        # OpenBLAS's idle workers asleep at once instead of spinning 2^28 cycles:
        # with THREADS CPUs, a spinning BLAS thread would take one from torch's
        # OpenMP softmax between the two matmuls
        isa = info["attn"]["isa"]
        blas, aten = {"avx512": ("SkylakeX", "avx512"), "avx2": ("Haswell", "avx2"),
                      "neon": ("ARMV8", "default")}.get(isa, ("Prescott", "default"))
        tenv = dict(env)
        tenv.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
        tenv.update(OPENBLAS_CORETYPE=blas, ATEN_CPU_CAPABILITY=aten)
        w["torch"] = Worker("torch", [py, worker, "torch", str(args.threads)], tenv)
        info["torch"] = w["torch"].request(op="hello")
        info["torch"]["env"] = "OPENBLAS_CORETYPE=%s ATEN_CPU_CAPABILITY=%s" % (
            tenv["OPENBLAS_CORETYPE"], tenv["ATEN_CPU_CAPABILITY"])
    if "ort" in args.peers:
        node = shutil.which("node")
        if node is None:
            fail("ort: node (Node.js) is not installed; Debian: apt-get install nodejs")
        if not os.path.isdir(os.path.join(args.node_modules, "onnxruntime-node")):
            fail("ort: no onnxruntime-node in %s (make bench-peers installs it)"
                 % args.node_modules)
        w["ort"] = Worker("ort", [node, os.path.join(HERE, "ort_worker.js"), args.node_modules,
                                  str(args.threads)], env)
        info["ort"] = w["ort"].request(op="hello")
    return w, info


def cpu_has_avx512():
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and " avx512f" in line for line in f)
    except OSError:
        return False


def measure_peak(attn_bin, threads):
    """`attn bench peak`'s THREADS-thread figure for the active level (its
    line "fp32 FMA peak (LEVEL, ...)", after the CPU's), GFLOP/s, and that
    level's name."""
    try:
        out = subprocess.run([attn_bin, "bench", "peak", "--threads", str(threads)], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        fail("attn bench peak failed: %s" % e)
    first = next((l for l in out.splitlines() if l.startswith("fp32 FMA peak")), "")
    lv = re.search(r"peak \(([^,]+),", first)
    m = re.search(r"%s ([0-9.]+) GFLOP/s" % ("1 thread" if threads == 1 else
                                             "%d threads" % threads), first)
    if not lv or not m:
        fail("cannot read the peak from `attn bench peak`: %s" % first)
    return float(m.group(1)), lv.group(1)


def pairs(n, causal):
    return n * (n + 1) // 2 if causal else n * n


def case_flops(c, args):
    f = 4.0 * args.batch * args.heads * args.dim * pairs(c["n"], c["causal"])
    return 2.5 * f if c["backward"] else f


def case_name(c):
    return "N=%d%s%s" % (c["n"], " causal" if c["causal"] else "",
                         " backward" if c["backward"] else "")


def write_inputs(d, n, args):
    rng = np.random.default_rng(args.seed + n)
    shape = (args.batch, args.heads, n, args.dim)
    for name in ("q", "k", "v", "dout"):
        rng.standard_normal(shape, dtype=np.float32).astype("<f4").tofile(
            os.path.join(d, name + ".f32"))


def load(workers, tools, d, c, args):
    for t in tools:
        workers[t].request(op="load", dir=d, B=args.batch, H=args.heads, N=c["n"], D=args.dim,
                           causal=int(c["causal"]))


def read(path, n, args):
    return np.fromfile(path, dtype="<f4").reshape(args.batch, args.heads, n, args.dim)


def check(workers, cases, tools_of, datadirs, args, tmp):
    """Each peer's output (or dq, dk, dv) against attn's, on every case; returns
    {(case, tool): max |diff|} or stops with the figures."""
    diffs, bad = {}, []
    for c in cases:
        tools = tools_of(c)
        load(workers, tools, datadirs[c["n"]], c, args)
        outs = {}
        for t in tools:
            path = os.path.join(tmp, "%s.out" % t)
            workers[t].request(op="dump", path=path, backward=c["backward"])
            names = ("dq", "dk", "dv") if c["backward"] else ("",)
            outs[t] = [read(path + ("." + s if s else ""), c["n"], args) for s in names]
        ref = outs["attn"]
        for t in tools:
            if t == "attn":
                continue
            worst = 0.0
            for r, o in zip(ref, outs[t]):
                lim = ATOL + RTOL * float(np.abs(r).max())
                dmax = float(np.abs(o.astype(np.float64) - r).max()) if np.isfinite(o).all() \
                    else math.inf
                worst = max(worst, dmax)
                if not dmax <= lim:
                    bad.append("%s, %s: max |%s - attn| = %.3g > %.3g" %
                               (case_name(c), t, t, dmax, lim))
            diffs[(case_name(c), t)] = worst
        print("  checked %-24s %s" % (case_name(c), "  ".join(
            "%s %.1e" % (t, diffs[(case_name(c), t)]) for t in tools if t != "attn")),
              flush=True)
    if bad:
        fail("a peer disagrees with attn on the same inputs (no table: its times would "
             "not be of the same attention):\n  " + "\n  ".join(bad))
    return diffs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--attn-bin", default=os.path.join(ROOT, "build", "attn"))
    ap.add_argument("--node-modules", default=None,
                    help="the folder holding onnxruntime-node (install_ort.sh prints it)")
    ap.add_argument("--n", type=int, nargs="+", default=[1024, 4096, 8192])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--budget", type=float, default=1.0,
                    help="seconds of timed runs per tool, case and round (at least 1 run)")
    ap.add_argument("--no-backward", action="store_true")
    ap.add_argument("--peers", default="ort,torch")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--malloc", choices=("keep", "default"), default="keep",
                    help="keep: every worker's malloc keeps freed memory, on huge pages "
                    "(GLIBC_TUNABLES, unless set); default: glibc's defaults")
    args = ap.parse_args()
    args.peers = [p for p in args.peers.split(",") if p]
    for p in args.peers:
        if p not in ("ort", "torch"):
            fail("--peers: unknown peer '%s' (ort, torch)" % p)
    if "ort" in args.peers and not args.node_modules:
        fail("--node-modules is needed for the ort peer (make bench-peers installs it)")
    if not os.access(args.attn_bin, os.X_OK):
        fail("%s: no attn tool (run make first)" % args.attn_bin)
    if args.rounds < 1 or args.threads < 1:
        fail("--rounds and --threads must be >= 1")

    cases = [dict(n=n, causal=c, backward=False) for n in args.n for c in (False, True)]
    if not args.no_backward and "torch" in args.peers:
        cases += [dict(n=n, causal=c, backward=True) for n in args.n for c in (False, True)]

    def tools_of(c):
        return ["attn"] + [p for p in args.peers if not (c["backward"] and p == "ort")]

    workers, info = start_workers(args)
    tmp = tempfile.mkdtemp(prefix="attn-bench-peers.")
    try:
        print("bench-peers: %s, %d thread%s each, B=%d H=%d D=%d, f32" %
              (cpu_name(), args.threads, "s" if args.threads > 1 else "", args.batch,
               args.heads, args.dim))
        a = info["attn"]
        print("  attn %s, level %s (%s)" % (a["version"], a["isa"], a["library"]))
        if "ort" in info:
            print("  onnxruntime %s (onnxruntime-node: com.microsoft MultiHeadAttention, CPU "
                  "provider)" % info["ort"]["version"])
            if a["isa"] != "avx512" and cpu_has_avx512():
                print("  note: ONNX Runtime has no instruction-set cap: it picks AVX-512 "
                      "kernels here while attn runs %s (what an AVX2-only CPU gives is not this "
                      "ratio)" % a["isa"])
        if "torch" in info:
            t = info["torch"]
            print("  torch %s, softmax(q k^T / sqrt(D)) v, OpenBLAS threads %s, %s"
                  % (t["version"], t["openblas_threads"], t["env"]))
        datadirs = {}
        for n in args.n:
            datadirs[n] = os.path.join(tmp, "n%d" % n)
            os.mkdir(datadirs[n])
            write_inputs(datadirs[n], n, args)
        print("checking every peer against attn on the same inputs "
              "(max |diff| over the output, or dq dk dv):", flush=True)
        diffs = check(workers, cases, tools_of, datadirs, args, tmp)

        times = {}  # (case, tool) -> [round medians]
        reps = {}
        peaks, level = [], None
        for r in range(args.rounds):
            peak, level = measure_peak(args.attn_bin, args.threads)
            peaks.append(peak)
            print("round %d/%d: peak %.1f GFLOP/s" % (r + 1, args.rounds, peak), flush=True)
            for c in cases:
                tools = tools_of(c)
                load(workers, tools, datadirs[c["n"]], c, args)
                k = r % len(tools)
                for t in tools[k:] + tools[:k]:
                    key = (case_name(c), t)
                    if key not in reps:  # one untimed run sets the number of runs
                        w = workers[t].request(op="time", reps=1, backward=c["backward"])
                        first = w["times"][0]
                    else:
                        workers[t].request(op="time", reps=1, backward=c["backward"])
                        first = statistics.median(times[key])
                    reps[key] = max(1, min(15, int(args.budget / max(first, 1e-9))))
                    ts = workers[t].request(op="time", reps=reps[key],
                                            backward=c["backward"])["times"]
                    times.setdefault(key, []).append(statistics.median(ts))
                    time.sleep(0.05)  # let the last tool's idle threads go to sleep
        peak = max(peaks)  # other load can only lower a measured peak
        print_table(cases, tools_of, times, diffs, peak, peaks, level, args)
    finally:
        for wk in workers.values():
            wk.close()
        shutil.rmtree(tmp, ignore_errors=True)


def print_table(cases, tools_of, times, diffs, peak, peaks, level, args):
    peers = [p for p in ("ort", "torch") if p in args.peers]
    label = {"ort": "ONNX Runtime", "torch": "PyTorch"}
    print()
    print("CPU: %s; %d thread%s each; fp32 FMA peak (%s, `attn bench peak`) measured in this "
          "run: %.1f GFLOP/s (best of %d: %s)" %
          (cpu_name(), args.threads, "s" if args.threads > 1 else "", level, peak, len(peaks),
           ", ".join("%.1f" % p for p in peaks)))
    if min(peaks) < 0.9 * peak:
        print("WARNING: the peak moved by %.0f %% between rounds: other processes were running; "
              "the times and ratios below are not those of a quiet machine"
              % (100 * (1 - min(peaks) / peak)))
    print("ms: median over %d interleaved rounds of each round's median; %%pk: useful GFLOP/s "
          "as %% of that peak; attn vs X: X's time / attn's (> 1: attn faster); diff: max "
          "|peer - attn|" % args.rounds)
    head = "| case | attn ms | %pk |"
    rule = "|---|---|---|"
    for p in peers:
        head += " %s ms | %%pk | attn vs %s | diff |" % (label[p], label[p])
        rule += "---|---|---|---|"
    print(head)
    print(rule)
    top = 0.0  # the highest % of peak: above 100, the peak was measured under load
    for c in cases:
        name = case_name(c)
        fl = case_flops(c, args)
        ta = statistics.median(times[(name, "attn")])
        top = max(top, 100 * fl / ta / 1e9 / peak)
        row = "| %s | %.1f | %.0f |" % (name, 1e3 * ta, 100 * fl / ta / 1e9 / peak)
        for p in peers:
            if p not in tools_of(c):
                row += " - | - | - | - |"
                continue
            tp = statistics.median(times[(name, p)])
            top = max(top, 100 * fl / tp / 1e9 / peak)
            row += " %.1f | %.0f | %.2fx | %.0e |" % (1e3 * tp, 100 * fl / tp / 1e9 / peak,
                                                     tp / ta, diffs[(name, p)])
        print(row)
    if top > 100:
        print("WARNING: %.0f %% of the peak: the peak was measured while other processes ran "
              "(more --rounds give it more chances); these figures are not a quiet machine's"
              % top)


if __name__ == "__main__":
    main()
