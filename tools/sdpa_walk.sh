#!/bin/sh
# The descriptor's walk through the kernel files (issue 33's count): builds
# the library with -finstrument-functions in build-walk/ (source files under
# src/kernels; header inlines excluded), runs one attn_sdpa_forward call per
# case (tools/walk/walk_trace.c, 1 thread, B=1 H=2 L=256 D=64), maps each
# first-time (caller, callee) entry, in call order, to its kernel file, and
# prints: stops (runs of consecutive entries in one file), files, and
# returns (stops in a file already left before).
# Usage: sh tools/sdpa_walk.sh [CASE ...]   (default: plain causal softcap bf16)
set -eu
cd "$(dirname "$0")/.."
B=build-walk
cases=${*:-plain causal softcap bf16}
make -s -j2 BUILD=$B OPT="-O2 -g -finstrument-functions -finstrument-functions-exclude-file-list=.h,/usr/" \
  $B/libattn.a >/dev/null
gcc -std=c11 -O1 -g -no-pie -Iinclude -fopenmp -o $B/walk_trace tools/walk/walk_trace.c $B/libattn.a -lm -lpthread
for c in $cases; do
  $B/walk_trace "$c" $B/walk_$c.txt
  awk '{print $2}' $B/walk_$c.txt | addr2line -e $B/walk_trace -f | paste - - |
    awk -v c="$c" '
      { f = $2; sub(/:.*/, "", f); sub(/.*src\/kernels\//, "", f)
        if ($2 !~ /src\/kernels\//) next
        if (f != last) { stops++; if (f in left) returns++; if (last != "") left[last] = 1; files[f] = 1; last = f } }
      END { n = 0; for (f in files) n++
            printf "walk %-8s %3d stops across %2d kernel files, %3d returns to a file already left\n", c, stops, n, returns }'
done
