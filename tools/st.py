"""Minimal safetensors reader/writer for the golden-file generators
(torch 1.13 from Debian has no safetensors support)."""
import json
import struct

import numpy as np
import torch

_DT = {
    torch.float32: ("F32", np.float32),
    torch.float16: ("F16", np.float16),
    torch.int64: ("I64", np.int64),
    torch.int32: ("I32", np.int32),
    torch.int8: ("I8", np.int8),
    torch.uint8: ("U8", np.uint8),
    torch.bool: ("BOOL", np.bool_),
}


def save(path, tensors, metadata=None):
    """tensors: dict name -> torch.Tensor (F32/F16/BF16/I64/I32/I8/U8/BOOL)."""
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        if t.dtype == torch.bfloat16:
            dt, raw = "BF16", t.view(torch.int16).numpy().tobytes()
        else:
            dt, npt = _DT[t.dtype]
            raw = t.numpy().astype(npt).tobytes()
        header[name] = {"dtype": dt, "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def load(path):
    """Returns (dict name -> torch.Tensor, metadata dict)."""
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8 : 8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    inv = {v[0]: (k, v[1]) for k, v in _DT.items()}
    out = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        raw = data[base + b : base + e]
        if info["dtype"] == "BF16":
            t = torch.from_numpy(np.frombuffer(raw, np.int16).copy()).view(torch.bfloat16)
        else:
            tdt, npt = inv[info["dtype"]]
            t = torch.from_numpy(np.frombuffer(raw, npt).copy())
        out[name] = t.reshape(info["shape"])
    return out, meta
