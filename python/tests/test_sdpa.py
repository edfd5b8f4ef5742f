"""attn.sdpa / attn.sdpa_backward on numpy arrays against the float64
formula (reference.py). f32 tolerance: max |got - ref| <= 1e-5 of max |ref|
(flash and math accumulate in f32; seen ~1e-7). bf16: 2e-2 of max |ref|
against the formula on the bf16-rounded inputs (P and dS rounded to bf16,
include/attn/sdpa_bf16.h)."""
import ctypes
import os
import re
import unittest

import numpy as np

import attn
from attn import _desc
import reference as ref

TOL = 1e-5
TOL_BF16 = 2e-2
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def rand(*shape, seed=0):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape).astype(np.float32)


def qkv(B=2, H=4, Hkv=4, Lq=9, Lk=11, D=16, Dv=8):
    return rand(B, H, Lq, D, seed=1), rand(B, Hkv, Lk, D, seed=2), rand(B, Hkv, Lk, Dv, seed=3)


class Forward(unittest.TestCase):
    def check(self, q, k, v, backends=("auto", "flash", "math"), **opts):
        want, want_lse, _ = ref.sdpa(q, k, v, **opts)
        for b in backends:
            out, lse = attn.sdpa(q, k, v, backend=b, return_lse=True, **opts)
            self.assertEqual(out.dtype, np.float32)
            self.assertLessEqual(ref.max_rel_err(out, want), TOL, b)
            fin = np.isfinite(want_lse)
            self.assertTrue(np.array_equal(np.isfinite(lse), fin), b)
            self.assertLessEqual(ref.max_rel_err(lse[fin], want_lse[fin]), TOL, b)

    def test_plain(self):
        self.check(*qkv())

    def test_grouped_query_heads(self):
        self.check(*qkv(H=6, Hkv=2))

    def test_causal_and_offsets(self):
        self.check(*qkv(Lq=9, Lk=9), causal=True)
        self.check(*qkv(Lq=4, Lk=11), causal=True, q_offset=7)

    def test_window(self):
        self.check(*qkv(), window=2)
        self.check(*qkv(), window=(3, 0), causal=True)

    def test_scale(self):
        self.check(*qkv(), scale=0.05)

    def test_bool_mask_true_attends_and_broadcasts(self):
        q, k, v = qkv()
        m = np.random.default_rng(5).random((9, 11)) > 0.4
        m[:, 0] = True
        self.check(q, k, v, mask=m)
        self.check(q, k, v, mask=m[None, None, :, :] | np.zeros((2, 1, 1, 1), bool))

    def test_float_mask_added(self):
        q, k, v = qkv()
        self.check(q, k, v, mask=rand(1, 4, 9, 11, seed=9))

    def test_fully_masked_row_gives_zero_and_minus_inf(self):
        q, k, v = qkv()
        m = np.ones((9, 11), bool)
        m[3] = False
        out, lse = attn.sdpa(q, k, v, mask=m, return_lse=True)
        self.assertTrue((out[:, :, 3] == 0).all())
        self.assertTrue(np.isneginf(lse[:, :, 3]).all())

    def test_key_lens(self):
        self.check(*qkv(), key_lens=[11, 5])

    def test_ranks_2_and_3(self):
        q, k, v = qkv(B=1, H=1, Hkv=1)
        want = attn.sdpa(q, k, v)
        self.assertEqual(attn.sdpa(q[0], k[0], v[0]).shape, (1, 9, 8))
        np.testing.assert_array_equal(attn.sdpa(q[0, 0], k[0, 0], v[0, 0]), want[0, 0])

    def test_strided_views_read_in_place(self):
        # a [B, L, H, D] projection viewed as [B, H, L, D]: the same result as a copy
        x = rand(2, 9, 4, 16, seed=4)
        view = x.transpose(0, 2, 1, 3)
        self.assertFalse(view.flags.c_contiguous)
        np.testing.assert_array_equal(attn.sdpa(view, view, view),
                                      attn.sdpa(*(np.ascontiguousarray(view),) * 3))

    def test_float32_inputs_and_masks_are_not_copied(self):
        from attn._sdpa import _problem
        x = rand(2, 9, 4, 16, seed=4)
        view = x.transpose(0, 2, 1, 3)
        m = np.ones((9, 9), bool)
        p = _problem(view, view, view, mask=m)
        self.assertTrue(np.shares_memory(p.q, x) and np.shares_memory(p.k, x))
        self.assertEqual(p.desc.bool_mask, m.ctypes.data)
        self.assertEqual(list(p.desc.bool_mask_stride), [0, 0, 9, 1])
        self.assertFalse(np.shares_memory(_problem(x[..., ::2], x[..., ::2], x[..., ::2]).q, x))

    def test_non_contiguous_last_dim_and_float64_are_converted(self):
        q, k, v = qkv()
        wide = np.repeat(q, 2, axis=-1)[..., ::2]
        np.testing.assert_array_equal(attn.sdpa(wide, k, v), attn.sdpa(q, k, v))
        self.assertLessEqual(ref.max_rel_err(attn.sdpa(q.astype(np.float64), k, v),
                                             attn.sdpa(q, k, v)), 0)

    def test_probs(self):
        q, k, v = qkv()
        out, probs = attn.sdpa(q, k, v, causal=True, backend="math", return_probs=True)
        _, _, want = ref.sdpa(q[:, :, :, :], k, v, causal=True)
        self.assertLessEqual(ref.max_rel_err(probs, want), TOL)

    def test_alibi_matches_explicit_bias(self):
        q, k, v = qkv(H=4, Lq=6, Lk=6)
        slopes = 2.0 ** (-8.0 * np.arange(1, 5) / 4)
        dist = -np.abs(np.arange(6)[:, None] - np.arange(6)[None, :])
        bias = (slopes[:, None, None] * dist).astype(np.float32)[None]
        want = attn.sdpa(q, k, v, mask=bias)
        self.assertLessEqual(ref.max_rel_err(attn.sdpa(q, k, v, alibi=True), want), TOL)
        self.assertLessEqual(ref.max_rel_err(attn.sdpa(q, k, v, alibi=slopes), want), TOL)

    def test_prefix_lm_matches_the_flex_attention_mask(self):
        # FlexAttention's prefix-LM: or_masks(kv_idx < prefix[b], causal), as a bool mask
        q, k, v = qkv(B=2, Lq=10, Lk=10)
        prefix = np.array([4, 0])
        j, i = np.arange(10)[None, :], np.arange(10)[:, None]
        m = (j <= i)[None, None] | (j[None, None] < prefix[:, None, None, None])
        want, want_lse, _ = ref.sdpa(q, k, v, mask=m)
        dout = rand(2, 4, 10, 8, seed=9)
        wg = ref.sdpa_backward(q, k, v, dout, mask=m)
        for b in ("auto", "flash", "math"):
            out, lse = attn.sdpa(q, k, v, causal=True, prefix_lens=prefix, backend=b,
                                 return_lse=True)
            self.assertLessEqual(ref.max_rel_err(out, want), TOL, b)
            self.assertLessEqual(ref.max_rel_err(lse, want_lse), TOL, b)
            g = attn.sdpa_backward(q, k, v, out, lse, dout, causal=True, prefix_lens=prefix,
                                   backend=b)
            for x, w in zip(g, wg):
                self.assertLessEqual(ref.max_rel_err(x, w), TOL, b)
        # the prefix matters (so the test above can fail)
        self.assertGreater(np.abs(attn.sdpa(q, k, v, causal=True) - want).max(), 1e-2)

    def test_peer_spellings(self):
        q, k, v = qkv()
        base = attn.sdpa(q, k, v, causal=True, window=(3, None))
        np.testing.assert_array_equal(attn.sdpa(q, k, v, is_causal=True, window_size=(3, -1)), base)
        capped = attn.sdpa(q, k, v, softcap=2.0)
        np.testing.assert_array_equal(attn.sdpa(q, k, v, logit_softcap=2.0), capped)
        self.assertGreater(np.abs(capped - attn.sdpa(q, k, v)).max(), 1e-3)

    def test_block_mask_matches_dense_mask(self):
        q, k, v = qkv(Lq=8, Lk=8)
        blocks = np.array([[1, 0], [1, 1]], np.uint8)
        dense = np.kron(blocks, np.ones((4, 4))).astype(bool)
        np.testing.assert_allclose(attn.sdpa(q, k, v, block_mask=blocks, block_size=4),
                                   attn.sdpa(q, k, v, mask=dense), rtol=0, atol=1e-6)

    def test_bf16(self):
        q, k, v = qkv()
        r = [attn._arrays.bf16_to_float32(attn._arrays.bf16_bits("x", a)) for a in (q, k, v)]
        want, _, _ = ref.sdpa(*r, causal=True)
        out = attn.sdpa(q, k, v, causal=True, precision="bf16")
        self.assertLessEqual(ref.max_rel_err(out, want), TOL_BF16)


class Backward(unittest.TestCase):
    def check(self, q, k, v, backends=("auto", "flash", "math"), **opts):
        dout = rand(*(q.shape[:-1] + (v.shape[-1],)), seed=7)
        want = ref.sdpa_backward(q, k, v, dout, **opts)
        for b in backends:
            out, lse = attn.sdpa(q, k, v, backend=b, return_lse=True, **opts)
            got = attn.sdpa_backward(q, k, v, out, lse, dout, backend=b, **opts)
            for name, g, w in zip("qkv", got, want):
                self.assertEqual(g.shape, w.shape)
                self.assertLessEqual(ref.max_rel_err(g, w), TOL, "%s d%s" % (b, name))

    def test_plain(self):
        self.check(*qkv())

    def test_gqa_causal_mask_scale(self):
        q, k, v = qkv(H=4, Hkv=2, Lq=11, Lk=11)
        m = np.random.default_rng(3).random((11, 11)) > 0.3
        np.fill_diagonal(m, True)
        self.check(q, k, v, mask=m, causal=True, scale=0.3)

    def test_float_mask_and_key_lens(self):
        q, k, v = qkv()
        self.check(q, k, v, mask=rand(2, 1, 9, 11, seed=8), key_lens=[7, 11])

    def test_bf16(self):
        q, k, v = qkv(H=4, Hkv=2)
        r = [attn._arrays.bf16_to_float32(attn._arrays.bf16_bits("x", a)) for a in (q, k, v)]
        dout = rand(2, 4, 9, 8, seed=12)
        want = ref.sdpa_backward(*r, dout, causal=True)
        out, lse = attn.sdpa(q, k, v, causal=True, precision="bf16", return_lse=True)
        got = attn.sdpa_backward(q, k, v, out, lse, dout, causal=True, precision="bf16")
        for name, g, w in zip("qkv", got, want):
            self.assertLessEqual(ref.max_rel_err(g, w), TOL_BF16, "d" + name)

    def test_learned_table_gradients_returned(self):
        q, k, v = qkv(Lq=6, Lk=6)
        rb = rand(4, 8, seed=11)
        out, lse = attn.sdpa(q, k, v, rel_bias=rb, rel_max_distance=16, return_lse=True)
        g = attn.sdpa_backward(q, k, v, out, lse, np.ones_like(out), rel_bias=rb,
                               rel_max_distance=16)
        self.assertEqual(g.rel_bias.shape, (4, 8))
        self.assertTrue(np.isfinite(g.rel_bias).all() and np.abs(g.rel_bias).sum() > 0)
        self.assertIsNone(g.shaw_k)


class BadInput(unittest.TestCase):
    def assertRefused(self, words, fn, *a, **kw):
        with self.assertRaises(attn.Error) as c:
            fn(*a, **kw)
        for w in words:
            self.assertIn(w, str(c.exception))
        return c.exception

    def test_peer_spellings_must_agree(self):
        q, k, v = qkv()
        self.assertRefused(["disagree"], attn.sdpa, q, k, v, causal=True, is_causal=False)
        self.assertRefused(["window_size", "both"], attn.sdpa, q, k, v, window=2,
                           window_size=(2, 2))
        self.assertRefused(["window_size"], attn.sdpa, q, k, v, window_size=3)
        self.assertRefused(["window_size", ">= -1"], attn.sdpa, q, k, v, window_size=(-3, 1))
        self.assertRefused(["disagree"], attn.sdpa, q, k, v, softcap=1.0, logit_softcap=2.0)

    def test_prefix_lens_refusals(self):
        q, k, v = qkv(B=2)
        self.assertRefused(["prefix_lens", "causal"], attn.sdpa, q, k, v, prefix_lens=[1, 2])
        self.assertRefused(["prefix_lens", "[2]"], attn.sdpa, q, k, v, causal=True,
                           prefix_lens=[1])
        self.assertRefused(["prefix_lens"], attn.sdpa, q, k, v, causal=True, prefix_lens=[1, 99])

    def test_wrong_dtype_names_the_argument(self):
        q, k, v = qkv()
        self.assertRefused(["k:", "int32"], attn.sdpa, q, k.astype(np.int32), v)

    def test_shape_mismatches(self):
        q, k, v = qkv()
        self.assertRefused(["head dim"], attn.sdpa, q, k[..., :5], v)
        self.assertRefused(["v:"], attn.sdpa, q, k, v[:, :, :3])
        self.assertRefused(["heads"], attn.sdpa, q, k[:, :3], v[:, :3])
        self.assertRefused(["dims"], attn.sdpa, q[0], k, v)
        self.assertRefused(["mask", "broadcast"], attn.sdpa, q, k, v, mask=np.ones((3, 3), bool))
        self.assertRefused(["key_lens"], attn.sdpa, q, k, v, key_lens=[1, 2, 3])
        out, lse = attn.sdpa(q, k, v, return_lse=True)
        self.assertRefused(["dout"], attn.sdpa_backward, q, k, v, out, lse, out[:1])

    def test_library_errors_carry_its_message(self):
        q, k, v = qkv()
        e = self.assertRefused(["backend"], attn.sdpa, q, k, v, backend="fast")
        self.assertEqual(e.status_name, "invalid argument")
        # a negative q_offset is FlashAttention's bottom-right alignment, but a
        # block-sparse layout needs positions >= 0: the library says so
        e = self.assertRefused(["q_offset", "block-sparse"], attn.sdpa, q, k, v, q_offset=-1,
                               block_mask=np.ones((1, 1), bool), block_size=64)
        self.assertEqual(e.status, 1)

    def test_bf16_on_the_math_backend_is_refused(self):
        self.assertRefused(["bf16"], attn.sdpa, *qkv(), precision="bf16", backend="math")


class Descriptor(unittest.TestCase):
    def test_fields_follow_the_header(self):
        header = os.path.join(ROOT, "include", "attn", "sdpa.h")
        if not os.path.exists(header):
            self.skipTest("include/attn/sdpa.h not here (installed package)")
        text = open(header).read()
        body = text[text.index("typedef struct {"):text.index("} attn_sdpa_desc;")]
        body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
        names = []
        for decl in body.split(";"):
            decl = decl.replace("typedef struct {", "").strip()
            if decl:  # "int64_t B, Hq" / "const float *add_mask" / "float *a, *b"
                parts = decl.split(",")
                first = parts[0].split("[")[0].split()[-1]
                names += [n.split("[")[0].strip().lstrip("*") for n in [first] + parts[1:]]
        self.assertEqual(names, [f[0] for f in _desc.SdpaDesc._fields_])

    def test_args_fields_follow_the_header(self):
        text = open(os.path.join(ROOT, "include", "attn", "sdpa.h")).read()
        body = text[text.rindex("typedef struct {"):text.index("} attn_sdpa_args;")]
        body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
        names = []
        for decl in body.replace("typedef struct {", "").split(";"):
            decl = decl.strip()
            if decl:
                parts = decl.split(",")
                names += [parts[0].split()[-1].lstrip("*")] + [p.strip().lstrip("*") for p in parts[1:]]
        self.assertEqual(names, [f[0] for f in _desc.SdpaArgs._fields_])

    def test_init_fills_the_structure(self):
        d = _desc.new_desc(1, 2, 1, 3, 4, 5, 6)
        self.assertEqual((d.B, d.Hq, d.Hkv, d.Lq, d.Lk, d.D, d.Dv), (1, 2, 1, 3, 4, 5, 6))
        self.assertEqual((d.window_left, d.window_right, d.has_scale), (-1, -1, 0))
        self.assertEqual(ctypes.sizeof(d) % 8, 0)


if __name__ == "__main__":
    unittest.main()
