"""Plain formulas the tests compare attn with: attention in float64 numpy
(forward and backward) with the masks of include/attn/sdpa.h."""
import numpy as np


def allowed(Lq, Lk, causal=False, window=None, q_offset=0):
    i = np.arange(Lq)[:, None] + q_offset
    j = np.arange(Lk)[None, :]
    ok = np.ones((Lq, Lk), bool)
    if causal:
        ok &= j <= i
    if window is not None:
        left, right = (window, window) if np.ndim(window) == 0 else window
        if left is not None:
            ok &= j >= i - left
        if right is not None:
            ok &= j <= i + right
    return ok


def sdpa(q, k, v, mask=None, causal=False, window=None, scale=None, q_offset=0, key_lens=None):
    """q [B,H,Lq,D], k/v [B,Hkv,Lk,*] (float64); returns out, lse, probs.
    Rows with no allowed key: out 0, lse -inf."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    B, H, Lq, D = q.shape
    g = H // k.shape[1]
    k, v = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    Lk = k.shape[2]
    s = q @ k.swapaxes(-1, -2) * (1 / np.sqrt(D) if scale is None else scale)
    ok = np.broadcast_to(allowed(Lq, Lk, causal, window, q_offset), s.shape).copy()
    if mask is not None:
        m = np.asarray(mask)
        if m.dtype == bool:
            ok &= np.broadcast_to(m, s.shape)
        else:
            s = s + m
    if key_lens is not None:
        ok &= (np.arange(Lk)[None, :] < np.asarray(key_lens)[:, None])[:, None, None, :]
    s = np.where(ok, s, -np.inf)
    mx = s.max(-1, keepdims=True)
    mx = np.where(np.isfinite(mx), mx, 0)
    e = np.exp(s - mx)
    z = e.sum(-1, keepdims=True)
    p = np.where(z > 0, e / np.where(z > 0, z, 1), 0)
    lse = np.where(z[..., 0] > 0, np.log(np.where(z[..., 0] > 0, z[..., 0], 1)) + mx[..., 0], -np.inf)
    return p @ v, lse, p


def sdpa_backward(q, k, v, dout, scale=None, **masks):
    """dq, dk, dv (float64) of sdpa for the upstream gradient dout."""
    q, k, v, dout = (np.asarray(a, np.float64) for a in (q, k, v, dout))
    g = q.shape[1] // k.shape[1]
    out, _, p = sdpa(q, k, v, scale=scale, **masks)
    sc = 1 / np.sqrt(q.shape[-1]) if scale is None else scale
    kk, vv = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    dv = p.swapaxes(-1, -2) @ dout
    dp = dout @ vv.swapaxes(-1, -2)
    ds = p * (dp - (dout * out).sum(-1, keepdims=True)) * sc
    dq = ds @ kk
    dk = ds.swapaxes(-1, -2) @ q

    def fold(a):  # sum the query heads that share a key/value head
        B, H, L, D = a.shape
        return a.reshape(B, H // g, g, L, D).sum(2)
    return dq, fold(dk), fold(dv)


def max_rel_err(got, ref):
    """max |got - ref| / max(|ref|, 1e-30): the tests' error measure."""
    ref = np.asarray(ref, np.float64)
    return float(np.abs(np.asarray(got, np.float64) - ref).max() / max(np.abs(ref).max(), 1e-30))
