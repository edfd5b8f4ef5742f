"""python -m attn ARGS...: the attn tool, with ARGS (`python -m attn --version`,
`python -m attn sdpa in.safetensors out.safetensors`, ...). The tool is the
one attn.tool_path() finds: $ATTN_BIN, the copy a pip install puts inside the
package (attn/_native/attn), the one next to the library, or `attn` on PATH.
Its exit status, messages and output are the tool's own (it replaces this
process)."""
from __future__ import annotations

import os
import sys
from typing import List, Optional

from ._lib import tool_path


def main(argv: Optional[List[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    tool = tool_path()
    if not tool:
        sys.stderr.write("attn: the attn tool was not found (pip install attn from a clone "
                         "ships it; or build it with `make` and set ATTN_BIN)\n")
        return 1
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(tool, [tool] + args)
    except OSError as e:
        sys.stderr.write("attn: %s: %s\n" % (tool, e.strerror or e))
    return 1


if __name__ == "__main__":
    sys.exit(main())
