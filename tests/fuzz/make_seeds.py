#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets to tests/fuzz/seeds/<target>/.

Seeds are small valid inputs (tiny shapes, a few hundred bytes each) that
reach deep into each command: the fuzzer mutates them. Run again after a
format change: python3 tests/fuzz/make_seeds.py (needs numpy)."""
import json
import os
import shutil
import struct

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
rng = np.random.default_rng(19)


def st_bytes(tensors, meta=None):
    """safetensors bytes of {name: array} (F32, BOOL, I32, U8 by dtype) and metadata."""
    names = {np.float32: "F32", np.bool_: "BOOL", np.int32: "I32", np.int64: "I64", np.uint8: "U8"}
    header, data = {}, b""
    if meta:
        header["__metadata__"] = meta
    for name, a in tensors.items():
        raw = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": names[a.dtype.type], "shape": list(a.shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def sdpa_seeds():
    q, k, v = f32(1, 2, 3, 4), f32(1, 1, 5, 4), f32(1, 1, 5, 2)
    base = {"q": q, "k": k, "v": v}
    yield "plain", base, None
    yield "grad", {**base, "dout": f32(1, 2, 3, 2)}, {"causal": "1", "scale": "0.5"}
    yield "masks", {**base, "mask": rng.random((3, 5)) < 0.7, "key_lens": np.array([4], np.int32)}, \
        {"window_left": "2", "window_right": "-1"}
    yield "add_mask", {**base, "mask": f32(1, 2, 1, 5)}, {"format": "pt"}
    yield "alibi_rel", {**base, "rel_bias": f32(2, 4), "dout": f32(1, 2, 3, 2)}, \
        {"alibi": "1", "rel_max_distance": "8", "rel_bidirectional": "1"}
    yield "shaw", {**base, "shaw_k": f32(3, 4), "shaw_v": f32(3, 2), "dout": f32(1, 2, 3, 2)}, None
    yield "block", {**base, "block_mask": np.array([[1, 0, 1], [1, 1, 0]], np.uint8)}, \
        {"block_size": "2", "q_offset": "1"}
    yield "rope", {**base, "dout": f32(1, 2, 3, 2)}, {"rope": "half", "rope_theta": "500"}


def mha(prefix, E):
    return {prefix + "in_proj_weight": f32(3 * E, E), prefix + "in_proj_bias": f32(3 * E),
            prefix + "out_proj.weight": f32(E, E), prefix + "out_proj.bias": f32(E)}


def ffn(E, F, norms):
    t = {"linear1.weight": f32(F, E), "linear1.bias": f32(F), "linear2.weight": f32(E, F),
         "linear2.bias": f32(E)}
    for i in range(1, norms + 1):
        t[f"norm{i}.weight"], t[f"norm{i}.bias"] = f32(E), f32(E)
    return t


def layer_seeds():
    E = 4
    yield "mha", {**mha("", E), "query": f32(1, 3, E), "dout": f32(1, 3, E)}, \
        {"kind": "mha", "num_heads": "2", "average_attn_weights": "1"}
    yield "mha_gqa", {"q_proj_weight": f32(E, E), "k_proj_weight": f32(2, E),
                      "v_proj_weight": f32(2, E), "in_proj_bias": f32(E + 4),
                      "out_proj.weight": f32(E, E), "out_proj.bias": f32(E),
                      "query": f32(1, 2, E), "key": f32(1, 3, E), "value": f32(1, 3, E),
                      "key_padding_mask": np.array([[0, 0, 1]], np.bool_),
                      "attn_mask": f32(2, 3)}, {"kind": "mha", "num_heads": "2", "num_kv_heads": "1"}
    yield "encoder", {**mha("self_attn.", E), **ffn(E, 8, 2), "src": f32(1, 3, E),
                      "src_key_padding_mask": np.array([[0, 0, 1]], np.bool_), "dout": f32(1, 3, E)}, \
        {"kind": "encoder", "num_heads": "2", "norm_first": "0", "activation": "relu",
         "layer_norm_eps": "1e-05", "batch_first": "1"}
    yield "decoder", {**mha("self_attn.", E), **mha("multihead_attn.", E), **ffn(E, 8, 3),
                      "tgt": f32(1, 2, E), "memory": f32(1, 3, E), "tgt_mask": f32(2, 2),
                      "memory_key_padding_mask": np.array([[0, 1, 0]], np.bool_)}, \
        {"kind": "decoder", "num_heads": "2", "norm_first": "1", "activation": "gelu"}


TOKENIZER = "attn-bpe 1\nmax_chunk 64\nmerges 3\n35 100\n35 113\n259 114\n"


def model_tensors(prefix, vocab, E, F, layers, max_len):
    t = {prefix + "embedding.weight": f32(vocab, E), prefix + "positions.weight": f32(max_len, E)}
    for i in range(layers):
        for name, a in {**mha("self_attn.", E), **ffn(E, F, 2)}.items():
            t[f"{prefix}layers.{i}.{name}"] = a
    t[prefix + "fc.weight"], t[prefix + "fc.bias"] = f32(2, E), f32(2)
    return t


def model_seeds():
    vocab, E = 3 + 256 + 3, 2
    for layers in (0, 1):
        config = {"vocab": vocab, "d_model": E, "heads": 1, "ff": 2, "layers": layers, "max_len": 4,
                  "classes": 2, "dropout": 0.1, "sinusoidal": 0, "norm_first": 0,
                  "activation": "relu"}
        meta = {"tokenizer": TOKENIZER, "labels": "ham,spam",
                "config": json.dumps(config, separators=(",", ":"))}
        tensors = model_tensors("", vocab, E, 2, layers, 4)
        if layers == 0:  # an ensemble of two
            meta["ensemble.members"] = "2"
            tensors.update(model_tensors("member2.", vocab, E, 2, layers, 4))
        yield f"layers{layers}", tensors, meta


def write(target, name, data):
    d = os.path.join(HERE, "seeds", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def main():
    shutil.rmtree(os.path.join(HERE, "seeds"), ignore_errors=True)
    for target, seeds in (("sdpa", sdpa_seeds), ("layer", layer_seeds), ("model", model_seeds)):
        for name, tensors, meta in seeds():
            write(target, name + ".safetensors", st_bytes(tensors, meta))
    # the reader: one of each dtype, metadata, an empty tensor
    write("safetensors", "dtypes.safetensors",
          st_bytes({"a": f32(2, 2), "b": np.array([1, 0], np.bool_), "c": np.array([7], np.int64),
                    "d": np.zeros((0, 3), np.float32), "e": np.array([1, 2], np.uint8)},
                   {"format": "pt", "note": "caf\u00e9"}))
    write("safetensors", "empty.safetensors", st_bytes({}))
    write("json", "header.json", json.dumps(
        {"__metadata__": {"k": "v"}, "x": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}}
    ).encode())
    write("json", "values.json",
          b'[null, true, false, -0.5e+3, 18446744073709551615, "a\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9'
          b'\\ud83d\\ude00", {}, [], {"a": {"b": [1, 2, {"c": ""}]}}]')
    mail = os.path.join(ROOT, "tests", "data", "mail")
    for name in sorted(os.listdir(mail)):
        with open(os.path.join(mail, name), "rb") as f:
            write("mail", name, f.read())
    write("bpe", "tokenizer.txt", TOKENIZER.encode())
    write("bpe", "text.txt", "Subject: Re: \u4f60\u597d world!! 100 %  \t\n\n  end".encode())


if __name__ == "__main__":
    main()
