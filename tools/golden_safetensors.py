"""Golden file for tests/test_safetensors.c: a safetensors file written from
torch tensors by tools/st.py (Python's json.dumps escapes non-ASCII names as
\\uXXXX, which the C reader must decode). Values are simple formulas so the
C test can check them exactly:
    /usr/bin/python3 tools/golden_safetensors.py tests/golden"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st  # noqa: E402

out = sys.argv[1] if len(sys.argv) > 1 else "tests/golden"
t = {
    # f32 [2,3] = i*0.5 - 1
    "layer.weight": (torch.arange(6, dtype=torch.float64) * 0.5 - 1).float().reshape(2, 3),
    # bf16 [4]: exactly representable values
    "emb.bf16": torch.tensor([1.5, -2.25, 0.0078125, -65536.0], dtype=torch.bfloat16),
    # f16 [2,2]
    "half": torch.tensor([[0.5, -1.0], [65504.0, 0.000061035156]], dtype=torch.float16),
    "mask": torch.tensor([True, False, True]),
    "ids": torch.tensor([-(2**40), 7], dtype=torch.int64),
    "i32": torch.tensor([[-5, 6]], dtype=torch.int32),
    "i8": torch.tensor([-128, 127], dtype=torch.int8),
    "u8": torch.tensor([0, 255, 9], dtype=torch.uint8),
    "scalar": torch.tensor(3.25),               # 0-d
    "empty": torch.zeros(0, 4),                 # no bytes
    "caf\u00e9 \U0001F600 \"q\"": torch.tensor([42.0]),  # escapes on the way
}
st.save(os.path.join(out, "st_torch.safetensors"), t,
        metadata={"format": "pt", "note": "line\nbreak \u00e9"})
