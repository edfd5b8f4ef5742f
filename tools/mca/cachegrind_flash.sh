#!/bin/sh
# L1d / L2 misses of the f32 flash forward per row group (MR = 6 query rows x
# one key block of 64 keys), simulated by cachegrind for three cache
# geometries: Zen 3 (L1d 32 KB 8-way, L2 512 KB 8-way), Zen 4 (32 KB 8-way,
# 1 MB 8-way), Zen 5 (48 KB 12-way, 1 MB 16-way). One head, one thread,
# full attention (every group goes through the fused tile), the level
# valgrind's CPU offers (AVX2: valgrind has no AVX-512).
#   sh tools/mca/cachegrind_flash.sh [N]      (N a multiple of 64; default 1024)
# cachegrind's caches are LRU and it does not model hardware or software
# prefetches: the misses are the demand misses the prefetchers have to hide,
# not what a CPU's counters show.
set -e
n=${1:-1024}
command -v valgrind >/dev/null 2>&1 || { echo "cachegrind_flash: valgrind is not installed" >&2; exit 1; }
[ -f build/libattn.a ] || { echo "cachegrind_flash: build/libattn.a missing (run make)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
${CC:-gcc} -std=c11 -O2 -Iinclude -o "$tmp/drv" tools/mca/cachegrind_flash.c build/libattn.a -fopenmp -lm
# groups: work items of 144 rows (the last one shorter), floor(rows / 6) groups each, per key block
groups=$(awk -v n="$n" 'BEGIN { g = 0; for (i = 0; i < n; i += 144) { r = n - i < 144 ? n - i : 144; g += int(r / 6) } print g * int(n / 64) }')
echo "N=$n, 1 head, D=64, 1 thread: $groups row groups (6 rows x 64 keys); read misses per group:"
for geo in "Zen3 32768,8,64 524288,8,64" "Zen4 32768,8,64 1048576,8,64" "Zen5 49152,12,64 1048576,16,64"; do
  # shellcheck disable=SC2086  # split on purpose: name, L1d, L2
  set -- $geo
  valgrind --tool=cachegrind --cache-sim=yes --I1=32768,8,64 --D1="$2" --LL="$3" \
    --cachegrind-out-file="$tmp/cg.out" "$tmp/drv" "$n" 1 >"$tmp/log" 2>&1 ||
    { cat "$tmp/log" >&2; exit 1; }
  awk -v g="$groups" -v name="$1" -v d1="$2" -v ll="$3" '
    /D1  misses:/ { gsub(/,/, "", $6); d = $6 }
    /LLd misses:/ { gsub(/,/, "", $6); l = $6 }
    END { printf "  %s (L1d %s, L2 %s): L1d %.0f, L2 %.1f (L1d read misses %d, L2 %d)\n", name, d1, ll, d / g, l / g, d, l }' "$tmp/log"
done
