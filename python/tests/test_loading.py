"""Where the package finds libattn.so: $ATTN_LIB, the build tree, or the
installed tree (PREFIX/lib next to PREFIX/lib/python3/dist-packages/attn)."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import attn

PKG = os.path.dirname(os.path.abspath(attn.__file__))


def run_python(code, env_extra, cwd):
    env = {k: v for k, v in os.environ.items() if k not in ("ATTN_LIB", "ATTN_BIN", "PYTHONPATH")}
    env.update(env_extra)
    r = subprocess.run([sys.executable, "-B", "-c", code], cwd=cwd, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return r.returncode, r.stdout.decode()


class Loading(unittest.TestCase):
    def test_installed_tree(self):
        with tempfile.TemporaryDirectory() as prefix:
            site = os.path.join(prefix, "lib", "python3", "dist-packages")
            shutil.copytree(PKG, os.path.join(site, "attn"),
                            ignore=shutil.ignore_patterns("__pycache__"))
            lib = os.path.join(prefix, "lib", "libattn.so.0")
            shutil.copy(attn.library_path, lib)
            rc, out = run_python("import attn, numpy as np\n"
                                 "q = np.ones((2, 4), np.float32)\n"
                                 "print(attn.library_path, attn.sdpa(q, q, q)[0, 0])",
                                 {"PYTHONPATH": site}, prefix)
            self.assertEqual(rc, 0, out)
            self.assertEqual(out.split(), [lib, "1.0"])

    def test_attn_lib_overrides_and_a_missing_one_is_named(self):
        with tempfile.TemporaryDirectory() as d:
            rc, out = run_python("import attn", {"PYTHONPATH": os.path.dirname(PKG),
                                                 "ATTN_LIB": "/nonexistent/libattn.so"}, d)
            self.assertNotEqual(rc, 0)
            self.assertIn("ATTN_LIB=/nonexistent/libattn.so: no such file", out)
            rc, out = run_python("import attn; print(attn.library_path)",
                                 {"PYTHONPATH": os.path.dirname(PKG),
                                  "ATTN_LIB": attn.library_path}, d)
            self.assertEqual((rc, out.strip()), (0, attn.library_path))

    def test_only_public_functions_are_called(self):
        # libattn.so exports only what include/ declares (hidden visibility)
        from attn import _lib
        root = os.path.dirname(os.path.dirname(PKG))
        inc = os.path.join(root, "include")
        if not os.path.isdir(inc):
            self.skipTest("include/ not here (installed package)")
        text = ""
        for dirpath, _, files in os.walk(inc):
            for f in files:
                with open(os.path.join(dirpath, f), encoding="utf-8") as fh:
                    text += fh.read()
        for name in _lib._PROTOS:
            self.assertRegex(text, r"\b%s\(" % name, name)


if __name__ == "__main__":
    unittest.main()
