"""Regenerates every golden file: runs each tools/golden_*.py with the output
folder as its argument. Needs Debian's python3-torch (torch 1.13):
    /usr/bin/python3 tools/gen_golden.py tests/golden
The generated files are committed; `make test` never needs Python."""
import glob
import os
import subprocess
import sys

out = sys.argv[1] if len(sys.argv) > 1 else "tests/golden"
os.makedirs(out, exist_ok=True)
here = os.path.dirname(os.path.abspath(__file__))
for script in sorted(glob.glob(os.path.join(here, "golden_*.py"))):
    print("==", os.path.basename(script))
    subprocess.run([sys.executable, script, out], check=True)
