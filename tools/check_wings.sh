#!/bin/sh
# The wings of src/apps/ (README "Layout"): one folder per application or
# shared piece, and which wing may include which. Usage: check_wings.sh
# [ROOT] (default: the current directory, a checkout of attn). Prints each
# violation and exits 1, else one "wings ok" line.
#
# Rules, read from every `#include "apps/..."` line of ROOT/src:
#   shared pieces (text, viz,        include only other shared pieces;
#     train, gen)                    train is the applications' training
#                                    kit (batch plans, progress and ETA,
#                                    time plans, the precision choice,
#                                    data parallelism): nothing of any
#                                    application; gen the generating
#                                    applications' kit (KV cache seam,
#                                    sampling, the loop);
#   applications (classifier, hf, lm, include only shared pieces, never
#     seq2seq)                       another application; each one's own
#                                    training lives in its wing, on the kit;
#   tools (bench, gradcheck)         any wing;
# and in any case no cycle between wings; a wing's *_internal.h stays inside
# it; every apps file lives in a wing (no src/apps/*.c or *.h); the library
# (src/core, kernels, nn, io, train) includes nothing of src/apps. A new wing
# gets its kind below first.
SHARED="text viz train gen"
APPS="classifier hf lm seq2seq"
TOOLS="tools"

root=${1:-.}
[ -d "$root/src/apps" ] || { echo "check_wings: no $root/src/apps" >&2; exit 2; }
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT

kind() {
  for w in $SHARED; do [ "$1" = "$w" ] && { echo 0; return; }; done
  for w in $APPS; do [ "$1" = "$w" ] && { echo 1; return; }; done
  for w in $TOOLS; do [ "$1" = "$w" ] && { echo 2; return; }; done
  echo -1
}
kind_name() { case $1 in 0) echo "shared piece" ;; 1) echo application ;; *) echo "tools wing" ;; esac; }

bad=0
fail() { echo "check_wings: $*"; bad=$((bad + 1)); }

for f in "$root"/src/apps/*.c "$root"/src/apps/*.h; do
  [ -e "$f" ] && fail "${f#"$root"/} is in no wing (move it into src/apps/<wing>/)"
done
for d in "$root"/src/apps/*/; do
  [ -d "$d" ] || continue
  w=$(basename "$d")
  [ "$(kind "$w")" -ge 0 ] || fail "src/apps/$w/: a wing of no kind (give it one in tools/check_wings.sh)"
done

# "FILE WING TARGET" for every apps include of src/ (WING: the file's wing,
# cli, lib (the library) or - (a file in no wing))
(cd "$root" && grep -rHo --include='*.[ch]' '^[ \t]*#[ \t]*include[ \t]*"apps/[^"]*"' src) |
  sed 's/^\([^:]*\):.*"\(apps\/[^"]*\)"$/\1 \2/' | sort | while read -r rel inc; do
  case $rel in src/apps/*/*) from=${rel#src/apps/} from=${from%%/*} ;; src/apps/*) from=- ;;
    src/cli/*) from=cli ;; *) from=lib ;; esac
  echo "$rel $from $inc"
done >"$tmp/includes"

: >"$tmp/edges"
while read -r rel from inc; do
  case $inc in
    apps/*/*) to=${inc#apps/} to=${to%%/*} ;;
    *) fail "$rel includes $inc, which is in no wing"; continue ;;
  esac
  if [ "$from" = lib ]; then
    fail "$rel (the library) includes $inc: the library never includes the apps"
    continue
  fi
  [ "$from" = cli ] || [ "$from" = - ] || [ "$from" = "$to" ] || {
    case $inc in *_internal.h) fail "$rel includes $inc, internal to wing $to" ;; esac
    echo "$from $to" >>"$tmp/edges"
    kf=$(kind "$from"); kt=$(kind "$to")
    if [ "$kf" -ge 0 ] && [ "$kt" -ge 0 ]; then
      if [ "$kt" -gt "$kf" ] || { [ "$kt" -eq "$kf" ] && [ "$kf" -ne 0 ]; }; then
        fail "$rel includes $inc: $(kind_name "$kf") '$from' may not include $(kind_name "$kt") '$to'"
      fi
    fi
  }
done <"$tmp/includes"

sort -u "$tmp/edges" >"$tmp/graph"
if ! tsort "$tmp/graph" >/dev/null 2>"$tmp/loop"; then
  fail "a cycle between wings: $(grep -v 'input contains a loop' "$tmp/loop" | sed 's/^tsort: //' | tr '\n' ' ')"
fi

if [ "$bad" -ne 0 ]; then
  echo "check_wings: $bad violation(s) (rules: tools/check_wings.sh, README \"Layout\")"
  exit 1
fi
echo "wings ok: $(awk '{ printf "%s%s->%s", (NR > 1 ? " " : ""), $1, $2 }' "$tmp/graph")"
