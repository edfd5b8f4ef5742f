"""Safetensors round trips through libattn, and the viz / diagnose entry
points on arrays (run through the attn tool)."""
import json
import os
import tempfile
import unittest

import numpy as np

import attn
from attn import _lib


class Safetensors(unittest.TestCase):
    def test_round_trip(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "t.safetensors")
            t = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "m": np.array([True, False]),
                 "i": np.array([1, -2], np.int64), "h": np.array([0.5], np.float64)}
            attn.save_safetensors(t, p, {"kind": "x", "n": 3})
            back, meta = attn.load_safetensors(p)
        self.assertEqual(meta, {"kind": "x", "n": "3"})
        for n in ("a", "m", "i"):
            self.assertEqual(back[n].dtype, t[n].dtype)
            np.testing.assert_array_equal(back[n], t[n])
        self.assertEqual(back["h"].dtype, np.float32)

    def test_refuses_object_arrays(self):
        with self.assertRaises(attn.Error) as c:
            attn.save_safetensors({"s": np.array(["x"])}, "/tmp/never.safetensors")
        self.assertIn("s:", str(c.exception))


def diagonal(n=6, heads=1):
    return np.broadcast_to(np.eye(n, dtype=np.float32), (heads, n, n)).copy()


def previous(n=6):
    w = np.zeros((n, n), np.float32)
    w[0, 0] = 1
    w[np.arange(1, n), np.arange(n - 1)] = 1
    return w


@unittest.skipUnless(_lib.tool_path(), "the attn tool was not found")
class Tools(unittest.TestCase):
    def test_diagnose_names_the_patterns(self):
        w = np.stack([diagonal()[0], previous()])
        d = attn.diagnose(w, tokens=list("abcdef"))
        self.assertEqual([h["pattern"] for h in d.heads], ["diagonal", "previous-token"])
        self.assertEqual([(h["layer"], h["head"]) for h in d.heads], [(0, 0), (0, 1)])
        self.assertAlmostEqual(d.heads[0]["diag"], 1.0)
        self.assertIn("previous-token", str(d))

    def test_diagnose_reads_the_table_only(self):
        # two of four heads nearly uniform: the advice under the table starts
        # "2 of 4 head(s) ...", which is no table row
        n = 6
        u = np.tril(np.ones((n, n), np.float32))
        u /= u.sum(-1, keepdims=True)
        w = np.stack([u, u, diagonal(n)[0], previous(n)])
        d = attn.diagnose(w, list("abcdef"))
        self.assertIn("2 of 4 head(s)", str(d))
        self.assertEqual([h["pattern"] for h in d.heads],
                         ["uniform", "uniform", "diagonal", "previous-token"])

    def test_heatmap_writes_a_picture(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "a.png")
            try:
                attn.viz.heatmap(previous(), list("abcdef"), p, title="prev")
            except attn.Error as e:
                if "cairo" in str(e):
                    self.skipTest("built without cairo: " + str(e))
                raise
            with open(p, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
            attn.viz.heads(diagonal(heads=3), None, os.path.join(d, "h.svg"), cmap="viridis")
            attn.viz.html(diagonal(heads=2)[None], list("abcdef"), os.path.join(d, "v.html"))
            with open(os.path.join(d, "v.html"), encoding="utf-8") as f:
                self.assertIn(json.dumps("abcdef"[1])[1:-1], f.read())

    def test_byte_tokens_labelled_by_character_and_merged(self):
        # 会 (e4 bc 9a) and 议 (e8 ae ae) cut over byte-level tokens; token 2
        # holds the end of one and the start of the other
        toks = [b"Hi", b" \xe4\xbc", b"\x9a\xe8\xae", b"\xae", b"!"]
        w = np.array([[.5, .2, .1, .1, .1], [.1, .4, .3, .1, .1], [.2, .2, .2, .2, .2],
                      [0, 0, .3, .6, .1], [.25, .25, 0, 0, .5]], np.float32)
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "t.html")
            attn.viz.html(w[None, None], toks, p)
            with open(p, encoding="utf-8") as f:
                page = f.read()
            for label in ("\u2423\u4f1a\u00b7", "\u00b7\u4f1a\u8bae\u00b7", "\u00b7\u8bae"):
                self.assertIn(json.dumps(label, ensure_ascii=False), page)
            self.assertNotIn("\\\\xE4", page)
            p = os.path.join(d, "w.html")
            attn.viz.html(w[None, None], toks, p, merge="words")
            with open(p, encoding="utf-8") as f:
                page = f.read()
            self.assertIn('["Hi","\u4f1a","\u8bae","!"]', page)
            self.assertIn("words (from 5 tokens)", page)
            try:  # a picture of the characters; str tokens count as their UTF-8
                attn.viz.heatmap(w, toks, os.path.join(d, "c.svg"), merge="chars")
                attn.viz.heatmap(w, list("abcde"), os.path.join(d, "s.svg"), merge="words")
            except attn.Error as e:
                if "cairo" in str(e):
                    self.skipTest("built without cairo: " + str(e))
                raise
        with self.assertRaises(ValueError) as c:
            attn.viz.heatmap(w, toks, "/tmp/never.png", merge="sentences")
        self.assertIn("'chars' or 'words'", str(c.exception))
        with self.assertRaises(attn.Error):
            attn.viz.heatmap(w, [1, 2, 3, 4, 5], "/tmp/never.png")

    def test_bad_input(self):
        with self.assertRaises(attn.Error) as c:
            attn.viz.heatmap(previous(), list("abc"), "/tmp/never.png")
        self.assertIn("tokens", str(c.exception))
        with self.assertRaises(attn.Error) as c:
            attn.viz.heatmap(diagonal(heads=2), None, "/tmp/never.png", head=7)
        self.assertIn("head 7", str(c.exception))
        with self.assertRaises(attn.Error):
            attn.diagnose(np.zeros(5, np.float32))
        with self.assertRaises(attn.Error):
            attn.diagnose(previous(), causal="maybe")

    def test_tool_messages_are_said_once(self):
        # the tool's "attn viz: FILE: reason" comes through with one prefix,
        # and no temporary file's path
        with self.assertRaises(attn.Error) as c:
            attn.viz.heatmap(previous(), None, "x.jpg")
        msg = str(c.exception)
        self.assertTrue(msg.startswith("attn viz: x.jpg: "), msg)
        self.assertEqual(msg.count("attn viz:"), 1, msg)
        with self.assertRaises(attn.Error) as c:
            attn.viz.heatmap(diagonal(heads=2), None, "/tmp/never.png", head=7)
        msg = str(c.exception)
        self.assertEqual(msg.count("attn viz:"), 1, msg)
        self.assertNotIn("attn-py-", msg)
        self.assertNotIn(".safetensors", msg)

    def test_diagnose_header_names_the_weights_not_a_temporary_file(self):
        d = attn.diagnose(previous(), list("abcdef"))
        first = str(d).splitlines()[0]
        self.assertTrue(first.startswith("weights: 1 layer(s) x 1 head(s), Lq 6, Lk 6"), first)
        self.assertNotIn("attn-py-", str(d))
        self.assertNotIn(tempfile.gettempdir() + os.sep, str(d))


if __name__ == "__main__":
    unittest.main()
