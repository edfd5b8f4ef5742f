#!/usr/bin/env python3
"""Fit of the normal tail ratio used by the arm64 NEON GELU (src/kernels/arch/neon/row_ops_neon.c).

S(a) = Phi(-a) exp(a^2 / 2) = erfc(a / sqrt 2) exp(a^2 / 2) / 2 on a in [0, A]
is approximated by P(a) / Q(a), deg P = m - 1, deg Q = m, with P(0) / Q(0) = 1/2
exactly (p0 = 1/2, q0 = 1), for near-minimax relative error: linearized least
squares (Sanathanan-Koerner: weights 1 / (S Q_previous)) with Lawson
reweighting, in t = a / A for conditioning, then scaled back to a and
rounded to f32. Prints the error in exact arithmetic and evaluated as the
kernel does (f32 Horner with FMA, one division).

Needs numpy and mpmath:  /usr/bin/python3 tools/fit_gelu_tail.py [m=5] [A=14]
(the kernel's coefficients: m = 5, A = 14: 5.8e-9 exact, ~3e-7 in f32).
"""
import sys

import mpmath as mp
import numpy as np

mp.mp.dps = 40


def tail_ratio(v):
    v = mp.mpf(float(v))
    return float(mp.erfc(v / mp.sqrt(2)) / 2 * mp.exp(v * v / 2))


def fit(m, A, n=6000, iters=300):
    k = np.arange(n)
    a = np.concatenate([[0.0], (A / 2) * (1 - np.cos(np.pi * (k + 0.5) / n)), [A]])
    S = np.array([tail_ratio(v) for v in a])
    t = a / A
    w, qprev, best = np.ones_like(t), np.ones_like(t), None
    for _ in range(iters):
        # unknowns p1..p_{m-1}, q1..q_m: P(t) - S Q(t) = 0 with p0 = 1/2, q0 = 1
        M = np.stack([t**j for j in range(1, m)] + [-S * t**j for j in range(1, m + 1)], 1)
        sc = np.sqrt(w) / (S * qprev)
        sol = np.linalg.lstsq(M * sc[:, None], (S - 0.5) * sc, rcond=None)[0]
        p = np.concatenate([[0.5], sol[: m - 1]])
        q = np.concatenate([[1.0], sol[m - 1 :]])
        qprev = np.polyval(q[::-1], t)
        e = np.polyval(p[::-1], t) / qprev / S - 1
        me = np.max(np.abs(e))
        if best is None or me < best[0]:
            best = (me, p.copy(), q.copy())
        w = w * (np.abs(e) + 1e-3 * me)
        w /= w.sum()
    me, p, q = best
    return me, p / A ** np.arange(m), q / A ** np.arange(m + 1)


def horner_f32(c, x):
    y = np.full_like(x, c[-1], dtype=np.float32)
    for cc in c[-2::-1]:  # FMA: one rounding per step
        y = (y.astype(np.float64) * x.astype(np.float64) + np.float64(cc)).astype(np.float32)
    return y


def main():
    m = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    A = float(sys.argv[2]) if len(sys.argv) > 2 else 14.0
    me, p, q = fit(m, A)
    pf, qf = p.astype(np.float32), q.astype(np.float32)
    x = np.linspace(0, A, 10001).astype(np.float32)
    S = np.array([tail_ratio(v) for v in x])
    r = (horner_f32(pf, x) / horner_f32(qf, x)).astype(np.float32)
    print(f"m={m} A={A}: max rel err exact {me:.3g}, f32 {np.max(np.abs(r / S - 1)):.3g}")
    print("P (a^0 first):", ", ".join("%.9ef" % v for v in pf))
    print("Q (a^0 first):", ", ".join("%.9ef" % v for v in qf))


if __name__ == "__main__":
    main()
