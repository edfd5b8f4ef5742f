#!/bin/sh
# make demo-g2p: grapheme-to-phoneme end to end (docs/G2P.md).
#   1. fetches CMUdict (tools/fetch_cmudict.sh -> data/cmudict)
#   2. writes the word-level split (data/cmudict/split.tsv) and its counts
#   3. trains the default encoder-decoder (d_model 128, 4 heads, ff 512, 3
#      encoder + 3 decoder layers, 1,403,856 parameters) for as many epochs of
#      batch 128 (at most 12) as fit the demo's time budget: `attn g2p train
#      --time-budget` times this model's step on this machine first, prints
#      the expected duration, and sets its warm-up + cosine schedule for the
#      epochs chosen (label smoothing 0.1, AdamW, lr 1.5e-3, no dropout)
#   4. evaluates it (greedy decoding) on val and test: WER and PER with and
#      without stress, and the worst test errors
#   5. predicts a few words with `attn g2p predict` (beam search of 4, the
#      2 best pronunciations of each with their scores)
#   6. shows the cross attention of a few test words (greedy output): per word
#      WORD.safetensors (attn g2p predict --save-attention), WORD_layer<L>.png
#      (layer L, mean of the heads), WORD_heads.png (every layer: each head and
#      the mean), WORD.html (interactive) and WORD_alignment.txt (attn
#      diagnose: how monotonic the letter -> phoneme path is)
# Everything goes to runs/g2p-demo/ (train.log, best.safetensors, eval.txt,
# cross/).
# Environment: ATTN_G2P_DEMO_BUDGET (seconds for the whole demo, default 900:
# 15 minutes; training gets what is left of it less 90 s for the steps after
# it, planned from a probe of the step before training; a shared machine's
# speed can move by a quarter within minutes, hence 15 of the 20 minutes the
# demo may take), ATTN_G2P_DEMO_DATA (dictionary folder), ATTN_G2P_DEMO_OUT
# (output folder), ATTN_G2P_DEMO_TRAIN_ARGS (extra `attn g2p train` options,
# e.g. "--epochs 1"; later options win).
set -e
attn=${1:-build/attn}
data=${ATTN_G2P_DEMO_DATA:-data/cmudict}
out=${ATTN_G2P_DEMO_OUT:-runs/g2p-demo}
budget=${ATTN_G2P_DEMO_BUDGET:-900}
case $budget in '' | *[!0-9]*) echo "demo-g2p: ATTN_G2P_DEMO_BUDGET=$budget: whole seconds" >&2; exit 2 ;; esac
t0=$(date +%s)
step() {
  echo
  echo "== [$(($(date +%s) - t0)) s] $*"
}

step "1/6 CMUdict"
sh tools/fetch_cmudict.sh "$data"

step "2/6 split (all pronunciations of a word on one side; 90/5/5 by a hash of the word)"
"$attn" g2p split --data "$data" --out "$data/split.tsv"

step "3/6 train"
mkdir -p "$out"
left=$((budget - ($(date +%s) - t0) - 90))
[ "$left" -ge 60 ] || left=60
echo "demo-g2p: time budget $budget s (ATTN_G2P_DEMO_BUDGET); training gets $left s of it"
# shellcheck disable=SC2086
"$attn" g2p train --data "$data" --out "$out" --epochs 12 --batch 128 --lr 1.5e-3 --dropout 0 \
  --time-budget "$left" ${ATTN_G2P_DEMO_TRAIN_ARGS:-} | tee "$out/train.log"

step "4/6 evaluate on val and test (greedy decoding)"
"$attn" g2p eval "$out/best.safetensors" --data "$data" | tee "$out/eval.txt"

step "5/6 predict (beam of 4, 2 best)"
"$attn" g2p predict "$out/best.safetensors" --beam 4 --n-best 2 attention transformer \
  pronunciation grapheme phoneme cambridge zyzzyva

step "6/6 cross attention of test words (phonemes down, letters across)"
mkdir -p "$out/cross"
words="attention abandonment encryption neoconservative"
for w in $words; do
  f=$out/cross/$w.safetensors
  "$attn" g2p predict "$out/best.safetensors" "$w" --save-attention "$f"
  "$attn" diagnose "$f" >"$out/cross/${w}_alignment.txt"
  layers=$(sed -n 's/.*cross attention, \([0-9]*\) layer.*/\1/p' "$out/cross/${w}_alignment.txt")
  l=0
  while [ "$l" -lt "$layers" ]; do
    "$attn" viz "$f" "$out/cross/${w}_layer$l.png" --layer "$l" --mean --title "$w: layer $l, mean of the heads"
    l=$((l + 1))
  done
  "$attn" viz "$f" "$out/cross/${w}_heads.png" --model --title "$w: every layer and head"
  "$attn" viz "$f" "$out/cross/$w.html" --title "$w: cross attention"
  grep -E "mean|leave out|path|->" "$out/cross/${w}_alignment.txt"
done

echo
echo "demo-g2p: done in $(($(date +%s) - t0)) s; model, log and scores in $out/"
