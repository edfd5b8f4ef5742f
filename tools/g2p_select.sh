#!/bin/sh
# Chooses a G2P model of one training run by validation (docs/G2P.md):
# every kept epoch from FIRST on (attn g2p train --keep-epochs) and the
# averages of the last 2..MAXAVG kept epochs (attn g2p average) are decoded
# greedily on the validation set; the one with the lowest validation WER
# (stress removed; PER breaks ties) is copied to RUN/selected.safetensors.
# The test set is not read.
# Usage: tools/g2p_select.sh ATTN RUN [FIRST [MAXAVG]]   (FIRST 1, MAXAVG 6)
#        G2P_DATA=DIR: the dictionary (default data/cmudict)
# Prints one line per candidate: name, val WER and PER with stress, without.
set -eu
attn=$1
run=$2
first=${3:-1}
maxavg=${4:-6}
data=${G2P_DATA:-data/cmudict}
ls "$run"/epoch_*.safetensors >/dev/null 2>&1 ||
  { echo "g2p_select: no $run/epoch_NNN.safetensors (train with --keep-epochs)" >&2; exit 1; }
tmp="$run/select.tmp"
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
: >"$tmp/table"
score() { # name file: one table line "name WER PER WER_ns PER_ns file"
  line=$("$attn" g2p eval "$2" --split val --worst 0 --data "$data" 2>/dev/null | grep '^val .*WER') ||
    { echo "g2p_select: attn g2p eval $2 failed" >&2; exit 1; }
  set -- "$1" "$2" $line
  # val N words WER x % PER y % stress removed: WER a % PER b %
  printf '%-12s %6s %6s %6s %6s %s\n' "$1" "$7" "${10}" "${15}" "${18}" "$2" | tee -a "$tmp/table"
}
printf '%-12s %6s %6s %6s %6s\n' candidate WER PER WER_ns PER_ns
epochs=$(ls "$run"/epoch_*.safetensors | sort)
for f in $epochs; do
  e=$(basename "$f" .safetensors | sed 's/epoch_0*//')
  [ "$e" -ge "$first" ] && score "epoch_$e" "$f"
done
n=$(echo "$epochs" | wc -l)
k=2
while [ "$k" -le "$maxavg" ] && [ "$k" -le "$n" ]; do
  "$attn" g2p average --out "$tmp/avg$k.safetensors" $(echo "$epochs" | tail -n "$k") >/dev/null
  score "avg_last_$k" "$tmp/avg$k.safetensors"
  k=$((k + 1))
done
best=$(sort -k4,4g -k5,5g "$tmp/table" | awk '{print $0; exit}')
file=$(echo "$best" | awk '{print $NF}')
cp "$file" "$run/selected.safetensors.tmp" && mv "$run/selected.safetensors.tmp" "$run/selected.safetensors"
echo "selected (lowest val WER, stress removed): $(echo "$best" | awk '{NF--; print}') -> $run/selected.safetensors"
