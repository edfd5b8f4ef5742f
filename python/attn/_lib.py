"""Finding and loading libattn.so (ctypes, no compilation step), the
prototypes of the public C functions the package calls, and attn.Error.

Library search order:
  1. $ATTN_LIB (a path; an error if it does not exist),
  2. the copy inside the package, attn/_native/libattn.so (a pip install:
     setup.py builds it with the project's Makefile),
  3. the build tree this package sits in (REPO/build/libattn.so when the
     package is REPO/python/attn),
  4. the installed tree: libattn.so* in PREFIX/lib (or lib64) for any
     ancestor PREFIX of the package (PREFIX/lib/python3/dist-packages/attn),
  5. the system loader (ctypes.util.find_library("attn")).
Only functions declared in include/ are called (the library exports nothing
else)."""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import numbers
import os
import shutil
from typing import List, Optional, Tuple

_HERE = os.path.dirname(os.path.abspath(__file__))
_NATIVE = os.path.join(_HERE, "_native")
_MAX_THREADS = 4096


class Error(RuntimeError):
    """An attn library call failed. .status is the attn_status code, .status_name
    its name ("invalid argument", ...), str() the library's message."""

    status: int
    status_name: str

    def __init__(self, message: str, status: int = 1, status_name: str = "invalid argument") -> None:
        super().__init__(message)
        self.status = status
        self.status_name = status_name


def _candidates() -> List[str]:
    env = os.environ.get("ATTN_LIB")
    if env:
        if not os.path.exists(env):
            raise Error("ATTN_LIB=%s: no such file" % env)
        return [env]
    out = [os.path.join(_NATIVE, "libattn.so"),
           os.path.join(os.path.dirname(os.path.dirname(_HERE)), "build", "libattn.so")]
    d = _HERE
    while True:
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
        for sub in ("", "lib", "lib64"):
            out += sorted(glob.glob(os.path.join(d, sub, "libattn.so*")))
    found = ctypes.util.find_library("attn")
    if found:
        out.append(found)
    return out


def _load() -> Tuple[ctypes.CDLL, str]:
    tried = []
    for path in _candidates():
        if os.path.sep in path and not os.path.exists(path):
            tried.append(path)
            continue
        if os.path.sep in path:
            path = os.path.abspath(path)
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            # a library that exists but cannot be loaded (another architecture,
            # a sanitizer build) is reported, not silently skipped
            raise Error("cannot load %s: %s" % (path, e)) from None
    raise Error("libattn.so not found (looked in %s and the system library path); "
                "build it with `make`, or set ATTN_LIB=/path/to/libattn.so" % ", ".join(tried))


lib, path = _load()

_p = ctypes.c_void_p
_i64 = ctypes.c_int64
_int = ctypes.c_int
_f = ctypes.c_float
_s = ctypes.c_char_p

# name: (restype, argtypes); attn_sdpa_desc and attn_sdpa_args pointers are passed as c_void_p
_PROTOS = {
    "attn_last_error": (_s, []),
    "attn_status_str": (_s, [_int]),
    "attn_clear_error": (None, []),
    "attn_backend_from_name": (_int, [_s, _p]),
    "attn_sdpa_desc_init": (None, [_p, _i64, _i64, _i64, _i64, _i64, _i64, _i64]),
    "attn_sdpa_forward": (_int, [_p, _p]),
    "attn_sdpa_backward": (_int, [_p, _p]),
    "attn_sdpa_dropout_mask": (_int, [_p, _i64, _i64, _p]),
    "attn_alibi_slopes": (_int, [_i64, _p]),
    "attn_isa_active": (_int, []),
    "attn_isa_name": (_s, [_int]),
    "attn_set_num_threads": (None, [_int]),
    "attn_get_num_threads": (_int, []),
    "attn_st_new": (_int, [_p]),
    "attn_st_load": (_int, [_s, _p]),
    "attn_st_free": (None, [_p]),
    "attn_st_count": (_int, [_p]),
    "attn_st_name": (_s, [_p, _int]),
    "attn_st_get": (_p, [_p, _s]),
    "attn_st_meta": (_s, [_p, _s]),
    "attn_st_meta_count": (_int, [_p]),
    "attn_st_meta_key": (_s, [_p, _int]),
    "attn_st_set_meta": (_int, [_p, _s, _s]),
    "attn_st_add": (_int, [_p, _s, _int, _int, _p, _p]),
    "attn_st_save": (_int, [_p, _s]),
    "attn_layer_run_st": (_int, [_p, _int, _p]),
}
for _name, (_res, _args) in _PROTOS.items():
    _fn = getattr(lib, _name)
    _fn.restype = _res
    _fn.argtypes = _args


def check(status: int, what: Optional[str] = None) -> None:
    """Raises Error with attn_last_error()'s message when status != ATTN_OK."""
    if status == 0:
        return
    msg = lib.attn_last_error().decode("utf-8", "replace")
    name = lib.attn_status_str(status).decode()
    if what:
        msg = "%s: %s" % (what, msg) if msg else what
    raise Error(msg or name, status, name)


def backend_code(name: str) -> int:
    """"auto" | "math" | "flash" -> attn_backend."""
    if not isinstance(name, str):
        raise Error("backend must be a string (auto, math or flash), not %r" % (name,))
    out = ctypes.c_int(0)
    check(lib.attn_backend_from_name(name.encode(), ctypes.byref(out)), "backend")
    return out.value


def tool_path() -> Optional[str]:
    """The attn tool: $ATTN_BIN, the copy inside the package
    (attn/_native/attn, a pip install), the one next to the library (build
    tree: build/attn; installed: PREFIX/bin/attn), or `attn` on PATH; None
    when there is none."""
    env = os.environ.get("ATTN_BIN")
    if env:
        return env
    bundled = os.path.join(_NATIVE, "attn")
    if os.path.isfile(bundled) and os.access(bundled, os.X_OK):
        return bundled
    libdir = os.path.dirname(os.path.abspath(path)) if os.path.sep in path else None
    if libdir:
        for cand in (os.path.join(libdir, "attn"), os.path.join(os.path.dirname(libdir), "bin", "attn")):
            if os.path.isfile(cand) and os.access(cand, os.X_OK):
                return cand
    return shutil.which("attn")


def isa() -> str:
    """The ISA level the library runs at ("generic", "avx2", "avx512", "neon")."""
    return lib.attn_isa_name(lib.attn_isa_active()).decode()


def _thread_count(what: str, value: object, lo: int) -> int:
    """value as a thread count in [lo, 4096], else Error naming what."""
    n = None
    if isinstance(value, str):
        try:
            n = int(value, 10)
        except ValueError:
            pass
    elif isinstance(value, numbers.Integral) and not isinstance(value, bool):
        n = int(value)
    if n is None or not lo <= n <= _MAX_THREADS:
        raise Error("%s %r: expected an integer in [%d, %d]" % (what, value, lo, _MAX_THREADS))
    return n


def set_num_threads(n: int) -> None:
    """Threads attn's kernels use: attn's own count, which another library's
    OpenMP setting does not change (after `import torch`, torch's
    omp_set_num_threads(1) on a small machine). 0 returns to the default:
    $ATTN_NUM_THREADS, else the environment variable $OMP_NUM_THREADS,
    else the cores this process may use (os.sched_getaffinity). Results do not
    depend on it."""
    lib.attn_set_num_threads(_thread_count("set_num_threads:", n, 0))


def get_num_threads() -> int:
    """The number of threads attn's kernels use (set_num_threads)."""
    return int(lib.attn_get_num_threads())


def num_threads() -> int:
    """Same as get_num_threads() (the older name)."""
    return get_num_threads()


def version() -> Optional[str]:
    """attn_version_string() where the library has it (newer builds), else None."""
    try:
        fn = lib.attn_version_string
    except AttributeError:
        return None
    fn.restype, fn.argtypes = _s, []
    return fn().decode()


if os.environ.get("ATTN_NUM_THREADS", ""):
    # the library alone would ignore a bad value; say so, as the tool does
    _thread_count("ATTN_NUM_THREADS", os.environ["ATTN_NUM_THREADS"], 1)
