#!/bin/sh
# tools/check_wings.sh: this checkout's src/apps/ keeps the wings' rules, and
# each rule fails on a small tree that breaks it (a cycle, a shared piece
# including an application (train, the training kit, too), one application
# including another, a shared piece including tools, another wing's
# *_internal.h, a file in no wing, an include
# of a path in no wing, a wing of no kind, the library including the apps),
# naming the offending include. Prints "ok"/"FAIL" lines and "# N passed,
# N failed" for tests/run.sh (run by BUILD/tests/test_wings from the root).
check=tools/check_wings.sh
passed=0; failed=0
ok() { echo "ok $1"; passed=$((passed + 1)); }
no() { echo "FAIL $1"; failed=$((failed + 1)); }

out=$(sh "$check" . 2>&1)
case $? in 0) ok "this checkout: $out" ;; *) printf '%s\n' "$out"; no "this checkout's wings" ;; esac

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
n=0
# tree NAME FILE:INCLUDE... : a tree with each FILE (under src/) including
# INCLUDE ("-": nothing)
tree() {
  n=$((n + 1)); t=$tmp/$n; shift
  for spec in "$@"; do
    f=$t/src/${spec%%:*}; inc=${spec#*:}
    mkdir -p "$(dirname "$f")"
    [ "$inc" = - ] || echo "#include \"$inc\"" >>"$f"
    touch "$f"
  done
}
# expect_ok NAME, expect_fail NAME PATTERN: check_wings.sh on the last tree
expect_ok() {
  out=$(sh "$check" "$t" 2>&1)
  if [ $? -eq 0 ]; then ok "$1"; else printf '%s\n' "$out"; no "$1"; fi
}
expect_fail() {
  out=$(sh "$check" "$t" 2>&1)
  rc=$?
  if [ $rc -eq 1 ] && printf '%s\n' "$out" | grep -q -- "$2"; then ok "$1"
  else printf '%s\n' "$out"; no "$1 (exit $rc; expected a line with '$2')"; fi
}

good="apps/tools/b.c:apps/train/t.h apps/train/t.c:apps/text/x.h apps/train/t.h:-
      apps/classifier/d.c:apps/train/t.h apps/classifier/c.c:apps/text/x.h apps/classifier/c.h:- apps/text/x.h:apps/viz/v.h
      apps/viz/v.h:- apps/text/x_internal.h:- apps/text/x.c:apps/text/x_internal.h
      cli/main.c:apps/text/x_internal.h nn/a.c:attn.h"
tree good $good
expect_ok "a tree that keeps the rules"

tree cycle $good apps/viz/v.c:apps/text/x.h
expect_fail "a cycle between shared pieces" "a cycle between wings: .*text.*viz\|a cycle between wings: .*viz.*text"

tree cycle2 $good apps/train/t2.c:apps/tools/b.h apps/tools/b.h:-
expect_fail "train including tools" "src/apps/train/t2.c includes apps/tools/b.h: shared piece 'train' may not include tools wing 'tools'"
expect_fail "... and the cycle it makes" "a cycle between wings"

tree shared_app $good apps/text/y.c:apps/classifier/c.h
expect_fail "a shared piece including an application" \
  "src/apps/text/y.c includes apps/classifier/c.h: shared piece 'text' may not include application 'classifier'"

tree app_app $good apps/seq2seq/s.c:apps/classifier/c.h
expect_fail "an application including another" \
  "src/apps/seq2seq/s.c includes apps/classifier/c.h: application 'seq2seq' may not include application 'classifier'"

tree train_app $good apps/train/t3.c:apps/seq2seq/s.h apps/seq2seq/s.h:-
expect_fail "train (the training kit) including an application" \
  "src/apps/train/t3.c includes apps/seq2seq/s.h: shared piece 'train' may not include application 'seq2seq'"

tree internal $good apps/classifier/e.c:apps/text/x_internal.h
expect_fail "another wing's internal header" "src/apps/classifier/e.c includes apps/text/x_internal.h, internal to wing text"

tree loose $good apps/loose.c:-
expect_fail "a file in no wing" "src/apps/loose.c is in no wing"

tree loose_inc $good apps/viz/w.c:apps/old.h
expect_fail "an include of a path in no wing" "src/apps/viz/w.c includes apps/old.h, which is in no wing"

tree unknown $good apps/newapp/z.c:-
expect_fail "a wing of no kind" "src/apps/newapp/: a wing of no kind"

tree lib $good nn/b.c:apps/viz/v.h
expect_fail "the library including the apps" "src/nn/b.c (the library) includes apps/viz/v.h"

echo "# $passed passed, $failed failed"
[ "$failed" -eq 0 ]
