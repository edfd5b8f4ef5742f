#!/bin/sh
# The installed tree as a user sees it. `make install` into a temporary
# PREFIX, then examples/hello_sdpa.c compiled and linked with
# `pkg-config --cflags --libs attn` against libattn.so, and with --static (a
# static program) against libattn.a, and with CMake's find_package(attn)
# against both; each runs and prints the expected line.
# Also: libattn.so exports only attn_ functions, every ATTN_API one of
# include/ among them, with SONAME libattn.so.MAJOR; `make install DESTDIR=`
# puts exactly the expected files there and `make uninstall` removes exactly
# those. Prints "ok"/"FAIL"/"skip" lines and "# N passed, N failed[, N
# skipped]" for tests/run.sh.
#
# Run by the wrapper mk/install.mk writes (BUILD/tests/test_install), which
# sets ATTN_TEST_BUILD, ATTN_TEST_SAN, CC, NM, ATTN_TEST_SAN_FLAGS and MAKE;
# RUNNER (from tests/run.sh) runs the programs built here (a cross build).
build=${ATTN_TEST_BUILD:?run BUILD/tests/test_install (make test TESTS=test_install)}
runner=${RUNNER:-}
cc=${CC:-gcc}
nm=${NM:-nm}
make=${MAKE:-make}
san_flags=${ATTN_TEST_SAN_FLAGS:-}
# the nested make is not part of the make that runs the tests
unset MAKEFLAGS MFLAGS MAKELEVEL

ver_part() { sed -n "s/^#define ATTN_VERSION_$1  *\([0-9][0-9]*\).*/\1/p" include/attn/version.h; }
major=$(ver_part MAJOR)
version=$major.$(ver_part MINOR).$(ver_part PATCH)
# the SONAME's version: MAJOR, or 0.MINOR in the 0.x series (the Makefile's SOVERSION)
[ "$major" = 0 ] && major=0.$(ver_part MINOR)
# examples/hello_sdpa.c: q = (0, 1), keys (1, 0), (0, 1), scale 1/sqrt(2):
# p = softmax(0, 0.7071) = (0.3302, 0.6698); out = p · v
want="attn $version: out = 2.3395 3.3395"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/attn-install.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

passed=0 failed=0 skipped=0
fail() { echo "  $*"; case_failed=1; }
skip() { case_skip="$*"; }
run_case() {
  case_failed=0 case_skip=""
  "$1"
  if [ "$case_failed" -ne 0 ]; then
    echo "FAIL $1"; failed=$((failed + 1))
  elif [ -n "$case_skip" ]; then
    echo "skip $1: $case_skip"; skipped=$((skipped + 1))
  else
    echo "ok   $1"; passed=$((passed + 1))
  fi
}
# make_install LOG ARGS...: make install (or uninstall) of this build
make_install() {
  log=$1; shift
  $make --no-print-directory BUILD="$build" CC="$cc" SAN="${ATTN_TEST_SAN:-0}" RUNNER="$runner" \
    "$@" >"$log" 2>&1 || { tail -n 20 "$log"; fail "make $* failed"; return 1; }
}
# the names of the functions include/ declares ATTN_API
public_api() {
  sed -n 's/^ATTN_API [^(]*[ *]\(attn_[A-Za-z0-9_]*\)(.*/\1/p' include/attn/*.h include/*.h | sort -u
}

test_exports_only_the_public_api() {
  so=$build/libattn.so
  if ! command -v "$nm" >/dev/null 2>&1; then skip "no $nm"; return; fi
  # a file-scope function declaration in include/ without ATTN_API
  bare=$(grep -n '^[A-Za-z_][A-Za-z0-9_ *]*[ *]attn_[A-Za-z0-9_]*(' include/*.h include/attn/*.h |
    grep -v ':\(ATTN_API\|static\|typedef\) ')
  [ -z "$bare" ] || fail "declared without ATTN_API: $bare"
  "$nm" -D --defined-only "$so" | awk '{print $NF}' | sort -u >"$tmp/exported" ||
    { fail "$nm -D $so failed"; return; }
  public_api >"$tmp/public"
  [ -s "$tmp/public" ] || fail "no ATTN_API function found in include/"
  other=$(grep -v '^attn_' "$tmp/exported" | tr '\n' ' ')
  [ -z "$other" ] || fail "exported, not attn_: $other"
  internal=$(comm -13 "$tmp/public" "$tmp/exported" | tr '\n' ' ')
  [ -z "$internal" ] || fail "exported, not ATTN_API in include/: $internal"
  missing=$(comm -23 "$tmp/public" "$tmp/exported" | tr '\n' ' ')
  [ -z "$missing" ] || fail "ATTN_API but not exported: $missing"
  soname=$(LC_ALL=C readelf -d "$so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
  [ "$soname" = "libattn.so.$major" ] || fail "SONAME '$soname', want libattn.so.$major"
}

test_uninstall_removes_what_install_put() {
  stage=$tmp/stage
  mkdir -p "$stage/usr/local/lib" && echo keep >"$stage/usr/local/lib/libother.so"
  make_install "$tmp/install.log" install DESTDIR="$stage" PREFIX=/usr/local || return
  p=usr/local
  {
    echo $p/bin/attn
    echo $p/include/attn.h
    for h in include/attn/*.h; do echo "$p/include/attn/${h##*/}"; done
    printf '%s\n' $p/lib/libattn.a $p/lib/libattn.so $p/lib/libattn.so.$major \
      $p/lib/libattn.so.$version $p/lib/libother.so $p/lib/pkgconfig/attn.pc \
      $p/lib/cmake/attn/attnConfig.cmake $p/lib/cmake/attn/attnConfigVersion.cmake \
      $p/share/man/man1/attn.1
  } | sort >"$tmp/want"
  (cd "$stage" && find . ! -type d | sed 's|^\./||' | sort) >"$tmp/got"
  diff "$tmp/want" "$tmp/got" >"$tmp/diff" || { cat "$tmp/diff"; fail "installed files differ"; }
  [ "$(readlink "$stage/$p/lib/libattn.so")" = "libattn.so.$major" ] || fail "libattn.so link"
  [ "$(readlink "$stage/$p/lib/libattn.so.$major")" = "libattn.so.$version" ] ||
    fail "libattn.so.$major link"
  grep -q '^prefix=/usr/local$' "$stage/$p/lib/pkgconfig/attn.pc" || fail "attn.pc prefix"
  grep -q '^\.SS attn sdpa$' "$stage/$p/share/man/man1/attn.1" || fail "attn.1 has no 'attn sdpa'"
  grep -q '^usage: attn sdpa ' "$stage/$p/share/man/man1/attn.1" || fail "attn.1 lacks sdpa's usage"
  make_install "$tmp/uninstall.log" uninstall DESTDIR="$stage" PREFIX=/usr/local || return
  left=$(cd "$stage" && find . ! -type d | sed 's|^\./||')
  [ "$left" = "$p/lib/libother.so" ] || fail "after uninstall: $left"
  [ ! -d "$stage/$p/include/attn" ] || fail "include/attn/ left behind"
  [ ! -d "$stage/$p/lib/cmake/attn" ] || fail "lib/cmake/attn/ left behind"
}

# can_build: pkg-config and a working compiler for the target (else a skip)
can_build() {
  if ! command -v pkg-config >/dev/null 2>&1; then skip "no pkg-config"; return 1; fi
  printf 'int main(void) { return 0; }\n' >"$tmp/empty.c"
  if ! $cc "$tmp/empty.c" -o "$tmp/empty" >/dev/null 2>&1; then skip "$cc cannot build programs"; return 1; fi
}
prefix=$tmp/prefix
installed=""
# install_prefix: make install PREFIX=$prefix once
install_prefix() {
  [ -n "$installed" ] && return 0
  make_install "$tmp/prefix.log" install PREFIX="$prefix" || return 1
  installed=1
}
pc() { PKG_CONFIG_LIBDIR="$prefix/lib/pkgconfig" PKG_CONFIG_PATH= pkg-config "$@"; }
# needs_libattn PROGRAM: it loads libattn.so.MAJOR
needs_libattn() { LC_ALL=C readelf -d "$1" 2>/dev/null | grep -q "(NEEDED).*\[libattn\.so\.$major\]"; }
# check_hello PROGRAM: it runs and prints $want
check_hello() {
  got=$(LD_LIBRARY_PATH="$prefix/lib" $runner "$1" 2>&1) || fail "$1 failed: $got"
  [ "$got" = "$want" ] || fail "$1 printed '$got', want '$want'"
}

test_pkg_config_links_the_shared_library() {
  can_build && install_prefix || return
  [ "$(pc --modversion attn)" = "$version" ] || fail "pkg-config --modversion attn: $(pc --modversion attn)"
  flags=$(pc --cflags --libs attn) || { fail "pkg-config --cflags --libs attn failed"; return; }
  # shellcheck disable=SC2086 # flags are words
  $cc examples/hello_sdpa.c -o "$tmp/hello_shared" $flags $san_flags >"$tmp/cc.log" 2>&1 ||
    { cat "$tmp/cc.log"; fail "cc examples/hello_sdpa.c \$(pkg-config --cflags --libs attn) failed"; return; }
  needs_libattn "$tmp/hello_shared" || fail "hello_shared does not load libattn.so.$major"
  check_hello "$tmp/hello_shared"
}

test_pkg_config_static_links_the_static_library() {
  can_build || return
  if [ -n "$san_flags" ]; then skip "a sanitizer build links no static programs"; return; fi
  for a in libgomp.a libc.a; do
    if [ "$($cc -print-file-name=$a)" = "$a" ]; then skip "no $a for a static program"; return; fi
  done
  install_prefix || return
  flags=$(pc --static --cflags --libs attn) || { fail "pkg-config --static failed"; return; }
  # shellcheck disable=SC2086
  $cc -static examples/hello_sdpa.c -o "$tmp/hello_static" $flags >"$tmp/cc.log" 2>&1 ||
    { cat "$tmp/cc.log"; fail "cc -static examples/hello_sdpa.c \$(pkg-config --static --cflags --libs attn) failed"; return; }
  ! LC_ALL=C readelf -d "$tmp/hello_static" 2>/dev/null | grep -q '(NEEDED)' ||
    fail "hello_static needs shared libraries"
  check_hello "$tmp/hello_static"
}

test_cmake_find_package_links_both_libraries() {
  can_build || return
  if ! command -v cmake >/dev/null 2>&1; then skip "no cmake"; return; fi
  install_prefix || return
  mkdir -p "$tmp/cmake" && cp examples/hello_sdpa.c "$tmp/cmake/"
  cat >"$tmp/cmake/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.13)
project(hello_attn C)
find_package(attn $version REQUIRED)
add_executable(hello_shared hello_sdpa.c)
target_link_libraries(hello_shared attn::attn)
add_executable(hello_static hello_sdpa.c)
target_link_libraries(hello_static attn::attn_static)
CMAKE
  { cmake -S "$tmp/cmake" -B "$tmp/cmake/build" -DCMAKE_PREFIX_PATH="$prefix" \
      -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="$san_flags" -DCMAKE_EXE_LINKER_FLAGS="$san_flags" &&
      cmake --build "$tmp/cmake/build"; } >"$tmp/cmake.log" 2>&1 ||
    { tail -n 30 "$tmp/cmake.log"; fail "find_package(attn) and the build failed"; return; }
  needs_libattn "$tmp/cmake/build/hello_shared" || fail "attn::attn: no libattn.so.$major"
  ! needs_libattn "$tmp/cmake/build/hello_static" || fail "attn::attn_static loads libattn.so"
  check_hello "$tmp/cmake/build/hello_shared"
  check_hello "$tmp/cmake/build/hello_static"
}

run_case test_exports_only_the_public_api
run_case test_uninstall_removes_what_install_put
run_case test_pkg_config_links_the_shared_library
run_case test_pkg_config_static_links_the_static_library
run_case test_cmake_find_package_links_both_libraries
if [ "$skipped" -ne 0 ]; then
  echo "# $passed passed, $failed failed, $skipped skipped"
else
  echo "# $passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
