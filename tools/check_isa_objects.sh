#!/bin/sh
# Every AVX-512 or AMX instruction of this build sits where only a CPU that
# has it gets: in a file of src/kernels/arch/avx512/ or arch/amx/ (the
# levels the dispatch picks from the CPU's features), or in a function whose
# name says so (`*avx512*`, `*amx*`: a benchmark's loop behind its own CPU
# check). Anywhere else such an instruction is a SIGILL on an AVX2 CPU
# (a Zen 3, a laptop) the moment that code runs; this finds it in every
# function of the build, run or not (CI's emulated Haswell finds it only on
# the paths its tests run).
#
# Reads the built objects BUILD/src/**/*.o (those whose source is still there)
# with objdump -d: an instruction whose first opcode byte, after any segment
# or address-size prefix, is 0x62 is EVEX-encoded (AVX-512; in 64-bit mode
# 0x62 is nothing else); tile*/tdp*/ldtilecfg/sttilecfg are AMX.
# Usage: check_isa_objects.sh [BUILD] (default build). Prints each function
# out of place ("FILE: FUNCTION: N AVX-512/AMX instructions, first: ...") and
# exits 1, else one "isa objects ok: ..." line; 2 when it cannot read the
# objects, 3 when they are not x86-64 (nothing to check). OBJDUMP=... picks
# objdump.
build=${1:-build}
objdump=${OBJDUMP:-objdump}
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
find "$build/src" -name '*.o' 2>/dev/null | sort >"$tmp/objs"
[ -s "$tmp/objs" ] || { echo "check_isa_objects: no objects under $build/src" >&2; exit 2; }
first=$(head -n 1 "$tmp/objs")
"$objdump" -f "$first" >"$tmp/f" 2>&1 || { echo "check_isa_objects: $objdump -f $first failed" >&2; exit 2; }
grep -q 'x86-64' "$tmp/f" || { echo "check_isa_objects: not x86-64 objects ($first)"; exit 3; }
n=0; bad=0; wide=0
while read -r o; do
  rel=${o#"$build"/}
  [ -e "${rel%.o}.c" ] || continue # an object of a file since moved or removed
  n=$((n + 1))
  "$objdump" -d "$o" >"$tmp/dis" 2>/dev/null || { echo "check_isa_objects: $objdump -d $o failed" >&2; exit 2; }
  # one line per function with such instructions: "FUNCTION COUNT FIRST..."
  awk -F'\t' '
    /^[0-9a-f]+ <.*>:$/ { fn = $0; sub(/^[0-9a-f]+ </, "", fn); sub(/>:$/, "", fn); next }
    /^ +[0-9a-f]+:\t/ && $3 != "" {
      nb = split($2, b, " "); i = 1
      while (i < nb && (b[i] == "67" || b[i] == "2e" || b[i] == "3e" || b[i] == "26" || b[i] == "36" || b[i] == "64" || b[i] == "65")) i++
      m = $3; sub(/ .*/, "", m)
      if (b[i] == "62" || m ~ /^(tile|tdp|ldtilecfg|sttilecfg)/) { c[fn]++; if (!(fn in f1)) f1[fn] = $3 }
    }
    END { for (x in c) print x "\t" c[x] "\t" f1[x] }' "$tmp/dis" >"$tmp/hits"
  [ -s "$tmp/hits" ] || continue
  case $rel in src/kernels/arch/avx512/* | src/kernels/arch/amx/*) wide=$((wide + $(wc -l <"$tmp/hits"))); continue ;; esac
  while IFS="$(printf '\t')" read -r fn cnt ins; do
    case $fn in
    *avx512* | *amx*) wide=$((wide + 1)) ;;
    *) echo "$rel: $fn: $cnt AVX-512/AMX instructions, first: $ins"; bad=$((bad + 1)) ;;
    esac
  done <"$tmp/hits"
done <"$tmp/objs"
if [ "$bad" -gt 0 ]; then
  echo "check_isa_objects: $bad function(s) with AVX-512/AMX instructions outside src/kernels/arch/avx512|amx and not named *avx512*/*amx*"
  exit 1
fi
echo "isa objects ok: $n objects; the $wide functions with AVX-512/AMX instructions are all in arch/avx512|amx or named for it"
exit 0
