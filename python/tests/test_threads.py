"""attn's thread count is its own: set_num_threads / get_num_threads,
$ATTN_NUM_THREADS, default the cores this process may use, and not changed
by another library's OpenMP setting (torch sets the shared libgomp pool to
its own count when imported: 1 on a 2-vCPU machine)."""
import os
import subprocess
import sys
import unittest

import attn

PKG_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(attn.__file__)))


def run_python(code, **env_extra):
    """(exit status, stdout + stderr) of code in a fresh interpreter that
    imports this attn (same library), without the thread variables unless
    given."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("ATTN_NUM_THREADS", "OMP_NUM_THREADS", "PYTHONPATH")}
    env["PYTHONPATH"] = PKG_PARENT
    env["ATTN_LIB"] = attn.library_path
    env.update(env_extra)
    r = subprocess.run([sys.executable, "-B", "-c", code], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT)
    return r.returncode, r.stdout.decode()


def have_torch():
    return run_python("import torch")[0] == 0


# Runs attn's flash attention on enough rows for `want` threads and prints
# how many OS threads the process gained during the call (libgomp starts its
# workers on the first parallel region that asks for them).
GAINED = """
import os, numpy as np, attn
def tasks():
    return len(os.listdir("/proc/self/task"))
q = np.random.default_rng(0).standard_normal((1, 8, 512, 64), dtype=np.float32)
before = tasks()
attn.sdpa(q, q, q, backend="flash")
print("gained", tasks() - before)
"""


class Threads(unittest.TestCase):
    def tearDown(self):
        attn.set_num_threads(0)

    def test_set_and_get(self):
        attn.set_num_threads(3)
        self.assertEqual(attn.get_num_threads(), 3)
        self.assertEqual(attn.num_threads(), 3)
        attn.set_num_threads(0)  # back to the default
        rc, out = run_python("import attn; print(attn.get_num_threads())")
        self.assertEqual(rc, 0, out)
        self.assertEqual(attn.get_num_threads(), int(out))

    def test_bad_counts_are_refused(self):
        for bad in (-1, 4097, 2.5, "x", True, None):
            with self.subTest(bad=bad), self.assertRaises(attn.Error) as c:
                attn.set_num_threads(bad)
            self.assertIn("expected an integer in [0, 4096]", str(c.exception))

    def test_default_is_the_cores_this_process_may_use(self):
        rc, out = run_python("import os, attn; "
                             "print(attn.get_num_threads(), len(os.sched_getaffinity(0)))")
        self.assertEqual(rc, 0, out)
        got, cores = map(int, out.split())
        self.assertEqual(got, cores)
        if cores > 1:  # one CPU of them (taskset's way, from inside)
            rc, out = run_python("import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
                                 "import attn; print(attn.get_num_threads())")
            self.assertEqual((rc, out.strip()), (0, "1"))

    def test_environment(self):
        rc, out = run_python("import attn; print(attn.get_num_threads())", ATTN_NUM_THREADS="3",
                             OMP_NUM_THREADS="5")
        self.assertEqual((rc, out.strip()), (0, "3"))
        rc, out = run_python("import attn; print(attn.get_num_threads())", OMP_NUM_THREADS="5,2")
        self.assertEqual((rc, out.strip()), (0, "5"))
        rc, out = run_python("import attn", ATTN_NUM_THREADS="lots")
        self.assertNotEqual(rc, 0)
        self.assertIn("ATTN_NUM_THREADS 'lots': expected an integer in [1, 4096]", out)

    def test_another_librarys_openmp_setting_does_not_change_it(self):
        if not have_torch():
            self.skipTest("torch is not importable by " + sys.executable)
        # torch sets the shared OpenMP pool to 1 thread; attn keeps its own count
        rc, out = run_python("import os, torch; torch.set_num_threads(1)\n"
                             "import attn; print(attn.get_num_threads(), "
                             "len(os.sched_getaffinity(0)))")
        self.assertEqual(rc, 0, out)
        got, cores = map(int, out.split())
        self.assertEqual(got, cores)
        # and runs on them: 3 threads asked, so the call starts 2 workers
        rc, out = run_python("import torch; torch.set_num_threads(1)\n" + GAINED,
                             ATTN_NUM_THREADS="3")
        self.assertEqual(rc, 0, out)
        self.assertEqual(out.split()[-2], "gained", out)
        self.assertGreaterEqual(int(out.split()[-1]), 2, out)


if __name__ == "__main__":
    unittest.main()
