"""Encodes texts the way Hugging Face's tokenizers library reads an exported
tokenizer.json (Split regex, byte-level alphabet, BPE merges by rank) and
compares with attn's ids. Python's `re` stands in for the library's
Oniguruma (the exported regex uses only syntax both read alike: classes
with \\xHH ranges, bounded repeats, a lookahead); Debian has no
`tokenizers` package.
Usage: python3 tools/check_hf_tokenizer.py TOKENIZER.json CASES.json
CASES.json: [{"text": "...", "ids": [attn's ids]}, ...]. Exit 0 iff all match.
"""
import json
import re
import sys


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def main():
    tok = json.load(open(sys.argv[1], encoding="utf-8"))
    cases = json.load(open(sys.argv[2], encoding="utf-8"))
    pre = tok["pre_tokenizer"]["pretokenizers"]
    assert pre[0]["type"] == "Split" and pre[0]["behavior"] == "Isolated"
    assert pre[1]["type"] == "ByteLevel" and not pre[1]["use_regex"] and not pre[1]["add_prefix_space"]
    split = re.compile(pre[0]["pattern"]["Regex"])
    vocab = tok["model"]["vocab"]
    rank = {}
    for i, m in enumerate(tok["model"]["merges"]):
        a, b = m.split(" ")
        rank.setdefault((a, b), i)
    b2u = bytes_to_unicode()
    bad = 0
    for case in cases:
        text, want = case["text"], case["ids"]
        got, pos = [], 0
        for m in split.finditer(text):
            assert m.start() == pos, "the regex skips text at %d" % pos
            pos = m.end()
            word = [b2u[b] for b in m.group(0).encode("utf-8")]
            while len(word) > 1:
                best = min(range(len(word) - 1), key=lambda i: (rank.get((word[i], word[i + 1]), 1 << 60), i))
                if (word[best], word[best + 1]) not in rank:
                    break
                word[best:best + 2] = [word[best] + word[best + 1]]
            got += [vocab[w] for w in word]
        assert pos == len(text), "the regex stops at %d of %d" % (pos, len(text))
        if got != want:
            bad += 1
            print("mismatch for %r:\n  tokenizer.json %s\n  attn           %s" % (text, got, want))
    print("%d of %d texts encode alike" % (len(cases) - bad, len(cases)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
