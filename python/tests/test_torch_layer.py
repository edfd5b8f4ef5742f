"""attn.torch.TransformerEncoderLayer (the whole layer in libattn, forward
and backward) against torch.nn.TransformerEncoderLayer run in float64 on the
same weights: the output, the gradient of src and of every parameter within
TOL = 1e-5 of max |reference| (f32: measured ~5e-7); bf16 matrix products
within 2e-2 (output) / 5e-2 (gradients). Also: training steps with torch
optimizers (the parameters are views of attn's flat buffer), replaced
parameters, dropout (attn's RNG: repeatable under torch.manual_seed, and its
gradient checked by finite differences), from_torch, bad input."""
import copy
import unittest

try:
    import torch
    import attn.torch as at
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False

import attn

TOL = 1e-5
needs_torch = unittest.skipUnless(HAVE_TORCH, "torch is not importable (Debian: python3-torch)")


def rel_err(got, want):
    return ((got.double() - want.double()).abs().max() / want.double().abs().max()).item()


def pair(E=32, H=4, FF=48, bias=True, **kw):
    """A torch layer (float64 copy as the reference) and attn's from it."""
    torch.manual_seed(E + H + FF)
    ref = torch.nn.TransformerEncoderLayer(E, H, FF, **kw)
    with torch.no_grad():
        for p in ref.parameters():  # non-trivial LayerNorm and bias values
            p.add_(0.1 * torch.randn(p.shape))
        if not bias:
            for name, p in ref.named_parameters():
                if name.endswith("bias"):
                    p.zero_()
    mine = at.TransformerEncoderLayer(E, H, FF, bias=bias, **kw)
    state = {n: t for n, t in ref.state_dict().items() if bias or not n.endswith("bias")}
    mine.load_state_dict(state)
    return ref.double(), mine


@needs_torch
class SameAsTorch(unittest.TestCase):
    def compare(self, ref, mine, x, ref_kw=None, tol=TOL, gtol=TOL, **kw):
        x = x.clone().requires_grad_()
        xd = x.detach().double().requires_grad_()
        ref_kw = kw if ref_kw is None else ref_kw
        ref_kw = {k: (v.double() if v.is_floating_point() else v) for k, v in ref_kw.items()}
        want = ref(xd, **ref_kw)
        got = mine(x, **kw)
        self.assertEqual(got.shape, want.shape)
        self.assertLessEqual(rel_err(got, want), tol, "out")
        dout = torch.randn(want.shape, generator=torch.Generator().manual_seed(1))
        named = dict(mine.named_parameters())
        rnamed = [(n, p) for n, p in ref.named_parameters() if n in named]
        gw = torch.autograd.grad(want, [xd] + [p for _, p in rnamed], dout.double())
        gg = torch.autograd.grad(got, [x] + [named[n] for n, _ in rnamed], dout)
        for name, a, b in zip(["src"] + [n for n, _ in rnamed], gg, gw):
            self.assertLessEqual(rel_err(a, b), gtol, name)

    def test_post_norm_relu_key_padding(self):
        ref, mine = pair(batch_first=True, dropout=0.0)
        kpm = torch.zeros(2, 11, dtype=torch.bool)
        kpm[1, 7:] = True
        kpm[0, 3] = True
        self.compare(ref, mine, torch.randn(2, 11, 32), src_key_padding_mask=kpm)

    def test_pre_norm_gelu_causal(self):
        ref, mine = pair(batch_first=True, dropout=0.0, norm_first=True, activation="gelu")
        causal = torch.ones(13, 13, dtype=torch.bool).triu(1)
        self.compare(ref, mine, torch.randn(3, 13, 32), ref_kw={"src_mask": causal},
                     is_causal=True)
        # the same as a mask
        self.compare(ref, mine, torch.randn(3, 13, 32), src_mask=causal)

    def test_causal_mask_detected(self):
        """A src_mask that is exactly the causal mask runs the causal kernel:
        the same output, bit for bit, as is_causal=True; any other mask not."""
        from attn._torch_layer import is_causal_mask
        ref, mine = pair(batch_first=True, dropout=0.0)
        L = 10
        above = torch.ones(L, L, dtype=torch.bool).triu(1)
        square = torch.zeros(L, L).masked_fill(above, float("-inf"))
        self.assertTrue(is_causal_mask(above, L))
        self.assertTrue(is_causal_mask(square, L))
        near = above.clone()
        near[0, 1] = False
        self.assertFalse(is_causal_mask(near, L))
        self.assertFalse(is_causal_mask(square + 0.5, L))
        self.assertFalse(is_causal_mask(above[:9, :9], L))
        for mask, causal in ((above, 1), (square, 1), (near, 0)):
            m, _ = mine._masks(mask, None, False, 2, L)  # what goes to the library
            self.assertEqual((m.causal, m.attn_mask is None), (causal, bool(causal)))
        x = torch.randn(2, L, 32)
        want = mine(x, is_causal=True)
        self.assertTrue(torch.equal(mine(x, src_mask=above), want))
        self.assertTrue(torch.equal(mine(x, src_mask=square), want))
        self.compare(ref, mine, x, src_mask=square)

    def test_float_masks(self):
        ref, mine = pair(batch_first=True, dropout=0.0, activation="gelu")
        g = torch.Generator().manual_seed(3)
        kpm = torch.zeros(2, 9)
        kpm[0, 6:] = float("-inf")
        kpm[1, 2] = -1.5
        self.compare(ref, mine, torch.randn(2, 9, 32), src_key_padding_mask=kpm)
        self.compare(ref, mine, torch.randn(2, 9, 32), src_mask=torch.randn(9, 9, generator=g),
                     src_key_padding_mask=kpm != 0)
        # both float: added (PyTorch 2; torch 1.13's masked_fill ignores a float
        # padding mask there), so against the sum as one mask
        am = torch.randn(9, 9, generator=g)
        self.compare(ref, mine, torch.randn(2, 9, 32), src_mask=am, src_key_padding_mask=kpm,
                     ref_kw={"src_mask": (am + kpm[:, None, :]).repeat_interleave(4, 0)})

    def test_per_head_mask_sequence_first(self):
        ref, mine = pair(E=24, H=3, FF=40, dropout=0.0, norm_first=True)  # batch_first=False
        mask = torch.rand(2 * 3, 10, 10, generator=torch.Generator().manual_seed(4)) > 0.6
        mask[:, torch.arange(10), torch.arange(10)] = False
        self.compare(ref, mine, torch.randn(10, 2, 24), src_mask=mask)

    def test_gelu_tanh(self):
        ref, mine = pair(batch_first=True, dropout=0.0,
                         activation=torch.nn.GELU(approximate="tanh"))
        self.assertEqual(mine.activation_name, "gelu_tanh")
        self.compare(ref, mine, torch.randn(2, 6, 32))

    def test_unbatched(self):
        ref, mine = pair(batch_first=True, dropout=0.0)
        self.compare(ref, mine, torch.randn(8, 32))

    def test_no_bias(self):
        ref, mine = pair(batch_first=True, dropout=0.0, norm_first=True, bias=False)
        self.assertFalse(any(n.endswith("bias") for n in mine.state_dict()))
        self.compare(ref, mine, torch.randn(2, 7, 32))

    def test_eval_with_dropout_is_torch_eval(self):
        ref, mine = pair(batch_first=True, dropout=0.3)
        ref.eval()
        mine.eval()
        self.compare(ref, mine, torch.randn(2, 6, 32))

    def test_bf16_src(self):
        """bf16 src (as from an autocast region): computed in f32, the output
        and src's gradient in bf16, within bf16 rounding (2e-2)."""
        ref, mine = pair(batch_first=True, dropout=0.0)
        x = torch.randn(2, 6, 32).bfloat16().requires_grad_()
        y = mine(x)
        self.assertEqual(y.dtype, torch.bfloat16)
        want = ref(x.detach().double())
        self.assertLessEqual(rel_err(y, want), 2e-2)
        y.float().sum().backward()
        self.assertEqual(x.grad.dtype, torch.bfloat16)

    def test_bf16_products(self):
        ref, mine = pair(batch_first=True, dropout=0.0, activation="gelu")
        mine.precision = "bf16"
        self.compare(ref, mine, torch.randn(2, 10, 32), tol=2e-2, gtol=5e-2)


@needs_torch
class Training(unittest.TestCase):
    def test_steps_with_optimizers(self):
        """Three steps of SGD and of Adam: gradients and parameters stay equal
        to torch's layer (f32 both) within 1e-5. (Not the key bias under
        Adam: its true gradient is 0, softmax ignores it, and Adam's first
        steps move by lr * sign(rounding noise).)"""
        for opt_cls in (torch.optim.SGD, torch.optim.Adam):
            torch.manual_seed(0)
            ref = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
            mine = at.from_torch(ref)
            o1, o2 = opt_cls(ref.parameters(), lr=1e-2), opt_cls(mine.parameters(), lr=1e-2)
            x, w = torch.randn(2, 12, 32), torch.randn(2, 12, 32)
            for step in range(3):
                for layer, opt in ((ref, o1), (mine, o2)):
                    opt.zero_grad()
                    (layer(x) * w).sum().backward()
                    opt.step()
                for (n, a), b in zip(ref.named_parameters(), mine.parameters()):
                    if n == "self_attn.in_proj_bias" and opt_cls is torch.optim.Adam:
                        a, b = torch.cat((a[:32], a[64:])), torch.cat((b[:32], b[64:]))
                    else:
                        self.assertLessEqual(rel_err(b.grad, a.grad), TOL, "%s %d" % (n, step))
                    self.assertLessEqual(rel_err(b, a), TOL, "%s step %d" % (n, step))

    def test_parameters_share_one_buffer(self):
        """The parameters are views of one flat tensor (passed to C by
        pointer): an in-place change is seen by the next forward without
        any copy, and load_state_dict keeps the sharing."""
        torch.manual_seed(1)
        ref = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        mine = at.from_torch(ref)
        ptrs = {p.storage().data_ptr() for p in mine.parameters()}
        self.assertEqual(len(ptrs), 1)
        x = torch.randn(1, 5, 16)
        with torch.no_grad():
            ref.linear1.weight.mul_(-2)
            mine.linear1.weight.mul_(-2)
        self.assertLessEqual(rel_err(mine(x), ref(x)), TOL)
        mine.load_state_dict(ref.state_dict())
        self.assertEqual({p.storage().data_ptr() for p in mine.parameters()}, ptrs)

    def test_replaced_parameter(self):
        """A Parameter replaced by a new one is gathered into the flat buffer
        at the next forward (the module keeps working, gradients land in it)."""
        torch.manual_seed(2)
        ref = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        mine = at.from_torch(ref)
        new = torch.randn(32, 16)
        ref.linear1.weight = torch.nn.Parameter(new.clone())
        mine.linear1.weight = torch.nn.Parameter(new.clone())
        x, w = torch.randn(2, 5, 16), torch.randn(2, 5, 16)
        (ref(x) * w).sum().backward()  # not y**2: LayerNorm makes that gradient ~0
        (mine(x) * w).sum().backward()
        self.assertLessEqual(rel_err(mine.linear1.weight.grad, ref.linear1.weight.grad), TOL)
        self.assertEqual(len({p.storage().data_ptr() for p in mine.parameters()}), 1)

    def test_two_forwards_then_backward(self):
        """Two pending forwards (two saved activations) and retain_graph."""
        torch.manual_seed(3)
        mine = at.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        x1, x2 = torch.randn(2, 5, 16), torch.randn(1, 7, 16)
        g1 = torch.autograd.grad(mine(x1).sum(), list(mine.parameters()))
        g2 = torch.autograd.grad(mine(x2).sum(), list(mine.parameters()))
        loss = mine(x1).sum() + mine(x2).sum()
        g = torch.autograd.grad(loss, list(mine.parameters()), retain_graph=True)
        again = torch.autograd.grad(loss, list(mine.parameters()))
        for a, b, c, d in zip(g, g1, g2, again):
            self.assertLessEqual(rel_err(a, b + c), TOL)
            self.assertTrue(torch.equal(a, d))

    def test_deepcopy(self):
        torch.manual_seed(4)
        mine = at.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        other = copy.deepcopy(mine)
        x = torch.randn(2, 5, 16)
        self.assertTrue(torch.equal(mine(x), other(x)))
        with torch.no_grad():
            other.norm2.weight.mul_(2)
        self.assertFalse(torch.equal(mine(x), other(x)))


@needs_torch
class Dropout(unittest.TestCase):
    def layer(self):
        torch.manual_seed(5)
        return at.TransformerEncoderLayer(16, 2, 32, dropout=0.25, batch_first=True,
                                          activation="gelu", norm_first=True)

    def test_repeatable_under_manual_seed(self):
        m, x = self.layer(), torch.randn(2, 9, 16)
        torch.manual_seed(11)
        a = m(x)
        torch.manual_seed(11)
        b = m(x)
        c = m(x)
        m.eval()
        d = m(x)
        self.assertTrue(torch.equal(a, b))
        self.assertFalse(torch.equal(a, c))
        self.assertFalse(torch.equal(a, d))

    def test_gradient_by_finite_differences(self):
        """With the masks fixed (same seed), the directional derivative of
        sum(out * w) along random directions of src and of linear1.weight
        equals <gradient, direction> within 1e-2 (f32 central differences)."""
        m = self.layer()
        x, w = torch.randn(2, 9, 16, dtype=torch.float32), torch.randn(2, 9, 16)

        def f(xx):
            torch.manual_seed(12)
            return (m(xx) * w).sum()

        xg = x.clone().requires_grad_()
        loss = f(xg)
        loss.backward()
        g = torch.Generator().manual_seed(6)
        dx = torch.randn(x.shape, generator=g)
        dw = torch.randn(m.linear1.weight.shape, generator=g)
        eps = 1e-2
        with torch.no_grad():
            num_x = (f(x + eps * dx) - f(x - eps * dx)) / (2 * eps)
            w1 = m.linear1.weight
            w1.add_(eps * dw)
            up = f(x)
            w1.sub_(2 * eps * dw)
            down = f(x)
            w1.add_(eps * dw)
        for num, ana in ((num_x, (xg.grad * dx).sum()), ((up - down) / (2 * eps),
                                                         (m.linear1.weight.grad * dw).sum())):
            self.assertLessEqual(abs(num.item() - ana.item()), 1e-2 * max(1.0, abs(ana.item())))


@needs_torch
class BadInput(unittest.TestCase):
    def refused(self, words, fn, *a, **kw):
        with self.assertRaises(attn.Error) as cm:
            fn(*a, **kw)
        for word in words:
            self.assertIn(word, str(cm.exception))

    def test_refusals(self):
        m = at.TransformerEncoderLayer(16, 2, 32, batch_first=True)
        x = torch.randn(2, 5, 16)
        self.refused(["src", "float64"], m, x.double())
        self.refused(["src", "float16"], m, x.half())
        self.refused(["src", "shape"], m, torch.randn(2, 5, 8))
        self.refused(["src_mask", "shape"], m, x, src_mask=torch.zeros(4, 4, dtype=torch.bool))
        self.refused(["src_key_padding_mask"], m, x,
                     src_key_padding_mask=torch.zeros(2, 5, requires_grad=True))
        self.refused(["src_mask", "dtype"], m, x, src_mask=torch.zeros(5, 5, dtype=torch.int32))
        self.refused(["activation"], at.TransformerEncoderLayer, 16, 2, activation=torch.tanh)
        self.refused(["multiple of nhead"], at.TransformerEncoderLayer, 16, 3)
        self.refused(["dtype"], at.TransformerEncoderLayer, 16, 2, dtype=torch.float64)
        self.refused(["precision"], at.TransformerEncoderLayer, 16, 2, precision="f16")
        self.refused(["TransformerEncoderLayer"], at.from_torch, torch.nn.Linear(2, 2))
        m.double()
        self.refused(["float32"], m, x.double())


if __name__ == "__main__":
    unittest.main()
