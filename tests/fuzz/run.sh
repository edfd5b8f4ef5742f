#!/bin/sh
# Runs fuzz targets for a fixed time each and fails on any finding.
#   sh tests/fuzz/run.sh BUILD SECONDS JOBS TARGET...
# Each target BUILD/fuzz/fuzz_TARGET starts from its seeds
# (tests/fuzz/seeds/TARGET) and its work corpus BUILD/fuzz/corpus/TARGET,
# which keeps what it found for the next run; JOBS targets run at once. A
# finding (crash, sanitizer report, leak, a -timeout of 10 s per input, more
# than 2 GB of memory) stops that target and leaves the input as
# BUILD/fuzz/crashes/TARGET/<kind>-<sha1>; reproduce it with
#   BUILD/fuzz/fuzz_TARGET BUILD/fuzz/crashes/TARGET/<file>
# Prints one line per target: runs, seconds, corpus size, new findings.
build=$1 seconds=$2 jobs=$3
shift 3
here=$(dirname "$0")
dict_of() {
  case $1 in
    mail) echo "$here/mail.dict" ;;
    bpe) echo "$here/bpe.dict" ;;
    *) echo "$here/safetensors.dict" ;;
  esac
}
run_one() {
  t=$1
  bin=$build/fuzz/fuzz_$t corpus=$build/fuzz/corpus/$t crashes=$build/fuzz/crashes/$t
  log=$build/fuzz/$t.log
  mkdir -p "$corpus" "$crashes"
  before=$(ls "$crashes" | wc -l) rc=0
  nice -n 19 "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -malloc_limit_mb=2048 -dict="$(dict_of "$t")" -artifact_prefix="$crashes/" \
    -print_final_stats=1 "$corpus" "$here/seeds/$t" >"$log" 2>&1 || rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  found=$(($(ls "$crashes" | wc -l) - before))
  echo "fuzz $t: ${runs:-?} runs in $seconds s, corpus $(ls "$corpus" | wc -l) files," \
    "$found findings (exit $rc)"
  if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ]; then
    grep -E 'ERROR|SUMMARY|fuzz:|==[0-9]+==' "$log" | head -n 20
    echo "fuzz $t: FAILED; the log is $log, the input(s) in $crashes/"
    return 1
  fi
}
failed=0
pids=""
for t in "$@"; do
  run_one "$t" &
  pids="$pids $!"
  if [ "$(echo $pids | wc -w)" -ge "$jobs" ]; then
    for p in $pids; do wait "$p" || failed=$((failed + 1)); done
    pids=""
  fi
done
for p in $pids; do wait "$p" || failed=$((failed + 1)); done
echo "fuzz: $# targets, $failed failed"
[ "$failed" -eq 0 ]
