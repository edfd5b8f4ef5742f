"""attn.torch.scaled_dot_product_attention against torch's math formula
(softmax(q kᵀ scale + mask) v in float64 autograd), and a small
TransformerEncoderLayer's training step against torch's own
nn.TransformerEncoderLayer. Tolerances: f32 max |got - ref| <= 1e-5 of
max |ref| (outputs and gradients); bf16 2e-2 of max |ref| against the
formula on the same bf16 values (attn rounds P and dS to bf16, 2^-9 each;
PyTorch's own bf16 math would round more)."""
import math
import unittest

try:
    import torch
    import attn.torch as at
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False

import attn

TOL = 1e-5
TOL_BF16 = 2e-2
needs_torch = unittest.skipUnless(HAVE_TORCH, "torch is not importable (Debian: python3-torch)")


def math_sdpa(q, k, v, attn_mask=None, is_causal=False, scale=None, enable_gqa=False):
    """PyTorch 2's reference formula (its documentation), in float64."""
    q, k, v = (t.double() for t in (q, k, v))
    L, S = q.shape[-2], k.shape[-2]
    if enable_gqa:
        g = q.shape[-3] // k.shape[-3]
        k, v = k.repeat_interleave(g, -3), v.repeat_interleave(g, -3)
    s = q @ k.transpose(-2, -1) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if is_causal:
        s = s.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, float("-inf")) if attn_mask.dtype == torch.bool \
            else s + attn_mask.double()
    return torch.softmax(s, -1) @ v


def rel_err(got, want):
    return ((got.double() - want.double()).abs().max() / want.double().abs().max()).item()


@needs_torch
class Op(unittest.TestCase):
    def compare(self, shapes, tol=TOL, dtype=None, views=None, **kw):
        dtype = dtype or torch.float32
        g = torch.Generator().manual_seed(sum(sum(s) for s in shapes))
        leaves = [torch.randn(s, generator=g).to(dtype).requires_grad_() for s in shapes]
        args = views(*leaves) if views else leaves
        out = at.scaled_dot_product_attention(*args, **kw)
        self.assertEqual(out.dtype, dtype)
        want = math_sdpa(*args, **kw)
        self.assertLessEqual(rel_err(out, want), tol, "out")
        dout = torch.randn(want.shape, generator=g)
        got = torch.autograd.grad(out, leaves, dout.to(dtype))
        ref = torch.autograd.grad(want, leaves, dout.double())
        for name, a, b in zip(("query", "key", "value"), got, ref):
            self.assertEqual(a.dtype, dtype)
            self.assertLessEqual(rel_err(a, b), tol, "grad " + name)

    def test_plain(self):
        self.compare([(2, 3, 10, 16), (2, 3, 12, 16), (2, 3, 12, 8)])

    def test_causal_square_and_rectangular(self):
        self.compare([(2, 2, 12, 16)] * 3, is_causal=True)
        self.compare([(2, 2, 12, 16), (2, 2, 20, 16), (2, 2, 20, 16)], is_causal=True)

    def test_bool_mask_true_attends(self):
        m = torch.rand(10, 12, generator=torch.Generator().manual_seed(1)) > 0.5
        m[:, 0] = True
        self.compare([(2, 3, 10, 16), (2, 3, 12, 16), (2, 3, 12, 16)], attn_mask=m)

    def test_float_mask_added_and_broadcast(self):
        m = torch.randn(2, 1, 10, 12, generator=torch.Generator().manual_seed(2))
        self.compare([(2, 3, 10, 16), (2, 3, 12, 16), (2, 3, 12, 16)], attn_mask=m)

    def test_scale(self):
        self.compare([(1, 2, 7, 8)] * 3, scale=0.7)

    def test_ranks_3_and_5(self):
        self.compare([(3, 7, 8)] * 3, is_causal=True)
        self.compare([(2, 2, 2, 7, 8)] * 3)

    def test_grouped_query_heads(self):
        self.compare([(2, 6, 9, 8), (2, 2, 9, 8), (2, 2, 9, 8)], enable_gqa=True)

    def test_views_into_one_projection(self):
        # q, k, v as strided views of one [B, L, 3, H, E] tensor (as an encoder does)
        self.compare([(2, 9, 3, 4, 8)], views=lambda x: tuple(x.permute(2, 0, 3, 1, 4)),
                     is_causal=True)

    def test_views_reach_the_library_without_copies(self):
        from attn import _desc
        seen = []
        real = _desc.forward

        def spy(d, backend, bf16, q, k, v, *rest):
            seen.append((q, k, v, tuple(d.q_stride)))
            return real(d, backend, bf16, q, k, v, *rest)
        x = torch.randn(2, 9, 3, 4, 8)
        q, k, v = x.permute(2, 0, 3, 1, 4)
        _desc.forward = spy
        try:
            at.scaled_dot_product_attention(q, k, v)
        finally:
            _desc.forward = real
        self.assertEqual(seen, [(q.data_ptr(), k.data_ptr(), v.data_ptr(), q.stride()[:3])])

    def test_non_contiguous_last_dim_is_copied(self):
        self.compare([(2, 2, 9, 16)] * 3, views=lambda q, k, v: (q[..., ::2], k[..., ::2], v))

    def test_bf16(self):
        self.compare([(2, 3, 17, 32), (2, 3, 19, 32), (2, 3, 19, 16)], tol=TOL_BF16,
                     dtype=torch.bfloat16, is_causal=False)
        m = torch.rand(17, 19, generator=torch.Generator().manual_seed(3)) > 0.3
        m[:, 0] = True
        self.compare([(1, 2, 17, 32), (1, 2, 19, 32), (1, 2, 19, 32)], tol=TOL_BF16,
                     dtype=torch.bfloat16, attn_mask=m)


class _Spy:
    """Records the pointers and strides the op hands to the library (attn._desc)."""

    def __init__(self):
        from attn import _desc
        self.desc, self.calls = _desc, []

    def __enter__(self):
        self.real = (self.desc.forward, self.desc.backward)

        def spy(name, real):
            def call(d, backend, bf16, *ptrs):
                self.calls.append((name, ptrs, tuple(d.q_stride), tuple(d.o_stride)))
                return real(d, backend, bf16, *ptrs)
            return call
        self.desc.forward = spy("forward", self.real[0])
        self.desc.backward = spy("backward", self.real[1])
        return self

    def __exit__(self, *exc):
        self.desc.forward, self.desc.backward = self.real


@needs_torch
class PackedOp(unittest.TestCase):
    """attn.torch.sdpa_qkvpacked(qkv [B, L, 3, H, D]) -> [B, L, H, D] against
    the formula on the permuted views, and its layout promises: no copy of
    qkv, out or the gradient."""

    def compare(self, shape, tol=TOL, dtype=torch.float32 if HAVE_TORCH else None, **kw):
        g = torch.Generator().manual_seed(sum(shape))
        x = torch.randn(shape, generator=g).to(dtype).requires_grad_()
        out = at.sdpa_qkvpacked(x, **kw)
        self.assertEqual((out.dtype, out.shape), (dtype, torch.Size(shape[:2] + shape[3:])))
        q, k, v = x.permute(2, 0, 3, 1, 4)
        want = math_sdpa(q, k, v, **kw).transpose(1, 2)
        self.assertLessEqual(rel_err(out, want), tol, "out")
        dout = torch.randn(want.shape, generator=g)
        (got,) = torch.autograd.grad(out, x, dout.to(dtype))
        (ref,) = torch.autograd.grad(want, x, dout.double())
        self.assertEqual(got.dtype, dtype)
        self.assertLessEqual(rel_err(got, ref), tol, "grad qkv")

    def test_plain_causal_scale(self):
        self.compare((2, 9, 3, 4, 8))
        self.compare((2, 9, 3, 4, 8), is_causal=True)
        self.compare((1, 7, 3, 2, 16), scale=0.3)

    def test_masks_broadcast(self):
        m = torch.rand(9, 9, generator=torch.Generator().manual_seed(6)) > 0.5
        m[:, 0] = True
        self.compare((2, 9, 3, 4, 8), attn_mask=m)
        self.compare((2, 9, 3, 4, 8),
                     attn_mask=torch.randn(2, 1, 9, 9, generator=torch.Generator().manual_seed(7)))

    def test_bf16(self):
        self.compare((2, 17, 3, 2, 32), tol=TOL_BF16, dtype=torch.bfloat16, is_causal=True)

    def test_no_copies_in_or_out(self):
        B, L, H, D = 2, 9, 4, 8
        x = torch.randn(B, L, 3 * H * D, requires_grad=True)  # a Linear's output
        with _Spy() as spy:
            out = at.sdpa_qkvpacked(x.view(B, L, 3, H, D))
            out.backward(torch.randn(B, L, H, D))
        (_, fwd, qs, os_), (_, bwd, qs2, os2) = spy.calls
        q, k, v, o = fwd[:4]
        self.assertEqual((q, k - q, v - q), (x.data_ptr(), 4 * H * D, 8 * H * D))
        self.assertEqual(qs, (L * 3 * H * D, D, 3 * H * D))
        self.assertEqual(os_, (L * H * D, D, H * D))  # out written as [B, L, H, D]
        self.assertEqual(o, out.data_ptr())
        dq, dk, dv = bwd[-3:]
        # dq, dk, dv written straight into x's gradient (no stack, no transposing copy)
        self.assertEqual((dq, dk - dq, dv - dq), (x.grad.data_ptr(), 4 * H * D, 8 * H * D))

    def test_refuses(self):
        with self.assertRaisesRegex(attn.Error, "qkv: shape"):
            at.sdpa_qkvpacked(torch.randn(2, 9, 4, 8))
        with self.assertRaisesRegex(attn.Error, "qkv: dtype"):
            at.sdpa_qkvpacked(torch.randn(2, 9, 3, 4, 8).double())
        with self.assertRaisesRegex(attn.Error, "dropout_p"):
            at.sdpa_qkvpacked(torch.randn(2, 9, 3, 4, 8), dropout_p=1.5)


@needs_torch
class OpRefuses(unittest.TestCase):
    def refused(self, words, *a, **kw):
        with self.assertRaises(attn.Error) as c:
            at.scaled_dot_product_attention(*a, **kw)
        for w in words:
            self.assertIn(w, str(c.exception))

    def test_wrong_dtype(self):
        q = torch.randn(1, 2, 4, 8)
        self.refused(["query", "float64"], q.double(), q, q)
        self.refused(["key", "float16"], q, q.half(), q)
        self.refused(["dtypes"], q, q.bfloat16(), q.bfloat16())

    def test_device_other_than_cpu(self):
        q = torch.randn(1, 2, 4, 8)
        self.refused(["value", "device 'meta'", "CPU"], q, q, torch.empty(1, 2, 4, 8, device="meta"))

    def test_shape_mismatch(self):
        q = torch.randn(1, 2, 4, 8)
        self.refused(["key", "last dim"], q, torch.randn(1, 2, 4, 5), q)
        self.refused(["value", "length"], q, q, torch.randn(1, 2, 5, 8))
        self.refused(["leading dims"], q, torch.randn(1, 3, 4, 8), torch.randn(1, 3, 4, 8))
        self.refused(["attn_mask", "broadcast"], q, q, q, attn_mask=torch.ones(3, 3, dtype=torch.bool))

    def test_second_derivative_is_refused(self):
        q = torch.randn(1, 2, 4, 8, requires_grad=True)
        out = at.scaled_dot_product_attention(q, q, q)
        (g,) = torch.autograd.grad(out, q, torch.ones_like(out, requires_grad=True),
                                   create_graph=True)
        # a clear refusal, not a silently wrong (untracked) second derivative
        with self.assertRaisesRegex(RuntimeError, "differentiate twice"):
            g.sum().backward()

    def test_unsupported_options(self):
        q = torch.randn(1, 2, 4, 8)
        self.refused(["dropout_p"], q, q, q, dropout_p=1.0)
        self.refused(["is_causal"], q, q, q, attn_mask=torch.ones(4, 4, dtype=torch.bool),
                     is_causal=True)
        self.refused(["requires grad"], q, q, q, attn_mask=torch.zeros(4, 4, requires_grad=True))


@needs_torch
class EncoderTrainingStep(unittest.TestCase):
    """One training step of a small encoder with attn's op equals torch's
    nn.TransformerEncoderLayer's (same weights, dropout 0): loss, every
    parameter gradient, and the parameters after an SGD step."""

    def step(self, layer, x, w, **kw):
        opt = torch.optim.SGD(layer.parameters(), lr=0.1)
        opt.zero_grad()
        loss = (layer(x, **kw) * w).sum()
        loss.backward()
        grads = {n: p.grad.clone() for n, p in layer.named_parameters()}
        opt.step()
        return loss.item(), grads, {n: p.detach().clone() for n, p in layer.named_parameters()}

    def compare(self, norm_first, **kw):
        torch.manual_seed(0)
        ref = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True,
                                               norm_first=norm_first, activation="gelu")
        mine = at.SDPAEncoderLayer(32, 4, 64, dropout=0.0, norm_first=norm_first,
                                          activation="gelu")
        mine.load_state_dict(ref.state_dict())
        x, w = torch.randn(2, 12, 32), torch.randn(2, 12, 32)
        l1, g1, p1 = self.step(ref, x, w, **kw)
        l2, g2, p2 = self.step(mine, x, w, **kw)
        self.assertLessEqual(abs(l1 - l2), TOL * abs(l1))
        self.assertEqual(sorted(g1), sorted(g2))
        for n in g1:
            self.assertLessEqual(rel_err(g2[n], g1[n]), TOL, n)
            self.assertLessEqual(rel_err(p2[n], p1[n]), TOL, n)

    def test_post_norm(self):
        self.compare(False)

    def test_pre_norm_with_masks(self):
        mask = torch.rand(12, 12, generator=torch.Generator().manual_seed(4)) > 0.7
        mask.fill_diagonal_(False)
        kpm = torch.zeros(2, 12, dtype=torch.bool)
        kpm[1, 9:] = True
        self.compare(True, src_mask=mask, src_key_padding_mask=kpm)

    def test_float_mask(self):
        self.compare(False, src_mask=torch.randn(12, 12, generator=torch.Generator().manual_seed(5)))

    def test_attention_runs_on_the_packed_projection(self):
        # SDPAEncoderLayer hands the in-projection's output to the library as is
        # and gets the gradient back in it (attn.torch.sdpa_qkvpacked)
        layer = at.SDPAEncoderLayer(32, 4, 64)
        x = torch.randn(2, 12, 32)
        with _Spy() as spy:
            layer(x, is_causal=True).sum().backward()
        self.assertEqual([c[0] for c in spy.calls], ["forward", "backward"])
        dq, dk, dv = spy.calls[1][1][-3:]
        self.assertEqual((dk - dq, dv - dq), (4 * 32, 8 * 32))
        self.assertEqual(spy.calls[0][3], (12 * 32, 8, 32))


if __name__ == "__main__":
    unittest.main()


def openblas_loaded():
    """torch's BLAS is OpenBLAS (Debian's torch), loaded once a product ran."""
    import torch
    torch.ones(2, 2) @ torch.ones(2, 2)
    try:
        with open("/proc/self/maps") as f:
            return any("openblas" in line.lower() for line in f)
    except OSError:
        return False


@needs_torch
class BenchScript(unittest.TestCase):
    """tools/bench_torch_op.py still runs (tiny sizes; no timing is judged)."""

    def test_runs_and_agrees(self):
        import os
        import subprocess
        import sys
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        script = os.path.join(root, "tools", "bench_torch_op.py")
        if not os.path.exists(script):
            self.skipTest("tools/bench_torch_op.py not here (installed package)")
        for extra in (["--clock", "cpu"], ["--causal", "--dtype", "bf16", "--batch", "2"],
                      ["--wait", "passive"]):
            r = subprocess.run([sys.executable, script, "--n", "16", "--d-model", "16", "--heads", "2",
                                "--ff", "32", "--steps", "1", "--warmup", "0", "--threads", "1"]
                               + extra, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               timeout=300)  # a hang fails the test instead of stalling the suite
            text = r.stdout.decode()
            self.assertEqual(r.returncode, 0, text)
            self.assertIn("speedup of attn's op", text)
            self.assertIn("speedup of attn's layer", text)
            self.assertIn("| 16", text)
            self.assertIn("(%s time)" % ("cpu" if extra[:1] == ["--clock"] else "wall"), text)
            if extra == ["--wait", "passive"]:  # set before torch loads libgomp and OpenBLAS
                self.assertIn("OMP_WAIT_POLICY=PASSIVE OPENBLAS_THREAD_TIMEOUT=4",
                              text.splitlines()[0])
            if openblas_loaded():  # its own pool follows --threads too (not only torch's)
                self.assertIn("(OpenBLAS 1)", text.splitlines()[0])

    def test_profile_runs(self):
        import os
        import subprocess
        import sys
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        script = os.path.join(root, "tools", "profile_torch_op.py")
        if not os.path.exists(script):
            self.skipTest("tools/profile_torch_op.py not here (installed package)")
        r = subprocess.run([sys.executable, script, "--n", "64", "--d-model", "32", "--heads", "2",
                            "--ff", "64", "--steps", "1"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=300)
        text = r.stdout.decode()
        self.assertEqual(r.returncode, 0, text)
        self.assertIn("A torch's layer", text)
        self.assertIn("C with attn's op", text)
        self.assertIn("(Python, autograd, ops < 0.5 ms)", text)
