#!/bin/sh
# make bench-peers: attn, ONNX Runtime and PyTorch on the same attention,
# interleaved in one run, one table (bench_peers.py says what is timed).
#   sh tools/bench_peers/bench_peers.sh [ATTN_BIN] [bench_peers.py options...]
# 1. ONNX Runtime: onnxruntime-node 1.30.0 from the npm registry, installed
#    with `npm ci --ignore-scripts` from package-lock.json (npm checks every
#    tarball against the lock's sha512; no install script runs: the native
#    library ships inside the package), into a cache folder outside the source
#    tree: $ATTN_PEERS_DIR, else ${XDG_CACHE_HOME:-$HOME/.cache}/attn/peers.
#    The library and the Node binding of this platform are then checked
#    against the SHA-256 below. Installed once; reused while the lock and
#    the checks still match.
# 2. PyTorch: Debian's /usr/bin/python3 torch ($PYTHON overrides).
# Any step failing stops here with its reason: no table.
set -e
here=$(cd "$(dirname "$0")" && pwd)
attn=${1:-build/attn}
[ $# -gt 0 ] && shift
python=${PYTHON:-/usr/bin/python3}
dir=${ATTN_PEERS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/attn/peers}
ort_version=1.30.0

die() {
  echo "bench-peers: $*" >&2
  exit 1
}

# SHA-256 of onnxruntime-node 1.30.0's native files, per platform (taken from
# the tarball whose sha512 the lock pins)
sha_of() {
  case $1 in
  linux/x64/libonnxruntime.so.1) echo ffb75a925ba05e47b235bb66e3e3911714a80b328a9c9425539feb204aa32a23 ;;
  linux/x64/onnxruntime_binding.node) echo ccdc60b981d93a490cf9513d3f583547252b6e285b72988a96a494f2f006c7b8 ;;
  linux/arm64/libonnxruntime.so.1) echo 1f549d46250b005580b597f4164984aaf75b3bcb9f3aeb07c7f8a8fe60b23c76 ;;
  linux/arm64/onnxruntime_binding.node) echo afec78dc11d38dc81605b068cefe1fc73ffe77ca240c15468aa40786150beac8 ;;
  *) echo "" ;;
  esac
}

command -v node >/dev/null 2>&1 || die "node (Node.js) is not installed: apt-get install nodejs npm"
command -v npm >/dev/null 2>&1 || die "npm is not installed: apt-get install npm"
[ -x "$python" ] || die "$python not found (PyTorch peer; set PYTHON)"
"$python" -c "import numpy, torch" 2>/dev/null ||
  die "$python cannot import numpy and torch: apt-get install python3-torch libopenblas0-pthread"
[ -x "$attn" ] || die "$attn: no attn tool (run make first)"

platform=$(node -p 'process.platform + "/" + process.arch')
mods=$dir/node_modules
ortpkg=$mods/onnxruntime-node
bin=$ortpkg/bin/napi-v6/$platform

check_ort() {
  [ -f "$ortpkg/package.json" ] || return 1
  v=$(node -p "require('$ortpkg/package.json').version") || return 1
  [ "$v" = "$ort_version" ] || { echo "bench-peers: $ortpkg is $v, not $ort_version" >&2; return 1; }
  cmp -s "$here/package-lock.json" "$dir/package-lock.json" || return 1
  for f in libonnxruntime.so.1 onnxruntime_binding.node; do
    want=$(sha_of "$platform/$f")
    [ -n "$want" ] || die "onnxruntime-node $ort_version has no pinned $f for $platform"
    [ -f "$bin/$f" ] || { echo "bench-peers: $bin/$f is missing" >&2; return 1; }
    got=$(sha256sum "$bin/$f" | cut -d' ' -f1)
    [ "$got" = "$want" ] || { echo "bench-peers: $bin/$f has SHA-256 $got, expected $want" >&2; return 1; }
  done
}

case $dir in
"$(cd "$here/../.." && pwd)"/*) die "ATTN_PEERS_DIR=$dir is inside the source tree: choose a folder outside it" ;;
esac

if ! check_ort 2>/dev/null; then
  echo "bench-peers: installing onnxruntime-node $ort_version into $dir (npm ci --ignore-scripts)"
  mkdir -p "$dir" || die "cannot create $dir"
  rm -rf "$mods"
  cp "$here/package.json" "$here/package-lock.json" "$dir/"
  (cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) ||
    die "could not install onnxruntime-node $ort_version from the npm registry ('npm ci' failed" \
      "above: is the registry reachable? EINTEGRITY: a tarball did not match the lock's sha512)"
  check_ort || die "onnxruntime-node $ort_version in $dir failed its checks (above)"
fi
echo "bench-peers: onnxruntime-node $ort_version in $dir" \
  "($platform: sha512 checked by npm, SHA-256 of the library and binding here)"
exec "$python" "$here/bench_peers.py" --attn-bin "$attn" --node-modules "$mods" "$@"
