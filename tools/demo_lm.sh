#!/bin/sh
# make demo-lm: the language model end to end (docs/LM.md).
#   1. fetches the State of the Union addresses (tools/fetch_sotu.sh -> data/sotu)
#   2. trains the demo model (4 pre-LN blocks, d_model 128, 4 heads, ff 512,
#      BPE of 4,096 ids, windows of 128 tokens, batch 16, AdamW 3e-3 -> 3e-4
#      cosine) for as many steps of at most 8 epochs as fit the time budget:
#      `attn lm train --time-budget` times this model's step on this machine
#      first and sets the schedule for the steps it chooses. It prints the
#      Kneser-Ney bigram and trigram baselines on the same validation tokens
#      and the model's validation perplexity after each epoch.
#   3. repeats the validation perplexities of the training log next to the n-grams'
#   4. generates a paragraph (temperature 0.8, top-k 40, top-p 0.95, seed 1)
#   5. measures generation at a 1k-token context: the first ~1,000 tokens of a
#      validation address as the prompt, 128 new tokens, tokens/s with the f32,
#      f16, int8 and paged f32 KV caches
#   6. saves the attention of a generated sentence over its prompt and draws
#      it (attn viz: PNG of the last layer's mean over heads, interactive HTML)
# Everything goes to runs/lm-demo/ (train.log, best.safetensors, eval.txt,
# generate.txt, speed.txt, attention.*).
# Environment: ATTN_LM_DEMO_BUDGET (seconds for the whole demo, default 1020:
# 17 of the 20 minutes the demo may take; training gets what is left less
# 150 s for the steps after it), ATTN_LM_DEMO_DATA, ATTN_LM_DEMO_OUT,
# ATTN_LM_DEMO_TRAIN_ARGS (extra `attn lm train` options; later ones win).
set -e
attn=${1:-build/attn}
data=${ATTN_LM_DEMO_DATA:-data/sotu}
out=${ATTN_LM_DEMO_OUT:-runs/lm-demo}
budget=${ATTN_LM_DEMO_BUDGET:-1020}
case $budget in '' | *[!0-9]*) echo "demo-lm: ATTN_LM_DEMO_BUDGET=$budget: whole seconds" >&2; exit 2 ;; esac
t0=$(date +%s)
step() {
  echo
  echo "== [$(($(date +%s) - t0)) s] $*"
}

step "1/6 the State of the Union addresses"
sh tools/fetch_sotu.sh "$data"

step "2/6 train (validation: every tenth address, i % 10 == 4 by year)"
mkdir -p "$out"
left=$((budget - ($(date +%s) - t0) - 150))
[ "$left" -ge 60 ] || left=60
echo "demo-lm: time budget $budget s (ATTN_LM_DEMO_BUDGET); training gets $left s of it"
# shellcheck disable=SC2086
"$attn" lm train --data "$data" --out "$out" --vocab 4096 --dim 128 --heads 4 --ff 512 --layers 4 \
  --seq 128 --batch 16 --epochs 8 --lr 3e-3 --min-lr 3e-4 --time-budget "$left" \
  ${ATTN_LM_DEMO_TRAIN_ARGS:-} | tee "$out/train.log"

step "3/6 validation perplexity against the Kneser-Ney n-grams (from the training log; attn lm eval MODEL --data DIR recomputes it)"
grep -E "^(baseline|epoch)" "$out/train.log" | tee "$out/eval.txt"

step "4/6 a paragraph"
"$attn" lm generate "$out/best.safetensors" --prompt "Mr. Speaker, Mr. Vice President, Members of Congress, my fellow Americans: " \
  --tokens 150 --seed 1 | tee "$out/generate.txt"

step "5/6 generation speed at a 1k-token context"
val=$(ls "$data"/*.txt | sed -n 5p)
head -c 4300 "$val" >"$out/prompt_1k.txt"
echo "prompt: the first 4,300 bytes of $(basename "$val") (a validation address)"
: >"$out/speed.txt"
for kv in f32 f16 int8 paged; do
  "$attn" lm generate "$out/best.safetensors" --prompt-file "$out/prompt_1k.txt" --tokens 128 \
    --seed 1 --kv-cache "$kv" | tail -n 1 | tee -a "$out/speed.txt"
done

step "6/6 the attention of a generated sentence over its prompt"
"$attn" lm generate "$out/best.safetensors" --prompt "The state of our Union is" --tokens 16 --seed 2 \
  --save-attention "$out/attention.safetensors"
layers=$(sed -n 's/.*model: \([0-9]*\) layers.*/\1/p' "$out/train.log" | head -n 1)
"$attn" viz "$out/attention.safetensors" "$out/attention.png" --layer $((${layers:-4} - 1)) --mean \
  --title "generated tokens (down) over the prompt and the tokens before them: last layer, mean of the heads"
"$attn" viz "$out/attention.safetensors" "$out/attention.html" --title "attn lm: generated text over its prompt"

echo
echo "demo-lm: done in $(($(date +%s) - t0)) s; model, log and text in $out/"
