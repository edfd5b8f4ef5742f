#!/bin/sh
# tools/check_kernel_calls.sh: no cycle of calls between the files of
# src/kernels/ in this build, and the check fails on a cycle (two objects
# calling each other). Prints "ok"/"FAIL" lines and "# N passed, N failed"
# for tests/run.sh (run by BUILD/tests/test_kernel_calls from the root).
build=${1:-build}
passed=0; failed=0
ok() { echo "ok $1"; passed=$((passed + 1)); }
no() { echo "FAIL $1"; failed=$((failed + 1)); }
out=$(sh tools/check_kernel_calls.sh "$build" 2>&1)
case $? in
0) ok "this build: $out" ;;
*) printf '%s\n' "$out"; no "this build's kernel files call each other in a cycle" ;;
esac
# a small build whose two kernel files call each other must fail
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
cc=${CC:-cc}
mkdir -p "$tmp/src/kernels/x" "$tmp/b/src/kernels/x"
printf 'int b(void);\nint a(void) { return b(); }\n' >"$tmp/src/kernels/x/a.c"
printf 'int a(void);\nint b(void) { return a() + 1; }\n' >"$tmp/src/kernels/x/b.c"
printf 'int a(void);\nint c(void) { return a(); }\n' >"$tmp/src/kernels/c.c"
if (cd "$tmp" && $cc -c src/kernels/x/a.c -o b/src/kernels/x/a.o && $cc -c src/kernels/x/b.c -o b/src/kernels/x/b.o &&
  $cc -c src/kernels/c.c -o b/src/kernels/c.o) 2>/dev/null; then
  out=$(cd "$tmp" && sh "$OLDPWD/tools/check_kernel_calls.sh" b 2>&1)
  rc=$?
  if [ $rc -eq 1 ] && printf '%s' "$out" | grep -q 'x/a' && printf '%s' "$out" | grep -q 'x/b'; then
    ok "a cycle of two files is found and named"
  else
    printf '%s\n' "$out"; no "a cycle of two files is found and named (exit $rc)"
  fi
  rm "$tmp/b/src/kernels/x/b.o"
  out=$(cd "$tmp" && sh "$OLDPWD/tools/check_kernel_calls.sh" b 2>&1)
  [ $? -eq 0 ] && ok "without it: no cycle" || { printf '%s\n' "$out"; no "without it: no cycle"; }
else
  echo "skip the planted cycle: $cc cannot build the small tree"
fi
echo "# $passed passed, $failed failed"
[ "$failed" -eq 0 ]
