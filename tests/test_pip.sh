#!/bin/sh
# The Python package installed the way Python users install things
# (python/README.md, "Install"): pip into a fresh virtual environment made
# from Debian's /usr/bin/python3 (--system-site-packages: its numpy, torch,
# setuptools, wheel), offline (--no-index --no-build-isolation), then:
#   - the installed package loads its own copy of libattn.so and the tool
#     (attn/_native/), not the build tree's;
#   - the README's Python examples run (README.md "From Python and PyTorch"
#     and python/README.md "numpy": every ```python block, each in a fresh
#     directory; a block that imports torch is a counted skip without torch);
#   - `python -m attn --version` says the tool's version;
#   - threads after `import torch` (torch sets the shared OpenMP pool to 1):
#     attn keeps its count and runs on it (skipped without torch);
#   - `pip wheel` makes a py3-none-<platform> wheel holding the library, the
#     tool and py.typed;
#   - with CC naming a missing compiler, pip fails with a message naming it,
#     and nothing is installed.
# The build reuses this build's library and tool (ATTN_BUILD_DIR=BUILD: make
# finds them up to date); a plain pip install builds its own (build-py/).
# Run by BUILD/tests/test_pip from the repository root (written by the
# Makefile, with ATTN_TEST_BUILD and ATTN_TEST_SAN). Prints "ok"/"FAIL"/"skip"
# lines and "# N passed, N failed[, N skipped]".
passed=0 failed=0 skipped=0
ok() { echo "ok   $1"; passed=$((passed + 1)); }
no() { echo "FAIL $1"; failed=$((failed + 1)); }
skip() { echo "skip $1"; skipped=$((skipped + 1)); }
finish() {
  if [ "$skipped" -eq 0 ]; then echo "# $passed passed, $failed failed"
  else echo "# $passed passed, $failed failed, $skipped skipped"; fi
  [ "$failed" -eq 0 ]
  exit
}

build=${ATTN_TEST_BUILD:-build}
case $build in /*) ;; *) build=$(pwd)/$build ;; esac
py=${ATTN_PYTHON:-/usr/bin/python3}

# what cannot run here: one counted skip, saying why
if [ "${ATTN_TEST_SAN:-0}" != 0 ]; then
  skip "pip_install: sanitizer build (its libattn.so needs the ASan runtime loaded before python3)"
  finish
fi
if ! [ -x "$py" ]; then skip "pip_install: no $py"; finish; fi
missing=$("$py" - <<'EOF'
import importlib
need = {"numpy": "python3-numpy", "setuptools": "python3-setuptools", "wheel": "python3-wheel",
        "ensurepip": "python3-venv", "venv": "python3-venv"}
missing = []
for mod, pkg in need.items():
    try:
        importlib.import_module(mod)
    except Exception:
        missing.append(pkg)
print(" ".join(sorted(set(missing))))
EOF
)
if [ -n "$missing" ]; then
  skip "pip_install: $py lacks $missing (Debian packages; make python-deps installs them)"
  finish
fi
# a cross build's library cannot be loaded by this interpreter
elf_machine() { "$py" -c 'import sys; h = open(sys.argv[1], "rb").read(20); print(int.from_bytes(h[18:20], "little") if h[:4] == b"\x7fELF" else "?")' "$1" 2>/dev/null; }
if [ "$(elf_machine "$build/attn")" != "$(elf_machine "$py")" ]; then
  skip "pip_install: $build/attn is built for another machine"
  finish
fi
# the package is the same at every ISA level (test_python runs its cases at
# each): installed and checked once, at the best level
tool_levels=$("$build/attn" version 2>/dev/null | sed -n 's/^levels: //p')
best=$(echo "$tool_levels" | awk '{print $NF}')
if [ -n "${ATTN_CPU:-}" ] && [ -n "$best" ] && [ "$ATTN_CPU" != "$best" ]; then
  skip "pip_install: run once, at the best level ($best), not again at $ATTN_CPU"
  finish
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/attn_test_pip.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
root=$(pwd)
# the test's own make (make test) must not steer the build's: no jobserver,
# no command-line variables passed down
unset MAKEFLAGS MFLAGS MAKELEVEL
export ATTN_BUILD_DIR="$build"
unset ATTN_LIB ATTN_BIN PYTHONPATH ATTN_NUM_THREADS OMP_NUM_THREADS
version=$("$build/attn" --version)

# --- install into a fresh venv ----------------------------------------------
venv=$tmp/venv
if "$py" -m venv --system-site-packages "$venv" >"$tmp/venv.log" 2>&1; then
  ok "venv: $py -m venv --system-site-packages"
else
  cat "$tmp/venv.log"; no "venv"; finish
fi
vpy=$venv/bin/python
if "$vpy" -m pip install --no-index --no-build-isolation "$root" >"$tmp/pip.log" 2>&1; then
  ok "pip install --no-index --no-build-isolation . (offline)"
else
  tail -n 30 "$tmp/pip.log"; no "pip install"; finish
fi

# --- the installed package uses its own library and tool --------------------
out=$(cd "$tmp" && "$vpy" -c '
import os, sys, attn
from attn import _lib
pkg = os.path.dirname(attn.__file__)
print(pkg.startswith(sys.prefix), attn.library_path == os.path.join(pkg, "_native", "libattn.so"),
      _lib.tool_path() == os.path.join(pkg, "_native", "attn"),
      os.path.isfile(os.path.join(pkg, "py.typed")))' 2>&1)
if [ "$out" = "True True True True" ]; then
  ok "import attn: the venv's package, its own attn/_native/libattn.so and tool, py.typed"
else
  echo "  $out"; no "import attn from the venv"
fi

# --- python -m attn ---------------------------------------------------------
out=$(cd "$tmp" && "$vpy" -m attn --version 2>&1)
if [ "$out" = "$version" ]; then ok "python -m attn --version: $out"
else echo "  got '$out', want '$version'"; no "python -m attn --version"; fi
(cd "$tmp" && "$vpy" -m attn frobnicate >/dev/null 2>"$tmp/err"); rc=$?
if [ "$rc" -eq 2 ] && grep -q "^attn: unknown command 'frobnicate'" "$tmp/err"; then
  ok "python -m attn: the tool's exit status and message"
else
  cat "$tmp/err"; no "python -m attn frobnicate: exit $rc"
fi

# --- the README's Python examples -------------------------------------------
has_torch=no
"$vpy" -c "import torch" >/dev/null 2>&1 && has_torch=yes
# blocks FILE SECTION TAG: each ```python block under "## SECTION" (up to the
# next "## ") of FILE into $tmp/ex/TAG_N.py
mkdir -p "$tmp/ex"
blocks() {
  awk -v sec="## $2" -v dir="$tmp/ex" -v tag="$3" '
    /^## / { insec = ($0 == sec) }
    insec && /^```python/ { n++; f = sprintf("%s/%s_%d.py", dir, tag, n); inb = 1; next }
    inb && /^```/ { inb = 0; close(f); next }
    inb { print > f }' "$1"
}
blocks README.md "From Python and PyTorch" README
blocks python/README.md "numpy" python_README
nex=0
for ex in "$tmp"/ex/*.py; do
  [ -f "$ex" ] || continue
  nex=$((nex + 1))
  name=$(basename "$ex" .py)
  if grep -q "import torch\|attn\.torch" "$ex" && [ "$has_torch" = no ]; then
    skip "example $name: needs torch ($vpy cannot import it)"; continue
  fi
  d=$tmp/run_$name; mkdir -p "$d"
  if (cd "$d" && "$vpy" "$ex") >"$d/out" 2>&1; then ok "example $name runs"
  else sed 's/^/  /' "$d/out" | tail -n 20; no "example $name"; fi
done
[ "$nex" -ge 2 ] && ok "examples found: $nex" || no "README examples: found $nex, want >= 2"

# --- threads after import torch ---------------------------------------------
if [ "$has_torch" = yes ]; then
  out=$(cd "$tmp" && "$vpy" -c '
import os, torch
torch.set_num_threads(1)            # the shared OpenMP pool at 1 thread
import attn
print(attn.get_num_threads(), len(os.sched_getaffinity(0)))' 2>&1)
  set -- $out
  if [ "$#" -eq 2 ] && [ "$1" = "$2" ]; then ok "after import torch: attn.get_num_threads() = $1, the cores"
  else echo "  $out"; no "after import torch: attn.get_num_threads()"; fi
  out=$(cd "$tmp" && ATTN_NUM_THREADS=3 "$vpy" -c '
import os, numpy as np, torch
torch.set_num_threads(1)
import attn
tasks = lambda: len(os.listdir("/proc/self/task"))
q = np.random.default_rng(0).standard_normal((1, 8, 512, 64), dtype=np.float32)
before = tasks()
attn.sdpa(q, q, q, backend="flash")
print(tasks() - before)' 2>&1)
  if [ "$out" -ge 2 ] 2>/dev/null; then ok "after import torch, ATTN_NUM_THREADS=3: the call started $out workers"
  else echo "  $out"; no "after import torch: attn runs on its own thread count"; fi
else
  skip "threads after import torch: $vpy cannot import torch"
fi

# --- pip wheel --------------------------------------------------------------
if "$vpy" -m pip wheel --no-index --no-build-isolation --no-deps -w "$tmp/dist" "$root" \
  >"$tmp/wheel.log" 2>&1; then
  out=$("$vpy" - "$tmp/dist" <<'EOF'
import glob, sys, zipfile
whl = glob.glob(sys.argv[1] + "/attn-*.whl")
names = zipfile.ZipFile(whl[0]).namelist() if len(whl) == 1 else []
tag = whl[0].rsplit("-", 3)[1:] if whl else []
print(len(whl), tag[:2] == ["py3", "none"] and tag[2].startswith("linux"),
      all(n in names for n in ("attn/_native/libattn.so", "attn/_native/attn", "attn/py.typed",
                                "attn/__main__.py")))
EOF
)
  if [ "$out" = "1 True True" ]; then ok "pip wheel: one py3-none-linux wheel with the library, the tool, py.typed"
  else echo "  $out"; no "pip wheel: the wheel's name or contents"; fi
else
  tail -n 30 "$tmp/wheel.log"; no "pip wheel"
fi

# --- no C compiler: a clear message, nothing installed ----------------------
# (this venv without its own pip: Debian's, from the system site, installs
# into it just the same, and the venv is made in a second, not ten)
venv2=$tmp/venv2
"$py" -m venv --without-pip --system-site-packages "$venv2" >/dev/null 2>&1
nb=$tmp/nocc
if CC=/nonexistent/cc ATTN_BUILD_DIR=$nb "$venv2/bin/python" -m pip install --no-index \
  --no-build-isolation "$root" >"$tmp/nocc.log" 2>&1; then
  no "CC=/nonexistent/cc: pip install succeeded"
elif grep -q "error: attn: the C compiler CC=/nonexistent/cc not found" "$tmp/nocc.log"; then
  ok "CC=/nonexistent/cc: pip fails naming the missing compiler"
else
  tail -n 20 "$tmp/nocc.log"; no "CC=/nonexistent/cc: the message"
fi
if "$venv2/bin/python" -m pip show attn >/dev/null 2>&1 ||
  ls "$venv2"/lib/python3*/site-packages/attn >/dev/null 2>&1 ||
  [ -n "$(find "$nb" \( -name '*.o' -o -name 'libattn*' -o -name attn \) 2>/dev/null)" ]; then
  no "CC=/nonexistent/cc: something was installed or built"
else
  ok "CC=/nonexistent/cc: nothing installed, nothing built"
fi
finish
