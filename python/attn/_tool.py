"""Running the attn tool on attention weights: the pictures (`attn viz`) and
the per-head diagnosis (`attn diagnose`) live in the apps layer, which is not
part of libattn.so. The weights go to the tool as the file it reads (tensor
'attn', token labels in __metadata__), written by libattn into a temporary
directory."""
from __future__ import annotations

import json
import os
import subprocess
import tempfile

import numpy as np

from ._lib import Error, tool_path
from ._st import save_file

# what messages and the diagnosis's header call the caller's array
WEIGHTS_NAME = "weights"


def _weights(w):
    w = np.asarray(w)
    if w.dtype.kind != "f":
        raise Error("weights: dtype %s, expected float probabilities" % w.dtype)
    if w.ndim < 2 or w.ndim > 4:
        raise Error("weights: %d dims, expected [Lq, Lk], [H, Lq, Lk] or [Layers, H, Lq, Lk]" % w.ndim)
    return w.astype(np.float32, copy=False)


def _is_bytes(t):
    return isinstance(t, (bytes, bytearray, memoryview))


def _labels(name, tokens, n):
    if tokens is None:
        return None
    tokens = list(tokens)
    if len(tokens) != n:
        raise Error("%s: %d labels for %d positions" % (name, len(tokens), n))
    if any(_is_bytes(t) for t in tokens):
        return None  # labelled by character from their bytes (_token_bytes)
    return json.dumps([str(t) for t in tokens], ensure_ascii=False)


def _token_bytes(name, tokens):
    """The metadata 'token_bytes' of tokens: a JSON array of hex strings, one
    per token. bytes tokens are a byte-level tokenizer's pieces (a character
    may be cut over several: the tool labels each by the characters it
    holds); str tokens count as their UTF-8."""
    if tokens is None:
        return None
    out = []
    for i, t in enumerate(tokens):
        if _is_bytes(t):
            out.append(bytes(t).hex())
        elif isinstance(t, str):
            out.append(t.encode("utf-8", "surrogatepass").hex())
        else:
            raise Error("%s: token %d is %s, expected str or bytes" % (name, i, type(t).__name__))
    return json.dumps(out)


def run_on_weights(command, weights, tokens=None, key_tokens=None, freq=None, args=()):
    """Writes weights (+ labels, + the tokens' bytes, + freq) to a temporary
    file and runs `attn COMMAND FILE ARGS...`; returns its standard output.
    tokens label both axes, or the query axis when key_tokens is given; each
    is str (a label) or bytes (a token's bytes, labelled by character)."""
    w = _weights(weights)
    lq, lk = w.shape[-2:]
    meta = {}
    if key_tokens is not None:
        for prefix, name, toks, n in (("query_", "tokens", tokens, lq),
                                      ("key_", "key_tokens", key_tokens, lk)):
            s = _labels(name, toks, n)
            if s is not None:
                meta[prefix + "tokens"] = s
            b = _token_bytes(name, toks)
            if b is not None:
                meta[prefix + "token_bytes"] = b
    elif tokens is not None:
        if lq != lk:
            raise Error("tokens: one list labels both axes, but Lq %d != Lk %d "
                        "(give key_tokens too)" % (lq, lk))
        s = _labels("tokens", tokens, lq)
        if s is not None:
            meta["tokens"] = s
        meta["token_bytes"] = _token_bytes("tokens", tokens)
    tensors = {"attn": w}
    if freq is not None:
        f = np.asarray(freq, dtype=np.float32)
        if f.shape != (lk,):
            raise Error("freq: shape %s, expected [%d] (one per key)" % (f.shape, lk))
        tensors["freq"] = f
    tool = tool_path()
    if not tool:
        raise Error("the attn tool was not found (build it with `make`, or set ATTN_BIN)")
    with tempfile.TemporaryDirectory(prefix="attn-py-") as tmp:
        path = os.path.join(tmp, "weights.safetensors")
        save_file(tensors, path, meta)
        r = subprocess.run([tool, command, path] + [str(a) for a in args],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # The temporary file is the package's business: the caller's weights are
    # named "weights" (the argument) in messages and in the output's header.
    if r.returncode != 0:
        # the tool's message already reads "attn COMMAND: [FILE: ]reason"
        # (src/cli/cli_msg.h): passed on as it is, not prefixed again
        msg = r.stderr.decode("utf-8", "replace").strip().replace(path, WEIGHTS_NAME)
        raise Error(msg or "attn %s: exit status %d" % (command, r.returncode))
    return r.stdout.decode("utf-8", "replace").replace(path, WEIGHTS_NAME)
