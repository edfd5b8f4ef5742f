#!/bin/sh
# Installs the Debian packages attn builds against, if any is missing.
# --python (make python-deps): also what the Python package needs
# (python/README.md): numpy, and for `pip install` / `make wheel` setuptools,
# wheel, pip and venv (the test's fresh virtual environment); the PyTorch op's
# torch is optional (CI installs it: .ci/run).
# (Library: libc, libm, OpenMP. Apps: cairo and Pango for pictures and bench
# plots, GMime for mail; fonts for token labels in any script.)
# Fonts: fonts-noto-cjk (Chinese, Japanese, Korean; ~90 MB installed, but the
# Noto Sans CJK SC forms the tutorials' Chinese needs, Japanese kana too, and
# bold weights for titles; fonts-wqy-microhei is 5 MB but one weight, with
# Chinese glyph forms only) and fonts-noto-color-emoji (11 MB); DejaVu
# (Latin, Arabic) comes with fontconfig. Without them labels in those scripts
# are drawn as boxes and the picture tests report a skip.
need=""
command -v gcc >/dev/null 2>&1 && command -v make >/dev/null 2>&1 || need="$need gcc make"
command -v pkg-config >/dev/null 2>&1 || need="$need pkg-config"
pkg-config --exists cairo 2>/dev/null || need="$need libcairo2-dev"
pkg-config --exists pangocairo 2>/dev/null || need="$need libpango1.0-dev"
font_has() { fc-list ":charset=$1" family 2>/dev/null | grep -q .; }
font_has 6211 || need="$need fonts-noto-cjk"
font_has 1f40d || need="$need fonts-noto-color-emoji"
pkg-config --exists gmime-3.0 2>/dev/null || need="$need libgmime-3.0-dev"
if [ "${1:-}" = --python ]; then
  py=/usr/bin/python3
  [ -x "$py" ] || need="$need python3"
  # each module, and the Debian package that has it
  for mp in numpy:python3-numpy setuptools:python3-setuptools wheel:python3-wheel \
    pip:python3-pip ensurepip:python3-venv; do
    "$py" -c "import ${mp%%:*}" >/dev/null 2>&1 || need="$need ${mp#*:}"
  done
fi
[ -z "$need" ] && exit 0
echo "attn: installing missing packages:$need"
if [ "$(id -u)" -ne 0 ]; then
  echo "attn: not root; please run: sudo apt-get install$need" >&2
  exit 1
fi
apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $need >/dev/null
