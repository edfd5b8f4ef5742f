#!/bin/sh
# make bench-g2p: G2P training tokens/s of attn and of PyTorch (tools/bench_g2p_torch.py)
# on the same model and the same batches, in one run, and their ratio (docs/G2P.md).
#   1. attn g2p train --bench STEPS: STEPS timed steps (after a warm-up) of the
#      model below on the first batches of epoch 0; writes them to
#      OUT/bench_batches.bin
#   2. the torch script trains the same architecture on those batches
# Environment: ATTN_G2P_BENCH_DATA (dictionary folder, default data/cmudict; fetched
# if missing), ATTN_G2P_BENCH_ARGS (model options, default the g2p defaults
# "--dim 128 --heads 4 --ff 512 --layers 3"), ATTN_G2P_BENCH_STEPS (20),
# ATTN_G2P_BENCH_BATCH (128, the training default), ATTN_G2P_BENCH_THREADS (2), ATTN_G2P_BENCH_OUT
# (runs/g2p-bench). Measure on a quiet machine: other load moves both figures.
set -e
attn=${1:-build/attn}
data=${ATTN_G2P_BENCH_DATA:-data/cmudict}
out=${ATTN_G2P_BENCH_OUT:-runs/g2p-bench}
args=${ATTN_G2P_BENCH_ARGS:---dim 128 --heads 4 --ff 512 --layers 3}
steps=${ATTN_G2P_BENCH_STEPS:-20}
batch=${ATTN_G2P_BENCH_BATCH:-128}
threads=${ATTN_G2P_BENCH_THREADS:-2}
python=${PYTHON:-/usr/bin/python3}
[ -f "$data/dict.txt" ] || [ -f "$data" ] || sh tools/fetch_cmudict.sh "$data"
mkdir -p "$out"
# shellcheck disable=SC2086
"$attn" g2p train --data "$data" --out "$out" $args --batch "$batch" --threads "$threads" \
  --precision f32 --bench "$steps" | tee "$out/attn.txt" | grep '^bench:'
# the torch script takes the same model options (--dim --heads --ff --layers [--dropout])
# shellcheck disable=SC2086
"$python" tools/bench_g2p_torch.py "$out/bench_batches.bin" $args --threads "$threads" \
  | tee "$out/torch.txt"
a=$(sed -n 's/^bench: attn .*: \([0-9.]*\) tokens\/s.*/\1/p' "$out/attn.txt")
t=$(sed -n 's/^bench: torch .*: \([0-9.]*\) tokens\/s.*/\1/p' "$out/torch.txt")
awk -v a="$a" -v t="$t" 'BEGIN { if (t > 0) printf "bench-g2p: attn / torch = %.2fx training tokens/s\n", a / t }'
