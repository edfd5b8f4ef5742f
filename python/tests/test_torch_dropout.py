"""attn.torch.scaled_dot_product_attention(..., dropout_p=p): the flash
kernels' attention dropout against torch's formula with the same keep mask
(read from the library, attn_sdpa_dropout_mask, under the seed the op drew
from torch's generator): softmax(q kᵀ scale + mask) * keep / (1 - p) v in
float64 autograd, outputs and gradients within 1e-5 of max |ref|; repeatable
under torch.manual_seed; p = 0 as no dropout; bf16 through the f32 kernels;
the packed op and SDPAEncoderLayer (training mode only) take it too."""
import math
import unittest

import attn
from test_torch_op import HAVE_TORCH, TOL, needs_torch, rel_err

if HAVE_TORCH:
    import torch
    import attn.torch as at
    from attn import _desc


def seed_of_next_call(s):
    """The seed the op draws right after torch.manual_seed(s)."""
    torch.manual_seed(s)
    return int(torch.randint(0, 2 ** 62, (1,)).item())


def keep_mask(B, H, L, S, p, seed):
    d = _desc.new_desc(B, H, H, L, S, 1, 1)
    d.dropout_p, d.dropout_seed = p, seed
    m = torch.empty(B, H, L, S, dtype=torch.uint8)
    for b in range(B):
        for h in range(H):
            _desc.dropout_mask(d, b, h, m[b, h].data_ptr())
    return m.bool()


def dropped_sdpa(q, k, v, keep, p, attn_mask=None, is_causal=False):
    q, k, v = (t.double() for t in (q, k, v))
    L, S = q.shape[-2], k.shape[-2]
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if is_causal:
        s = s.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), float("-inf"))
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, float("-inf"))
    return (torch.softmax(s, -1) * keep / (1 - p)) @ v


@needs_torch
class OpDropout(unittest.TestCase):
    def check(self, B, H, L, S, E, p, **kw):
        g = torch.Generator().manual_seed(B * 100 + L)
        q, k, v = (torch.randn(B, H, n, E, generator=g) for n in (L, S, S))
        do = torch.randn(B, H, L, E, generator=g)
        mine = [t.clone().requires_grad_() for t in (q, k, v)]
        ref = [t.double().requires_grad_() for t in (q, k, v)]
        torch.manual_seed(3)
        out = at.scaled_dot_product_attention(*mine, dropout_p=p, **kw)
        keep = keep_mask(B, H, L, S, p, seed_of_next_call(3))
        want = dropped_sdpa(*ref, keep, p, **kw)
        out.backward(do)
        want.backward(do.double())
        self.assertLessEqual(rel_err(out, want), TOL)
        for a, b in zip(mine, ref):
            self.assertLessEqual(rel_err(a.grad, b.grad), TOL)
        # the mask matters: without it the output is another one
        self.assertGreater(rel_err(out, dropped_sdpa(*ref, torch.ones_like(keep), 0.0, **kw)), 1e-2)

    def test_against_formula_with_the_same_mask(self):
        self.check(2, 3, 70, 90, 16, 0.2)

    def test_causal(self):
        self.check(1, 2, 130, 130, 32, 0.1, is_causal=True)

    def test_bool_mask(self):
        m = torch.rand(50, 60, generator=torch.Generator().manual_seed(1)) > 0.3
        self.check(2, 2, 50, 60, 8, 0.5, attn_mask=m)

    def test_repeatable_under_manual_seed_and_p0(self):
        q = torch.randn(2, 2, 33, 16)
        torch.manual_seed(4)
        a = at.scaled_dot_product_attention(q, q, q, dropout_p=0.3)
        torch.manual_seed(4)
        b = at.scaled_dot_product_attention(q, q, q, dropout_p=0.3)
        c = at.scaled_dot_product_attention(q, q, q, dropout_p=0.3)
        self.assertTrue(torch.equal(a, b))
        self.assertFalse(torch.equal(a, c))
        self.assertTrue(torch.equal(at.scaled_dot_product_attention(q, q, q, dropout_p=0.0),
                                    at.scaled_dot_product_attention(q, q, q)))

    def test_bf16_runs_the_f32_kernels(self):
        q = torch.randn(1, 2, 20, 8).bfloat16().requires_grad_()
        torch.manual_seed(5)
        out = at.scaled_dot_product_attention(q, q, q, dropout_p=0.25)
        self.assertEqual(out.dtype, torch.bfloat16)
        torch.manual_seed(5)
        f = at.scaled_dot_product_attention(*(q.detach().float(),) * 3, dropout_p=0.25)
        self.assertTrue(torch.equal(out, f.bfloat16()))
        out.sum().backward()
        self.assertEqual(q.grad.dtype, torch.bfloat16)

    def test_packed_op_draws_the_same(self):
        qkv = torch.randn(2, 17, 3, 2, 8)
        torch.manual_seed(6)
        a = at.sdpa_qkvpacked(qkv, dropout_p=0.4, is_causal=True)
        q, k, v = (t.transpose(1, 2) for t in qkv.unbind(2))
        torch.manual_seed(6)
        b = at.scaled_dot_product_attention(q, k, v, dropout_p=0.4, is_causal=True)
        self.assertLessEqual(rel_err(a, b.transpose(1, 2)), TOL)

    def test_bad_p_refused(self):
        q = torch.randn(1, 2, 4, 8)
        for p in (-0.1, 1.0, float("nan"), "0.1"):
            with self.assertRaisesRegex(attn.Error, "dropout_p"):
                at.scaled_dot_product_attention(q, q, q, dropout_p=p)
            with self.assertRaisesRegex(attn.Error, "dropout_p"):
                at.sdpa_qkvpacked(torch.randn(2, 9, 3, 4, 8), dropout_p=p)


@needs_torch
class EncoderLayerDropout(unittest.TestCase):
    def test_attention_dropout_in_training_only(self):
        torch.manual_seed(7)
        m = at.SDPAEncoderLayer(16, 2, 32, dropout=0.3)
        x = torch.randn(2, 9, 16)
        m.eval()
        e1 = m(x)
        m.dropout_p = 0.0
        self.assertTrue(torch.equal(e1, m(x)))  # eval: no attention dropout
        m.train()
        m.dropout.p = m.dropout1.p = m.dropout2.p = 0.0  # only the attention's
        a = m(x)
        m.dropout_p = 0.3
        torch.manual_seed(8)
        b = m(x)
        torch.manual_seed(8)
        c = m(x)
        self.assertTrue(torch.equal(b, c))
        self.assertFalse(torch.allclose(a, b))

    def test_attn_layer_runs_attention_dropout(self):
        """attn.torch.TransformerEncoderLayer with dropout only on the
        attention probabilities (from_torch keeps one p, so through the
        library's layer config): training output differs from eval."""
        torch.manual_seed(9)
        m = at.TransformerEncoderLayer(16, 2, 32, dropout=0.2, batch_first=True)
        x = torch.randn(2, 9, 16)
        torch.manual_seed(1)
        a = m(x)
        torch.manual_seed(1)
        b = m(x)
        self.assertTrue(torch.equal(a, b))
        m.eval()
        self.assertFalse(torch.allclose(a, m(x)))


if __name__ == "__main__":
    unittest.main()
