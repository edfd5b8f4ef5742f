"""The build step of the attn Python package (pyproject.toml holds the rest).

build_py compiles libattn.so and the attn tool with the project's Makefile
(`make BUILD=DIR DIR/libattn.so DIR/attn`) and puts both inside the package,
attn/_native/, where python/attn/_lib.py looks first. The wheel is tagged
py3-none-<platform>: the package is Python over ctypes, so any Python 3 on
this platform loads it, but the library and the tool are this machine's
(they link the system's libgomp, and the tool cairo, Pango and GMime where
the build found them): a wheel for this machine and its like, not for PyPI.

Environment:
  CC              the C compiler, as for make (default gcc); checked first, so a
                  missing one is said in one line before anything is built
  ATTN_BUILD_DIR  the Makefile's BUILD folder (default build-py; `build`
                  reuses what a plain `make` built: make rebuilds only what
                  changed)
  MAKE            make (default make); MAKEFLAGS as usual (default -jN, N the
                  CPUs this process may use)

setuptools' own files go to ATTN_BUILD_DIR/setuptools (not build/, which is
the Makefile's)."""
import os
import re
import shlex
import shutil
import subprocess
import sys

from setuptools import Distribution, setup
from setuptools.command.build import build
from setuptools.command.build_py import build_py
from setuptools.command.egg_info import egg_info
from setuptools.errors import CompileError, ExecError

try:  # setuptools >= 70.1 has its own
    from setuptools.command.bdist_wheel import bdist_wheel as _bdist_wheel
except ImportError:
    from wheel.bdist_wheel import bdist_wheel as _bdist_wheel

ROOT = os.path.dirname(os.path.abspath(__file__))


def version():
    """X.Y.Z from include/attn/version.h, the version's one source."""
    with open(os.path.join(ROOT, "include", "attn", "version.h"), encoding="utf-8") as f:
        text = f.read()
    part = {}
    for name in ("MAJOR", "MINOR", "PATCH"):
        m = re.search(r"^#define ATTN_VERSION_%s\s+(\d+)" % name, text, re.M)
        if not m:
            raise ExecError("include/attn/version.h: no ATTN_VERSION_%s" % name)
        part[name] = m.group(1)
    return "%(MAJOR)s.%(MINOR)s.%(PATCH)s" % part


def build_dir():
    d = os.environ.get("ATTN_BUILD_DIR") or "build-py"
    return d if os.path.isabs(d) else os.path.join(ROOT, d)


def _need(what, cmd, hint):
    """The program of cmd ("gcc", "ccache gcc") on PATH, else an error saying so."""
    words = shlex.split(cmd) if cmd else []
    if not words or not shutil.which(words[0]):
        raise CompileError(
            "attn: %s not found: building the attn package compiles libattn with the "
            "project's Makefile, which needs a C compiler (gcc or clang) and make. %s "
            "Nothing was built or installed." % (what, hint))


def check_tools():
    """The compiler and make are there (before anything is built or copied)."""
    cc = os.environ.get("CC")
    _need("the C compiler CC=%s" % cc if cc else "the C compiler gcc", cc or "gcc",
          "Debian: sudo apt-get install gcc make (or sh tools/deps.sh); or set CC to "
          "the compiler to use.")
    make = os.environ.get("MAKE") or "make"
    _need("make (%s)" % make, make, "Debian: sudo apt-get install make.")


def build_native():
    """Runs make; returns the paths of libattn.so (the file, not the link) and the tool."""
    check_tools()
    make = os.environ.get("MAKE") or "make"
    out = build_dir()
    cmd = shlex.split(make) + ["-C", ROOT, "BUILD=" + out, os.path.join(out, "libattn.so"),
                               os.path.join(out, "attn")]
    if "-j" not in os.environ.get("MAKEFLAGS", "") + " ".join(cmd):
        cmd.insert(len(shlex.split(make)), "-j%d" % len(os.sched_getaffinity(0)))
    print("attn: building libattn and the attn tool: %s" % " ".join(cmd), flush=True)
    r = subprocess.run(cmd)
    if r.returncode != 0:
        raise ExecError("attn: `%s` failed (exit status %d; its messages are above). "
                        "Nothing was installed." % (" ".join(cmd), r.returncode))
    lib = os.path.realpath(os.path.join(out, "libattn.so"))
    tool = os.path.join(out, "attn")
    for p in (lib, tool):
        if not os.path.isfile(p):
            raise ExecError("attn: make succeeded but %s is missing" % p)
    return lib, tool


class BuildPy(build_py):
    """The Python files, then libattn.so and the attn tool into attn/_native/."""

    def run(self):
        check_tools()
        super().run()
        lib, tool = build_native()
        dest = os.path.join(self.build_lib, "attn", "_native")
        os.makedirs(dest, exist_ok=True)
        # into temporary names, then renamed: an interrupted copy leaves no
        # half-written library under the name the package loads
        for src, name in ((lib, "libattn.so"), (tool, "attn")):
            tmp = os.path.join(dest, "." + name + ".tmp")
            shutil.copy2(src, tmp)
            os.replace(tmp, os.path.join(dest, name))


class Build(build):
    """setuptools' files under ATTN_BUILD_DIR/setuptools, not in build/."""

    def initialize_options(self):
        super().initialize_options()
        self.build_base = os.path.join(build_dir(), "setuptools")


class EggInfo(egg_info):
    """attn.egg-info under ATTN_BUILD_DIR, not in python/."""

    def initialize_options(self):
        super().initialize_options()
        self.egg_base = build_dir()
        os.makedirs(self.egg_base, exist_ok=True)


class BinaryDistribution(Distribution):
    """Not pure: the package holds this platform's library and tool (the
    wheel's files go to platlib)."""

    def has_ext_modules(self):
        return True


class BdistWheel(_bdist_wheel):
    """py3-none-<platform>: ctypes, no Python ABI, but native files inside."""

    def get_tag(self):
        return ("py3", "none") + tuple(super().get_tag()[2:])


if sys.version_info < (3, 7):
    sys.exit("attn: Python 3.7 or newer")
setup(version=version(), distclass=BinaryDistribution,
      cmdclass={"build": Build, "build_py": BuildPy, "egg_info": EggInfo,
                "bdist_wheel": BdistWheel})
