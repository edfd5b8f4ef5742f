#!/usr/bin/env python3
"""Static cycle account of the f32 flash forward tile (issue 37): llvm-mca's
prediction per phase of one row group (MR = 6 query rows x one key block of
BC = 64 keys, D = Dv = 64, every key allowed: the fused tile), for the AVX2
tile on Zen 3 / Zen 4 and the AVX-512 tile on Zen 4.

    python3 tools/mca/mca_flash.py [--mca PATH] [--cc gcc] [--keep DIR]

Where the code comes from:
  - the GEMM k-loops (q·kᵀ and p·v): the kernel object's own loops, taken
    from `gcc -S` of src/kernels/arch/<isa>/sdpa_flash_<isa>.c (function
    tile_forward_<isa>), found by their shape: the innermost loop with 12
    (AVX2) or 24 (AVX-512) FMAs and 6 broadcasts; p·v's broadcasts read the
    score tile at constant offsets (k·BC·4), q·kᵀ's through q's row stride;
  - the softmax phases: tools/mca/flash_<isa>_mca.c, which includes the
    kernel source and marks the same inlined code with LLVM-MCA-BEGIN/END.
Per region: instructions, FMAs, loads (broadcasts included), stores, the
pressure on the FP pipes and llvm-mca's cycles per iteration (the region run
back to back: a throughput figure; latency chains between phases, cache
misses and the front end past the model are not in it). Then the group's
total against its FMA work: the ceiling the core model leaves, in % of the
FMA peak.

llvm-mca 16 or later is needed for -mcpu=znver4 (Debian: apt-get install
llvm-19); LLVM 14's znver3 model gives a ymm FMA a throughput of 1 per
cycle (two cycles on one of the two FMA pipes), half the hardware's, which
halves every FMA loop: with it this script stops instead of printing that.
These are predictions of a model, not measurements on a Zen 3."""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CFLAGS = ["-std=c11", "-D_GNU_SOURCE", "-fopenmp", "-fPIC", "-Iinclude", "-Isrc", "-O2"]
BC, MR, D = 64, 6, 64

FMA_RE = re.compile(r"\bv(fn?m(add|sub)\d{3}ps)\b")


def find_mca(explicit):
    cands = [explicit] if explicit else []
    cands += ["/usr/lib/llvm-%d/bin/llvm-mca" % v for v in range(30, 15, -1)]
    cands += ["llvm-mca"]
    for c in cands:
        p = shutil.which(c) if not os.path.isabs(c) else (c if os.access(c, os.X_OK) else None)
        if not p:
            continue
        out = subprocess.run([p, "--version"], capture_output=True, text=True).stdout
        m = re.search(r"LLVM version (\d+)", out)
        if m and int(m.group(1)) >= 16:
            return p, int(m.group(1))
    sys.exit("mca_flash: no llvm-mca 16 or later (LLVM 14's znver3 model halves the ymm FMA "
             "throughput); Debian: apt-get install llvm-19, or --mca PATH")


def compile_s(cc, src, out):
    subprocess.run([cc] + CFLAGS + ["-S", "-o", out, src], cwd=ROOT, check=True)
    with open(out) as f:
        return f.read().split("\n")


def function_lines(lines, name):
    start = next(i for i, l in enumerate(lines) if l.startswith(name + ":"))
    end = next(i for i in range(start + 1, len(lines))
               if re.match(r"^[A-Za-z_]\w*:", lines[i])
               or lines[i].strip().startswith(".size\t" + name))
    return lines[start:end]


def instrs(block):
    return [l for l in block if l.startswith("\t") and not l.strip().startswith(".")
            and not l.strip().startswith("#")]


def loops(fn):
    """Innermost loops: a label L and the first later backward jump to L
    with no other label between them."""
    out = []
    for i, l in enumerate(fn):
        m = re.match(r"^(\.L\w+):", l)
        if not m:
            continue
        for j in range(i + 1, len(fn)):
            if re.match(r"^\.L\w+:", fn[j]):
                break
            if re.match(r"\s+j\w+\s+%s\s*$" % re.escape(m.group(1)), fn[j]):
                out.append(instrs(fn[i + 1:j + 1]))
                break
    return out


def pick_loops(fn, nfma):
    qk = pv = None
    for body in loops(fn):
        f = sum(bool(FMA_RE.search(x)) for x in body)
        b = [x for x in body if "vbroadcastss" in x]
        if f != nfma or len(b) != MR:
            continue
        const = all(re.search(r"vbroadcastss\s+-?\d*\(%r\w+\),", x) for x in b) and \
            any(re.search(r"vbroadcastss\s+%d\(" % (BC * 4 - 4), x) or
                re.search(r"vbroadcastss\s+%d\(" % (BC * 4), x) for x in b)
        if const and pv is None:
            pv = body
        elif not const and qk is None:
            qk = body
    if qk is None or pv is None:
        sys.exit("mca_flash: the q·kᵀ / p·v loops (%d FMAs, %d broadcasts) were not found in "
                 "the kernel's assembly: the kernel changed; update pick_loops" % (nfma, MR))
    return qk, pv


def marked_regions(lines):
    regs, cur, name = {}, None, None
    for l in lines:
        m = re.search(r"LLVM-MCA-BEGIN (\w+)", l)
        if m:
            name, cur = m.group(1), []
            continue
        if re.search(r"LLVM-MCA-END", l):
            regs[name] = instrs(cur)
            name, cur = None, None
            continue
        if cur is not None:
            cur.append(l)
    return regs


def run_mca(mca, cpu, body, tmp):
    """llvm-mca on body repeated: cycles per iteration, the block's
    reciprocal throughput, the pressure per resource, and the counts of
    loads, stores and prefetches from its instruction info."""
    path = os.path.join(tmp, "region.s")
    with open(path, "w") as f:
        f.write("\n".join(body) + "\n")
    out = subprocess.run([mca, "-mcpu=" + cpu, "-iterations=200", "-resource-pressure",
                          "-instruction-info", path], capture_output=True, text=True,
                         check=True).stdout
    cycles = int(re.search(r"Total Cycles:\s+(\d+)", out).group(1)) / 200.0
    rthr = float(re.search(r"Block RThroughput:\s+([\d.]+)", out).group(1))
    names = re.findall(r"^\[([\d.]+)\]\s+- (\w+)", out, re.M)
    hdr = out.index("Resource pressure per iteration:")
    vals = out[hdr:].split("\n")[2].split()
    press = {}
    for (_, name), v in zip(names, vals):
        press[name] = press.get(name, 0.0) + (0.0 if v == "-" else float(v))
    sec = out[out.index("Instruction Info:"):out.index("Resources:")].split("\n")
    head = next(l for l in sec if l.startswith("[1]") and "Instructions:" in l)
    cl, cs = head.index("[4]") + 1, head.index("[5]") + 1  # the '*' columns
    loads = stores = pref = 0
    for line in sec[sec.index(head) + 1:]:
        if len(line) <= cs or not line[:cl].strip():
            continue
        op = line[head.index("Instructions:"):].split()[0] if line[head.index(
            "Instructions:"):].split() else ""
        if op.startswith("prefetch"):
            pref += 1
        else:
            loads += line[cl] == "*"
            stores += line[cs] == "*"
    return cycles, rthr, press, (loads, stores, pref)


def pipes(press, prefix):
    g = lambda k: press.get(prefix + k, 0.0)
    return g("FP0") + g("FP1"), g("FP2") + g("FP3")


def report(title, regions, mca, cpus, tmp, nfma_loop):
    print("\n## %s" % title)
    res = {}
    for cpu in cpus:
        prefix = {"znver3": "Zn3", "znver4": "Zn4"}[cpu]
        print("\n-mcpu=%s (FP0+FP1: the two FMA pipes' busy cycles per iteration; "
              "RThroughput: the resource bound; cycles: llvm-mca's simulated cycles per "
              "iteration, the region run back to back)" % cpu)
        print("| region | per group | instrs | FMAs | FP0+FP1 | FP2+FP3 | loads | stores | "
              "RThroughput | cycles | cycles per group |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for name, (body, times) in regions.items():
            cyc, rthr, press, (ld, st, pf) = run_mca(mca, cpu, body, tmp)
            fma = sum(bool(FMA_RE.search(x)) for x in body)
            fp01, fp23 = pipes(press, prefix)
            res[(cpu, name)] = (cyc, times, fp01, fma)
            print("| %s | x%d | %d | %d | %.1f | %.1f | %d%s | %d | %.1f | %.2f | %.0f |" %
                  (name, times, len(body), fma, fp01, fp23, ld, " + %d pf" % pf if pf else "",
                   st, rthr, cyc, cyc * times))
        tot = sum(res[(cpu, k)][0] * res[(cpu, k)][1] for k in regions)
        fmas = sum(res[(cpu, k)][3] * res[(cpu, k)][1] for k in regions)
        fp01 = sum(res[(cpu, k)][2] * res[(cpu, k)][1] for k in regions)
        gemm = sum(res[(cpu, k)][3] * res[(cpu, k)][1] for k in regions if "loop" in k)
        width = 8 if nfma_loop == 12 else 16
        # FMA peak: 2 ymm FMAs per cycle (Zen 3 and Zen 4: two 256-bit FMA pipes;
        # a zmm FMA takes both halves, 1 per cycle): GEMM FMA "cycles" at peak
        peak_cycles = gemm * (0.5 if width == 8 else 1.0)
        print("group total: %.0f cycles (phases one after another); GEMM FMAs %d (%d-wide), "
              "at the FMA peak %.0f cycles: **%.0f %%** of peak; FP0+FP1 (FMA-pipe) busy "
              "%.0f cycles: ceiling if the phases overlapped perfectly **%.0f %%**" %
              (tot, gemm, width, peak_cycles, 100 * peak_cycles / tot, fp01 / 2,
               100 * peak_cycles / (fp01 / 2)))
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mca")
    ap.add_argument("--cc", default="gcc")
    ap.add_argument("--keep", help="write the region files here")
    args = ap.parse_args()
    mca, ver = find_mca(args.mca)
    tmp = args.keep or tempfile.mkdtemp(prefix="mca-flash.")
    os.makedirs(tmp, exist_ok=True)
    cc_ver = subprocess.run([args.cc, "--version"], capture_output=True, text=True).stdout
    print("# flash forward tile: llvm-mca %d (%s), %s, %s" %
          (ver, mca, cc_ver.split("\n")[0], " ".join(CFLAGS)))
    try:
        for isa, nfma, cpus in (("avx2", 12, ("znver3", "znver4")), ("avx512", 24, ("znver4",))):
            kern = compile_s(args.cc, "src/kernels/arch/%s/sdpa_flash_%s.c" % (isa, isa),
                             os.path.join(tmp, "kernel_%s.s" % isa))
            qk, pv = pick_loops(function_lines(kern, "tile_forward_" + isa), nfma)
            harness = compile_s(args.cc, "tools/mca/flash_%s_mca.c" % isa,
                                os.path.join(tmp, "harness_%s.s" % isa))
            marked = marked_regions(harness)
            cols = 16 if isa == "avx2" else 64  # columns per GEMM slice
            steps = D * (BC // cols)            # k steps of q·kᵀ (and of p·v: BC x Dv / cols)
            regions = {"qk_loop": (qk, steps)}
            for name, body in marked.items():
                regions[name] = (body, 1)
            regions["pv_loop"] = (pv, steps)
            for name, (body, _) in regions.items():
                with open(os.path.join(tmp, "%s_%s.s" % (isa, name)), "w") as f:
                    f.write("\n".join(body) + "\n")
            report("%s tile (%s)" % (isa, ", ".join(regions)), regions, mca, cpus, tmp, nfma)
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
