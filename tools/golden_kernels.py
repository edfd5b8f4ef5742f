"""Golden file for tests/test_kernels.c: inputs, outputs and autograd
gradients of the f32 kernels (softmax, log-softmax, layer_norm with/without
affine, relu, gelu, embedding with repeated ids, cross_entropy with
ignore_index and label smoothing). Inputs are f32; references are computed in
float64 by torch and stored as F32. Names: "<op>.<case>.<tensor>".
    /usr/bin/python3 tools/golden_kernels.py tests/golden"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st  # noqa: E402

out = sys.argv[1] if len(sys.argv) > 1 else "tests/golden"
g = torch.Generator().manual_seed(1234)
T = {}


def randn(*shape, scale=1.0):
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * scale).float()


def grad_of(fn, inputs, dy):
    """Run fn on float64 copies of inputs (requires_grad), backprop dy."""
    xs = [x.double().requires_grad_(True) for x in inputs]
    y = fn(*xs)
    y.backward(dy.double())
    return y.detach().float(), [x.grad.float() for x in xs]


# softmax / log-softmax: x, y, dy, dx. Rows with -inf entries (partly masked).
for name, rows, n, scale in [("r3n1", 3, 1, 1.0), ("r3n17", 3, 17, 3.0), ("r2n1000", 2, 1000, 5.0),
                             ("big", 4, 33, 40.0)]:
    x = randn(rows, n, scale=scale)
    if n > 2:
        x[0, 1] = float("-inf")
        x[rows - 1, : n // 2] = float("-inf")
    dy = randn(rows, n)
    for op, fn in [("softmax", lambda t: torch.softmax(t, -1)),
                   ("log_softmax", lambda t: torch.log_softmax(t, -1))]:
        y, (dx,) = grad_of(fn, [x], dy if op == "softmax" else dy.masked_fill(x.isinf(), 0))
        T[f"{op}.{name}.x"] = x
        T[f"{op}.{name}.y"] = y
        T[f"{op}.{name}.dy"] = dy if op == "softmax" else dy.masked_fill(x.isinf(), 0)
        T[f"{op}.{name}.dx"] = dx

# layer_norm: x, [weight, bias], y, mean, rstd, dy, dx, [dweight, dbias]
for name, rows, n, affine, shift in [("r3n1", 3, 1, True, 0.0), ("r3n17", 3, 17, True, 0.0),
                                     ("r4n1000", 4, 1000, True, 0.0),
                                     ("r5n17_noaffine", 5, 17, False, 0.0),
                                     ("offset", 3, 64, True, 100.0)]:
    eps = 1e-5
    x = randn(rows, n, scale=2.0) + shift
    dy = randn(rows, n)
    inputs = [x]
    if affine:
        inputs += [randn(n) + 1.0, randn(n)]
        fn = lambda t, w, b: F.layer_norm(t, (n,), w, b, eps)  # noqa: E731
    else:
        fn = lambda t: F.layer_norm(t, (n,), None, None, eps)  # noqa: E731
    y, grads = grad_of(fn, inputs, dy)
    xd = x.double()
    mean = xd.mean(-1)
    rstd = 1.0 / torch.sqrt(xd.var(-1, unbiased=False) + eps)
    p = f"layer_norm.{name}."
    T[p + "x"], T[p + "y"], T[p + "dy"], T[p + "dx"] = x, y, dy, grads[0]
    T[p + "mean"], T[p + "rstd"] = mean.float(), rstd.float()
    T[p + "eps"] = torch.tensor([eps], dtype=torch.float32)
    if affine:
        T[p + "weight"], T[p + "bias"] = inputs[1], inputs[2]
        T[p + "dweight"], T[p + "dbias"] = grads[1], grads[2]

# relu (with exact zeros: torch's gradient there is 0) and gelu (exact erf)
x = randn(1000, scale=3.0)
x[::50] = 0.0
dy = randn(1000)
for op, fn in [("relu", torch.relu), ("gelu", lambda t: F.gelu(t))]:
    xx = x if op == "relu" else torch.cat([x, torch.tensor([-20.0, -8.0, -5.5, 5.5, 8.0, 20.0])])
    dd = dy if op == "relu" else torch.cat([dy, torch.ones(6)])
    y, (dx,) = grad_of(fn, [xx], dd)
    T[f"{op}.n1000.x"], T[f"{op}.n1000.y"], T[f"{op}.n1000.dy"], T[f"{op}.n1000.dx"] = xx, y, dd, dx

# embedding: repeated ids, table [11, 7], ids [20]
vocab, dim = 11, 7
table = randn(vocab, dim)
ids = torch.tensor([3, 0, 10, 3, 3, 7, 0, 1, 2, 3, 9, 9, 5, 10, 4, 3, 8, 0, 6, 3], dtype=torch.int64)
dy = randn(len(ids), dim)
y, (dtable,) = grad_of(lambda w: F.embedding(ids, w), [table], dy)
T["embedding.rep.table"], T["embedding.rep.ids"] = table, ids.int()
T["embedding.rep.y"], T["embedding.rep.dy"], T["embedding.rep.dtable"] = y, dy, dtable

# cross_entropy: logits [rows, C], targets (I32) with ignored rows; loss [1]; dlogits
for name, rows, C, ignore, smooth, scale in [("plain", 6, 5, -100, 0.0, 2.0),
                                             ("ignore_smooth", 7, 5, -100, 0.1, 2.0),
                                             ("ignore2_smooth", 9, 17, 2, 0.25, 3.0),
                                             ("large", 4, 1000, -100, 0.05, 30.0),
                                             ("c1", 3, 1, -100, 0.1, 1.0)]:
    x = randn(rows, C, scale=scale)
    t = torch.randint(0, C, (rows,), generator=g)
    if name in ("ignore_smooth", "ignore2_smooth"):
        t[1] = ignore
        t[rows - 1] = ignore
    if name == "ignore2_smooth":
        t[3] = 2  # same value as ignore_index: ignored too
    fn = lambda lg: F.cross_entropy(lg, t, ignore_index=ignore, label_smoothing=smooth)  # noqa
    loss, (dx,) = grad_of(fn, [x], torch.tensor(1.0))
    p = f"cross_entropy.{name}."
    T[p + "logits"], T[p + "targets"] = x, t.int()
    T[p + "loss"], T[p + "dlogits"] = loss.reshape(1), dx
    T[p + "ignore_index"] = torch.tensor([ignore], dtype=torch.int32)
    T[p + "label_smoothing"] = torch.tensor([smooth], dtype=torch.float32)

st.save(os.path.join(out, "kernels.safetensors"), T,
        metadata={"generator": "tools/golden_kernels.py", "torch": torch.__version__})
print("kernels.safetensors:", len(T), "tensors")
