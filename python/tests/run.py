"""Runs the Python tests (python/tests/test_*.py, plain unittest) and prints
one line per case ("ok NAME", "FAIL NAME", "skip NAME: why") and the count
line tests/run.sh adds up: "# N passed, N failed[, N skipped]".

Without numpy nothing can run: one skipped case says so. Cases that need
torch skip themselves (counted) when it is not importable. ATTN_LIB names the
library to test (tests/test_python.c sets it to the build's)."""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def _finish(passed, failed, skipped):
    print("# %d passed, %d failed%s" % (passed, failed, ", %d skipped" % skipped if skipped else ""))
    sys.stdout.flush()
    return 1 if failed else 0


def _elf_machine(path):
    """e_machine of an ELF file, or None."""
    try:
        with open(path, "rb") as f:
            h = f.read(20)
    except OSError:
        return None
    if len(h) < 20 or h[:4] != b"\x7fELF":
        return None
    return int.from_bytes(h[18:20], "little" if h[5] == 1 else "big")


def _foreign_library():
    """A reason to skip when ATTN_LIB was built for another machine (a cross
    build whose tests run under qemu: this interpreter cannot load it)."""
    lib = os.environ.get("ATTN_LIB")
    mine = _elf_machine(sys.executable if os.path.exists(sys.executable) else "/proc/self/exe")
    theirs = _elf_machine(lib) if lib else None
    if mine is not None and theirs is not None and mine != theirs:
        return "%s is built for another machine (ELF machine %d, this Python: %d)" % (
            lib, theirs, mine)
    return None


class _Result(unittest.TestResult):
    def __init__(self):
        super().__init__()
        self.passed = 0
        self.failed_cases = set()

    def _name(self, test):
        return test.id().split(".", 1)[-1] if "." in test.id() else test.id()

    def addSuccess(self, test):
        if test.id() in self.failed_cases:  # counted with its failed subtests
            return
        self.passed += 1
        print("ok   " + self._name(test))
        sys.stdout.flush()

    def _fail(self, test, err):
        print("FAIL " + self._name(test))
        print("  " + self._exc_info_to_string(err, test).rstrip().replace("\n", "\n  "))
        sys.stdout.flush()

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._fail(test, err)

    def addError(self, test, err):
        super().addError(test, err)
        self._fail(test, err)

    def addSubTest(self, test, subtest, err):
        # a failing subtest fails its case (counted once, with the case)
        if err is not None:
            if test.id() not in self.failed_cases:
                print("FAIL " + self._name(test))
            self.failed_cases.add(test.id())
            print("  %s: %s" % (subtest._subDescription(), self._exc_info_to_string(err, test)
                                .rstrip().replace("\n", "\n  ")))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        print("skip %s: %s" % (self._name(test), reason))
        sys.stdout.flush()


def main():
    sys.path.insert(0, os.path.dirname(HERE))  # python/: the attn package
    sys.path.insert(0, HERE)
    try:
        import numpy  # noqa: F401
    except ImportError:
        print("skip python_tests: numpy is not importable by %s (Debian: python3-numpy)"
              % sys.executable)
        return _finish(0, 0, 1)
    foreign = _foreign_library()
    if foreign:
        print("skip python_tests: " + foreign)
        return _finish(0, 0, 1)
    names = sys.argv[1:]
    loader = unittest.TestLoader()
    suite = loader.loadTestsFromNames(names) if names else \
        loader.discover(HERE, pattern="test_*.py", top_level_dir=HERE)
    r = _Result()
    suite.run(r)
    return _finish(r.passed, len(r.failures) + len(r.errors) + len(r.failed_cases), len(r.skipped))


if __name__ == "__main__":
    sys.exit(main())
