"""Golden files for attn's GPT-2 tokenizer (src/apps/text/gpt2_bpe.h):
a small byte-level BPE trained by tools/gpt2_bpe_ref.py on the text below,
written as a Hugging Face tokenizer in two forms (vocab.json + merges.txt,
and tokenizer.json with the merges as [left, right] arrays), and the ids
the reference encoder (OpenAI's encoder.py algorithm) gives for each test
text: tests/golden/gpt2_tokenizer/{vocab.json, merges.txt, tokenizer.json,
cases.json}. With GPT2_TOKENIZER_DIR set to a folder with the real GPT-2
vocab.json + merges.txt (tools/fetch_gpt2_tokenizer.sh), also the real
vocabulary's ids: real_cases.json.
Usage: /usr/bin/python3 tools/golden_gpt2_tokenizer.py tests/golden"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_bpe_ref as ref  # noqa: E402

OUT = os.path.join(sys.argv[1] if len(sys.argv) > 1 else "tests/golden", "gpt2_tokenizer")

CORPUS = """The State of the Union is strong. We have come a long way, and we'll go further;
they're ready, you've seen it, I'm sure it's true and he'd agree. In 1999 there were 1,234
people; in 2024, 56.7 percent more! Attention is all you need: softmax(QK^T / sqrt(d)) V.
Les élèves étudient à l'école; naïve café crème. Ελληνικά γράμματα. Русский текст здесь.
日本語の文章です。中文文本。 Numbers ١٢٣ and Ⅻ and ½. Tabs\tand  double  spaces,
newlines\n\nand trailing   \n"""

CASES = [
    "", "Hello world", "Hello, world! How's it going? I'm fine; they'll see.",
    "it's IT'S it'S 'S ''s don't 're're 'x", "  leading spaces", "trailing spaces   ",
    "a  b   c\n\n\nd\t\te \n f", "\n", "   ", " ", "x ", " x", "1234567890 12 3.14159 -42",
    "naïve café crème brûlée", "Ελληνικά γράμματα", "日本語の文章です。", "emoji 🙂👍🏽 ok",
    "Arabic digits ١٢٣ and roman Ⅻ ½", "non\u00a0breaking\u3000ideographic\u2003em",
    "mixed123abc___!!!???", "<|endoftext|> is text here", "CamelCaseWordsAndUPPER",
    "\u200bzero width\u200b", "line\r\nbreaks\r\n", "a" * 300, " " * 40 + "x", "\t\n \t\nq",
    "The State of the Union is strong. We have come a long way.",
]


def main():
    vocab, merges = ref.train(CORPUS, 200)
    full = ref.write_hf(OUT, vocab, merges, array_merges=True)
    enc = ref.Encoder(full, merges)
    cases = [{"text": t, "ids": enc.encode(t)} for t in CASES]
    # every id must decode back to the text
    inv = {i: s for s, i in full.items()}
    for c in cases:
        back = bytes(ref.CHAR_BYTES[ch] for i in c["ids"] for ch in inv[i]).decode("utf-8")
        assert back == c["text"], c
    with open(os.path.join(OUT, "cases.json"), "w", encoding="utf-8") as f:
        f.write("[\n" + ",\n".join(json.dumps(c) for c in cases) + "\n]\n")
    real = os.environ.get("GPT2_TOKENIZER_DIR")
    if real:
        with open(os.path.join(real, "vocab.json"), encoding="utf-8") as f:
            rv = json.load(f)
        with open(os.path.join(real, "merges.txt"), encoding="utf-8") as f:
            rm = [tuple(l.rstrip("\n").split(" ")) for l in f if l.strip() and not l.startswith("#version")]
        renc = ref.Encoder(rv, rm)
        rc = [{"text": t, "ids": renc.encode(t)} for t in CASES + [CORPUS]]
        with open(os.path.join(OUT, "real_cases.json"), "w", encoding="utf-8") as f:
            f.write("[\n" + ",\n".join(json.dumps(c) for c in rc) + "\n]\n")
    print("gpt2_tokenizer: %d tokens, %d merges, %d cases" % (len(full), len(merges), len(cases)))


if __name__ == "__main__":
    main()
