#!/bin/sh
# The call graph between the files of src/kernels/ has no cycle: loops call
# micro-kernels and shared helpers, never back (docs/ARCHITECTURE.md). Reads
# the built objects BUILD/src/kernels/**/*.o (those whose source is still in
# src/kernels) with nm: file A calls file B when A uses a symbol B defines.
# Usage: check_kernel_calls.sh [BUILD] (default build). Prints each cycle's
# files and exits 1, else one "kernel calls ok: N files, no cycle" line; 2
# when it cannot read the objects. NM=... picks nm.
build=${1:-build}
nm=${NM:-nm}
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
n=0
for o in $(find "$build/src/kernels" -name '*.o' | sort); do
  rel=${o#"$build"/}
  [ -e "${rel%.o}.c" ] || continue # an object of a file since moved or removed
  name=${rel#src/kernels/}
  name=${name%.o}
  "$nm" "$o" >"$tmp/sym" 2>/dev/null || { echo "check_kernel_calls: $nm $o failed" >&2; exit 2; }
  awk -v f="$name" 'NF == 3 && $2 ~ /^[TDBR]$/ {print $3, f}' "$tmp/sym" >>"$tmp/defs"
  awk -v f="$name" 'NF == 2 && $1 == "U" {print $2, f}' "$tmp/sym" >>"$tmp/uses"
  n=$((n + 1))
done
[ "$n" -gt 0 ] || { echo "check_kernel_calls: no kernel objects under $build/src/kernels" >&2; exit 2; }
# edges "user definer" (one per pair), then tsort: a loop is a cycle
awk 'NR == FNR {def[$1] = $2; next} ($1 in def) && def[$1] != $2 {print $2, def[$1]}' \
  "$tmp/defs" "$tmp/uses" | sort -u >"$tmp/edges"
if tsort "$tmp/edges" >/dev/null 2>"$tmp/loops"; then
  echo "kernel calls ok: $n files, no cycle"
  exit 0
fi
echo "check_kernel_calls: a cycle of calls between kernel files:"
sed -n 's/^tsort: //p' "$tmp/loops"
exit 1
