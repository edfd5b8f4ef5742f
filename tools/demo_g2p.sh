#!/bin/sh
# make demo-g2p: grapheme-to-phoneme end to end (docs/G2P.md), the recipe of
# docs/G2P.md's "A left-to-right and a right-to-left model in one hour":
#   1. fetches CMUdict (tools/fetch_cmudict.sh -> data/cmudict)
#   2. writes the word-level split (data/cmudict/split.tsv) and its counts
#   3. trains two encoder-decoders side by side, one thread each: a
#      left-to-right one and a right-to-left one (--reverse), the default
#      model (d_model 128, 4 heads, ff 512, 3 encoder + 3 decoder layers,
#      1.4 M parameters) on stress-free targets (--no-stress, as the
#      literature trains), batch 128, lr 1.5e-3, no dropout, warm-up + cosine
#      over as many epochs (at most 40) as fit the demo's time budget:
#      `attn g2p train --time-budget` times the step on this machine first,
#      prints the expected duration and sets the schedule for the epochs chosen
#   4. chooses each model by greedy validation WER among its later epochs and
#      the averages of its last 2..8 (tools/g2p_select.sh; the test set is
#      not read), then evaluates on val and test: the left-to-right model's
#      beam of 5 rescored by the right-to-left model (--rescore), WER and PER
#      with stress removed, any reference counts, beside the literature's
#      figures (the WFST baseline: 24.4 %); and the left-to-right model alone
#   5. predicts a few words with `attn g2p predict` (beam search of 4, the
#      2 best pronunciations of each with their scores)
#   6. shows the cross attention of a few test words (greedy output): per word
#      WORD.safetensors (attn g2p predict --save-attention), WORD_layer<L>.png
#      (layer L, mean of the heads), WORD_heads.png (every layer: each head and
#      the mean), WORD.html (interactive) and WORD_alignment.txt (attn
#      diagnose: how monotonic the letter -> phoneme path is)
# Everything goes to runs/g2p-demo/ (l2r/ and r2l/: train.log, epoch files,
# selected.safetensors; select.txt, eval.txt, cross/).
# Environment: ATTN_G2P_DEMO_BUDGET (seconds for the whole demo, default 900:
# 15 minutes; training gets what is left of it less 150 s for the steps after
# it, planned from a probe of the step before training; 3600 is the hour of
# docs/G2P.md's figures), ATTN_G2P_DEMO_DATA (dictionary folder),
# ATTN_G2P_DEMO_OUT (output folder), ATTN_G2P_DEMO_TRAIN_ARGS (extra `attn g2p
# train` options for both models, e.g. "--epochs 1"; later options win).
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

step "3/6 train a left-to-right and a right-to-left model side by side, one thread each"
left=$((budget - ($(date +%s) - t0) - 150))
[ "$left" -ge 60 ] || left=60
echo "demo-g2p: time budget $budget s (ATTN_G2P_DEMO_BUDGET); training gets $left s of it"
rm -rf "$out/l2r" "$out/r2l"
mkdir -p "$out/l2r" "$out/r2l"
train() { # dir, extra options
  d=$1
  shift
  # shellcheck disable=SC2086
  "$attn" g2p train --data "$data" --out "$out/$d" --epochs 40 --batch 128 --lr 1.5e-3 --dropout 0 \
    --no-stress --threads 1 --keep-epochs --time-budget "$left" "$@" ${ATTN_G2P_DEMO_TRAIN_ARGS:-}
}
train r2l --reverse --progress quiet >"$out/r2l/train.log" 2>&1 &
r2l=$!
# (the pipeline's status is tee's: the training's own goes through a file)
{
  if train l2r 2>&1; then rc=0; else rc=$?; fi
  echo "$rc" >"$out/l2r/.rc"
} | tee "$out/l2r/train.log"
if [ "$(cat "$out/l2r/.rc" 2>/dev/null)" != 0 ]; then
  kill "$r2l" 2>/dev/null || true
  echo "demo-g2p: the left-to-right model's training failed (above)" >&2
  exit 1
fi
wait "$r2l" || { echo "demo-g2p: the right-to-left model's training failed:" >&2; tail -n 5 "$out/r2l/train.log" >&2; exit 1; }
echo "right-to-left model: $(grep -c '^Epoch' "$out/r2l/train.log") epochs, last: $(grep '^Epoch' "$out/r2l/train.log" | tail -n 1)"

step "4/6 choose each model on val, then evaluate (beam 5; the L2R beam rescored by the R2L model)"
: >"$out/select.txt"
for d in l2r r2l; do
  n=$(ls "$out/$d"/epoch_*.safetensors | wc -l)
  G2P_DATA=$data sh tools/g2p_select.sh "$attn" "$out/$d" $((n / 2 + 1)) 8 | tee -a "$out/select.txt" | tail -n 1
done
"$attn" g2p eval "$out/l2r/selected.safetensors" --rescore "$out/r2l/selected.safetensors" \
  --beam 5 --data "$data" --threads 2 | tee "$out/eval.txt"
"$attn" g2p eval "$out/l2r/selected.safetensors" --beam 5 --split test --worst 0 --data "$data" \
  --threads 2 >"$out/eval_l2r.txt"
ns() { # the test line's stress-removed WER / PER
  sed -n 's/^test .*stress removed: WER *\([0-9.]*\) % *PER *\([0-9.]*\) %.*/\1 % \/ \2 %/p' "$1"
}
echo
echo "demo-g2p: test WER / PER (stress removed, any reference, beam 5), $(($(date +%s) - t0)) s in:"
echo "  L2R rescored by R2L: $(ns "$out/eval.txt")   the L2R model alone: $(ns "$out/eval_l2r.txt")"
echo "  beside CMUdict's published figures: Phonetisaurus WFST 24.4 %, Sequitur 24.5 % / 5.9 %,"
echo "  Yao & Zweig BiLSTM 23.55 % / 5.45 %; this recipe's hour (ATTN_G2P_DEMO_BUDGET=3600):"
echo "  23.09 % / 5.51 % (3 seeds: 22.88-23.22 %) on an AMD EPYC Zen 5 (docs/G2P.md)"

step "5/6 predict (beam of 4, 2 best)"
"$attn" g2p predict "$out/l2r/selected.safetensors" --beam 4 --n-best 2 attention transformer \
  pronunciation grapheme phoneme cambridge zyzzyva

step "6/6 cross attention of test words (phonemes down, letters across)"
mkdir -p "$out/cross"
words="attention abandonment encryption neoconservative"
for w in $words; do
  f=$out/cross/$w.safetensors
  "$attn" g2p predict "$out/l2r/selected.safetensors" "$w" --save-attention "$f"
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
