#!/usr/bin/python3
"""The coefficients of src/kernels/sdpa/softcap_tanh.h: tanh y ~ y P(u) / Q(u),
u = y^2, P and Q of degree 4 with P(0) = Q(0) = 1, minimax relative error
on y in [0, 9.1] by Lawson's iteration on the linearised error
(P - f Q) / (f Q_old), f = tanh(y) / y, over a dense grid. Prints the max
relative error in double and the coefficients rounded to f32.
Usage: tools/softcap_tanh_fit.py [ymax]"""
import sys

import numpy as np


def fit(n, m, c, iters=1500):
    y = np.concatenate([np.linspace(0, c, 40000)[1:], np.geomspace(1e-4, 0.5, 2000)])
    y.sort()
    u = y * y
    f = np.tanh(y) / y
    qold = np.ones_like(u)
    w = np.ones_like(u) / len(u)
    for _ in range(iters):
        a = np.hstack([np.vstack([u**k for k in range(1, n + 1)]).T,
                       np.vstack([-f * u**k for k in range(1, m + 1)]).T])
        sw = np.sqrt(w) / (f * qold)
        coef, *_ = np.linalg.lstsq(a * sw[:, None], (f - 1.0) * sw, rcond=None)
        p = np.concatenate([[1.0], coef[:n]])
        q = np.concatenate([[1.0], coef[n:]])
        pv, qv = np.polyval(p[::-1], u), np.polyval(q[::-1], u)
        err = (pv / qv - f) / f
        qold = qv
        w = w * np.abs(err)
        w /= w.sum()
    return p, q, np.abs(err).max()


if __name__ == "__main__":
    p, q, e = fit(4, 4, float(sys.argv[1]) if len(sys.argv) > 1 else 9.1)
    print("max relative error %.3e" % e)
    for name, cs in (("P", p), ("Q", q)):
        for k, a in enumerate(cs[1:], 1):
            print("#define ATTN_SOFTCAP_%s%d %.9ef" % (name, k, np.float32(a)))
