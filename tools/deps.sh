#!/bin/sh
# Installs the Debian packages attn builds against, if any is missing.
# (Library: libc, libm, OpenMP. Apps: cairo for pictures and bench plots,
# GMime for mail.)
need=""
command -v gcc >/dev/null 2>&1 && command -v make >/dev/null 2>&1 || need="$need gcc make"
command -v pkg-config >/dev/null 2>&1 || need="$need pkg-config"
pkg-config --exists cairo 2>/dev/null || need="$need libcairo2-dev"
pkg-config --exists gmime-3.0 2>/dev/null || need="$need libgmime-3.0-dev"
[ -z "$need" ] && exit 0
echo "attn: installing missing packages:$need"
if [ "$(id -u)" -ne 0 ]; then
  echo "attn: not root; please run: sudo apt-get install$need" >&2
  exit 1
fi
apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $need >/dev/null
