#!/bin/sh
# make demo: the main job. For now: proves the build end to end.
set -e
attn=${1:-build/attn}
"$attn" version
