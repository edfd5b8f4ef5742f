#!/bin/sh
# make demo-g2p: grapheme-to-phoneme end to end (docs/G2P.md).
#   1. fetches CMUdict (tools/fetch_cmudict.sh -> data/cmudict)
#   2. writes the word-level split (data/cmudict/split.tsv) and its counts
#   3. trains a small encoder-decoder: d_model 64, 4 heads, ff 256, 2 encoder
#      + 2 decoder layers (241,168 parameters), 2 epochs of batch 64 (3,760
#      steps), label smoothing 0.1, AdamW, warm-up + cosine
#   4. evaluates it (greedy decoding) on val and test: WER and PER with and
#      without stress, and the worst test errors
#   5. predicts a few words with `attn g2p predict` (beam search of 4, the
#      2 best pronunciations of each with their scores)
# Everything goes to runs/g2p-demo/ (train.log, best.safetensors, eval.txt).
# Environment: ATTN_G2P_DEMO_DATA (dictionary folder), ATTN_G2P_DEMO_OUT
# (output folder), ATTN_G2P_DEMO_TRAIN_ARGS (extra `attn g2p train` options,
# e.g. "--epochs 1"; later options win).
set -e
attn=${1:-build/attn}
data=${ATTN_G2P_DEMO_DATA:-data/cmudict}
out=${ATTN_G2P_DEMO_OUT:-runs/g2p-demo}
t0=$(date +%s)
step() {
  echo
  echo "== [$(($(date +%s) - t0)) s] $*"
}

step "1/5 CMUdict"
sh tools/fetch_cmudict.sh "$data"

step "2/5 split (all pronunciations of a word on one side; 90/5/5 by a hash of the word)"
"$attn" g2p split --data "$data" --out "$data/split.tsv"

step "3/5 train"
mkdir -p "$out"
# shellcheck disable=SC2086
"$attn" g2p train --data "$data" --out "$out" --dim 64 --heads 4 --ff 256 --layers 2 \
  --epochs 2 --batch 64 ${ATTN_G2P_DEMO_TRAIN_ARGS:-} | tee "$out/train.log"

step "4/5 evaluate on val and test (greedy decoding)"
"$attn" g2p eval "$out/best.safetensors" --data "$data" | tee "$out/eval.txt"

step "5/5 predict (beam of 4, 2 best)"
"$attn" g2p predict "$out/best.safetensors" --beam 4 --n-best 2 attention transformer \
  pronunciation grapheme phoneme cambridge zyzzyva

echo
echo "demo-g2p: done in $(($(date +%s) - t0)) s; model, log and scores in $out/"
