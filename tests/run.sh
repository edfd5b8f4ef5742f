#!/bin/sh
# Runs each test program once per ISA level this machine has (generic, avx2,
# avx512, neon: `attn version` lists them; ATTN_CPU set by the caller runs
# that level only), adds up each run's "# N passed, N failed" line, and
# prints the total. A program that does not build, crashes, or prints no
# count line counts as one failure.
build=$1; shift
passed=0; failed=0
if [ -n "${ATTN_CPU:-}" ]; then
  levels=$ATTN_CPU
else
  levels=$(${RUNNER:-} "${ATTN_BIN:-$build/attn}" version 2>/dev/null | sed -n 's/^levels: //p')
  [ -n "$levels" ] || levels=native
fi
best=$(echo "$levels" | awk '{print $NF}')
echo "levels: $levels"
for level in $levels; do
  for t in "$@"; do
    name=$(basename "$t")
    [ "$level" = "$best" ] || name="$name[$level]"
    if [ ! -x "$t" ]; then
      echo "FAIL $name (did not build)"; failed=$((failed + 1)); continue
    fi
    out=$(ATTN_CPU=$level ${RUNNER:-} "$t" 2>&1); rc=$?
    line=$(printf '%s\n' "$out" | grep -E '^# [0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    if [ -z "$line" ]; then
      printf '%s\n' "$out" | tail -n 30
      echo "FAIL $name (exit $rc, no result line)"; failed=$((failed + 1)); continue
    fi
    p=$(echo "$line" | sed -E 's/# ([0-9]+) passed.*/\1/')
    f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed/\1/')
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    if [ "$f" -ne 0 ]; then printf '%s\n' "$out" | grep -v '^ok ' | tail -n 40; fi
    echo "$name: $p passed, $f failed"
    passed=$((passed + p)); failed=$((failed + f))
  done
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
