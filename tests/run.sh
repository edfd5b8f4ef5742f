#!/bin/sh
# Runs each test program once per ISA level this machine has (generic, avx2,
# avx512, neon: `attn version` lists them; ATTN_CPU set by the caller runs
# that level only), adds up each run's "# N passed, N failed[, N skipped]"
# line (and the seconds each run took), and prints the total. A program that does not build, crashes, or
# prints no count line counts as one failure. Skipped cases (a case that
# cannot run in this build, at this level or on this machine) are listed and
# counted apart, never as passed: the last line then ends ", N skipped".
#
# RUNNER (environment, optional): a command prefix for every test program and
# for the attn tool the tests spawn, e.g. RUNNER="qemu-aarch64 -L
# /usr/aarch64-linux-gnu" for a cross build; ATTN_BIN then names a small
# wrapper script (BUILD/attn-runner) that runs the tool under it.
build=$1; shift
runner=${RUNNER:-}
tool=${ATTN_BIN:-$build/attn}
if [ -n "$runner" ]; then
  echo "runner: $runner"
  if [ -n "${ATTN_BIN:-}" ]; then
    case $ATTN_BIN in /*) abs=$ATTN_BIN ;; *) abs=$(pwd)/$ATTN_BIN ;; esac
    wrap=$build/attn-runner
    printf '#!/bin/sh\nexec %s "%s" "$@"\n' "$runner" "$abs" >"$wrap" && chmod +x "$wrap"
    case $wrap in /*) ATTN_BIN=$wrap ;; *) ATTN_BIN=$(pwd)/$wrap ;; esac
    export ATTN_BIN
    tool=$ATTN_BIN
  else
    tool="$runner $tool"
  fi
fi
passed=0; failed=0; skipped=0
if [ -n "${ATTN_CPU:-}" ]; then
  levels=$ATTN_CPU
else
  levels=$($tool version 2>/dev/null | sed -n 's/^levels: //p')
  [ -n "$levels" ] || levels=native
fi
best=$(echo "$levels" | awk '{print $NF}')
echo "levels: $levels"
# run_one LEVEL NAME PROGRAM [VAR=VALUE]: one program at one level (and one
# more environment setting), its counts added to the totals
run_one() {
  level=$1 name=$2 t=$3 extra=${4:-}
  if [ ! -x "$t" ]; then
    echo "FAIL $name (did not build)"; failed=$((failed + 1)); return
  fi
  # a test script (#!, e.g. tests/test_install.sh) runs here and applies
  # RUNNER itself to the programs it builds
  r=$runner
  [ "$(head -c 2 "$t")" != '#!' ] || r=
  t0=$(date +%s)
  out=$(env ATTN_CPU=$level $extra $r "$t" 2>&1); rc=$?
  secs=$(($(date +%s) - t0))
  line=$(printf '%s\n' "$out" | grep -E '^# [0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?$' | tail -n 1)
  if [ -z "$line" ]; then
    printf '%s\n' "$out" | tail -n 30
    echo "FAIL $name (exit $rc, no result line)"; failed=$((failed + 1)); return
  fi
  p=$(echo "$line" | sed -E 's/# ([0-9]+) passed.*/\1/')
  f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')
  s=0
  case $line in *skipped) s=$(echo "$line" | sed -E 's/.* ([0-9]+) skipped/\1/') ;; esac
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  if [ "$f" -ne 0 ]; then printf '%s\n' "$out" | grep -v '^ok ' | tail -n 40; fi
  if [ "$s" -ne 0 ]; then
    echo "$name: $p passed, $f failed, $s skipped ($secs s)"
    printf '%s\n' "$out" | grep '^skip ' | sed "s/^/  $name: /"
  else
    echo "$name: $p passed, $f failed ($secs s)"
  fi
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
}
for level in $levels; do
  for t in "$@"; do
    name=$(basename "$t")
    [ "$level" = "$best" ] || name="$name[$level]"
    run_one "$level" "$name" "$t"
  done
done
# A CPU with AVX512_BF16: the programs whose automatic choices depend on
# whether its dot product is fast (attn_cpu_features.bf16_dot_fast) run once
# more at the best level with the other answer (ATTN_BF16_DOT), so that both
# rules are tested on any such machine.
cpu=$($tool version 2>/dev/null | sed -n 's/^cpu: //p')
case " $cpu " in
*" avx512_bf16(slow) "*) flip=1 ;;
*" avx512_bf16 "*) flip=0 ;;
*) flip= ;;
esac
if [ -n "$flip" ] && [ "$best" = avx512 ]; then
  for t in "$@"; do
    case $(basename "$t") in
    test_decode | test_lowp | test_sdpa_bf16)
      run_one "$best" "$(basename "$t")[ATTN_BF16_DOT=$flip]" "$t" "ATTN_BF16_DOT=$flip" ;;
    esac
  done
fi
# the last line: "N passed, N failed", and ", N skipped" when some were (the
# skipped cases are listed above, "<program>: skip <case>: <why>")
if [ "$skipped" -eq 0 ]; then
  echo "$passed passed, $failed failed"
else
  echo "$passed passed, $failed failed, $skipped skipped"
fi
[ "$failed" -eq 0 ]
