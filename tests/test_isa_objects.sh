#!/bin/sh
# tools/check_isa_objects.sh: no AVX-512 or AMX instruction of this build
# outside the files and functions only such a CPU reaches, and the check
# fails on a planted one. Prints "ok"/"FAIL"/"skip" lines and "# N passed,
# N failed[, N skipped]" for tests/run.sh (run by BUILD/tests/test_isa_objects
# from the root).
build=${1:-build}
passed=0; failed=0; skipped=0
ok() { echo "ok $1"; passed=$((passed + 1)); }
no() { echo "FAIL $1"; failed=$((failed + 1)); }
skip() { echo "skip $1"; skipped=$((skipped + 1)); }
end() {
  if [ "$skipped" -gt 0 ]; then echo "# $passed passed, $failed failed, $skipped skipped"
  else echo "# $passed passed, $failed failed"; fi
  [ "$failed" -eq 0 ]
  exit
}
# a build whose flags give every file AVX-512 (CFLAGS=-march=native on such
# a CPU) runs only there, by its builder's choice: nothing to check
if printf '' | ${CC:-cc} ${ATTN_TEST_CFLAGS:-} -dM -E -x c - 2>/dev/null | grep -q '__AVX512F__'; then
  skip "this build: its flags ($ATTN_TEST_CFLAGS) give every file AVX-512"
  end
fi
out=$(sh tools/check_isa_objects.sh "$build" 2>&1)
case $? in
0) ok "this build: $out" ;;
3) skip "this build: $out"; end ;;
*) printf '%s\n' "$out"; no "this build has AVX-512/AMX instructions where an AVX2 CPU runs them" ;;
esac
# a small tree: an AVX-512 function and an AMX one in an app's file must be
# found and named; the same functions in arch/avx512/ and arch/amx/, or
# named for their ISA, pass
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
cc=${CC:-cc}
mkdir -p "$tmp/src/apps/x" "$tmp/src/kernels/arch/avx512" "$tmp/src/kernels/arch/amx"
cat >"$tmp/wide.c" <<'EOF'
#include <immintrin.h>
__attribute__((target("avx512f"))) void NAME512(float *x) {
  _mm512_storeu_ps(x, _mm512_add_ps(_mm512_loadu_ps(x), _mm512_set1_ps(1.0f)));
}
__attribute__((target("amx-tile"))) void NAMEAMX(void) { _tile_release(); }
EOF
plant() { # plant DIR FILE NAME512 NAMEAMX: the two functions built into BUILD/DIR/FILE.o
  mkdir -p "$tmp/$1" "$tmp/b/$1" &&
    sed "s/NAME512/$3/; s/NAMEAMX/$4/" "$tmp/wide.c" >"$tmp/$1/$2.c" &&
    (cd "$tmp" && $cc -O2 -c "$1/$2.c" -o "b/$1/$2.o")
}
check() { (cd "$tmp" && sh "$OLDPWD/tools/check_isa_objects.sh" b 2>&1); }
if plant src/apps/x a add_one tile_off 2>/dev/null; then
  out=$(check); rc=$?
  if [ $rc -eq 1 ] && printf '%s' "$out" | grep -q 'src/apps/x/a.o: add_one: [0-9]* AVX-512' &&
    printf '%s' "$out" | grep -q 'src/apps/x/a.o: tile_off: [0-9]* AVX-512/AMX'; then
    ok "an AVX-512 and an AMX function in an app's file are found and named"
  else
    printf '%s\n' "$out"; no "an AVX-512 and an AMX function in an app's file are found and named (exit $rc)"
  fi
  rm -f "$tmp/b/src/apps/x/a.o"
  plant src/apps/x a add_one_avx512 tile_off_amx && out=$(check)
  [ $? -eq 0 ] && ok "named for their ISA: pass" || { printf '%s\n' "$out"; no "named for their ISA: pass"; }
  rm -f "$tmp/b/src/apps/x/a.o"
  plant src/kernels/arch/avx512 a add_one x && plant src/kernels/arch/amx b y tile_off && out=$(check)
  [ $? -eq 0 ] && ok "in arch/avx512/ and arch/amx/: pass" ||
    { printf '%s\n' "$out"; no "in arch/avx512/ and arch/amx/: pass"; }
else
  skip "the planted functions: $cc cannot build AVX-512/AMX code here"
fi
end
