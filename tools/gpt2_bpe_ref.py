"""A reference GPT-2 byte-level BPE (the algorithm of OpenAI's encoder.py,
written out here; needs the `regex` module, Debian python3-regex) and a
tiny trainer for test vocabularies. Used by tools/golden_gpt2_tokenizer.py
and tools/golden_hf.py; not part of the library."""
import json

import regex

PATTERN = regex.compile(
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def byte_chars():
    """byte -> the character that stands for it (printable Latin-1 as
    itself, the other bytes from U+0100 in order)."""
    own = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, k = {}, 0
    for b in range(256):
        if b in own:
            table[b] = chr(b)
        else:
            table[b] = chr(0x100 + k)
            k += 1
    return table


BYTE_CHARS = byte_chars()
CHAR_BYTES = {c: b for b, c in BYTE_CHARS.items()}
BYTE_ORDER = ([b for b in range(256) if BYTE_CHARS[b] == chr(b)] +
              [b for b in range(256) if BYTE_CHARS[b] != chr(b)])


def to_chars(data: bytes) -> str:
    return "".join(BYTE_CHARS[b] for b in data)


class Encoder:
    def __init__(self, vocab, merges):
        self.vocab = vocab  # string -> id
        self.merges = [tuple(m) for m in merges]
        self.rank = {}
        for i, m in enumerate(self.merges):
            self.rank.setdefault(m, i)

    def bpe(self, word):
        parts = list(word)
        while len(parts) > 1:
            pairs = [(self.rank.get((a, b), None), i)
                     for i, (a, b) in enumerate(zip(parts, parts[1:]))]
            ranked = [p for p in pairs if p[0] is not None]
            if not ranked:
                break
            best = min(ranked)[0]
            a, b = self.merges[best]
            out, i = [], 0
            while i < len(parts):
                if i + 1 < len(parts) and parts[i] == a and parts[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(parts[i])
                    i += 1
            parts = out
        return parts

    def encode(self, text):
        ids = []
        for chunk in PATTERN.findall(text):
            ids += [self.vocab[p] for p in self.bpe(to_chars(chunk.encode("utf-8")))]
        return ids


def train(text, n_merges):
    """Merges of the most frequent adjacent pair over the pre-tokenized
    chunks of text (ties: the smallest pair of strings); returns (vocab
    {string: id} with the 256 byte characters first, then one token per
    merge, merges [(left, right)])."""
    words = {}
    for chunk in PATTERN.findall(text):
        w = tuple(to_chars(chunk.encode("utf-8")))
        words[w] = words.get(w, 0) + 1
    vocab = {BYTE_CHARS[b]: i for i, b in enumerate(BYTE_ORDER)}
    merges = []
    for _ in range(n_merges):
        counts = {}
        for w, c in words.items():
            for p in zip(w, w[1:]):
                counts[p] = counts.get(p, 0) + c
        if not counts:
            break
        best = min(counts, key=lambda p: (-counts[p], p))
        merges.append(best)
        vocab.setdefault(best[0] + best[1], len(vocab))
        merged = {}
        for w, c in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            merged[tuple(out)] = merged.get(tuple(out), 0) + c
        words = merged
    return vocab, merges


def write_hf(d, vocab, merges, eos="<|endoftext|>", array_merges=False, add_prefix_space=False):
    """vocab.json + merges.txt and the same as tokenizer.json in d."""
    import os
    os.makedirs(d, exist_ok=True)
    full = dict(vocab)
    full[eos] = len(full)
    with open(os.path.join(d, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(full, f, ensure_ascii=False)
    with open(os.path.join(d, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for a, b in merges:
            f.write("%s %s\n" % (a, b))
    tok = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": full[eos], "content": eos, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": True, "special": True}],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": add_prefix_space,
                          "trim_offsets": True, "use_regex": True},
        "post_processor": None, "decoder": {"type": "ByteLevel"},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "",
                  "fuse_unk": False, "vocab": vocab,
                  "merges": [list(m) if array_merges else "%s %s" % m for m in merges]},
    }
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    return full
