"""attn.load_layer on the golden layer files of tests/golden (exported from
PyTorch modules by tools/gen_golden.py): outputs and gradients equal to
PyTorch's within 1e-5 of max |ref| (f32), and bad input refused."""
import glob
import os
import unittest

import numpy as np

import attn

TOL = 1e-5
GOLDEN = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "tests", "golden")
FILES = sorted(glob.glob(os.path.join(GOLDEN, "nn_*.safetensors")))


def rel_err(got, want):
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))


@unittest.skipUnless(FILES, "tests/golden/nn_*.safetensors not here (installed package)")
class GoldenLayers(unittest.TestCase):
    def test_every_golden_layer(self):
        for path in FILES:
            with self.subTest(os.path.basename(path)):
                tensors, _ = attn.load_safetensors(path)
                layer = attn.load_layer(path)
                inputs = {n: tensors[n] for n in layer.input_names() if n in tensors}
                if "x" in tensors:
                    inputs = {"x": tensors["x"]}
                res = layer.run(inputs, dout=tensors.get("dout"))
                self.assertLessEqual(rel_err(res["out"], tensors["out"]), TOL)
                grads = [n for n in tensors if n.startswith("grad.")]
                for n in grads:
                    if n.endswith("key.bias"):
                        # q·(k + b) shifts a whole row of logits: the true gradient
                        # is 0 and PyTorch's is rounding noise (tests/test_nn_modules.c)
                        self.assertLess(np.abs(res[n]).max(), TOL, n)
                        continue
                    self.assertLessEqual(rel_err(res[n], tensors[n]), TOL, n)

    def test_forward_takes_the_main_input_by_position(self):
        path = os.path.join(GOLDEN, "nn_encoder_post_relu.safetensors")
        tensors, _ = attn.load_safetensors(path)
        layer = attn.load_layer(path)
        self.assertEqual(layer.kind, "encoder")
        self.assertIn("self_attn.in_proj_weight", layer.params)
        self.assertNotIn("src", layer.params)
        out = layer.forward(tensors["src"])
        self.assertLessEqual(rel_err(out, tensors["out"]), TOL)
        np.testing.assert_array_equal(layer(tensors["src"], backend="math"),
                                      layer.forward(tensors["src"], backend="math"))


class BadLayerInput(unittest.TestCase):
    def test_missing_file_names_it(self):
        with self.assertRaises(attn.Error) as c:
            attn.load_layer("/nonexistent/layer.safetensors")
        self.assertIn("/nonexistent/layer.safetensors", str(c.exception))

    @unittest.skipUnless(FILES, "no golden files")
    def test_wrong_shape_and_unknown_input(self):
        path = os.path.join(GOLDEN, "nn_encoder_post_relu.safetensors")
        layer = attn.load_layer(path)
        src = attn.load_safetensors(path)[0]["src"]
        with self.assertRaises(attn.Error) as c:
            layer.forward(src[:, :, :3])
        self.assertIn("src", str(c.exception))
        with self.assertRaises(attn.Error) as c:
            layer.forward(src, memory=src)
        self.assertIn("memory", str(c.exception))


if __name__ == "__main__":
    unittest.main()
