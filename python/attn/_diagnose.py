"""attn.diagnose: what each attention head does (`attn diagnose` on arrays)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Union

from ._lib import Error
from ._tool import run_on_weights

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

_NUM = ("entropy", "dist", "diag", "prev", "next", "local")


class Diagnosis:
    """.text: the tool's table; .heads: one dict per head with layer, head,
    pattern, entropy, dist, diag, prev, next, local (floats), max_key (int),
    max_weight (float), rare (float or None) and detail (str)."""

    text: str
    heads: List[Dict[str, Any]]

    def __init__(self, text: str) -> None:
        self.text = text
        self.heads = []
        rows = text.splitlines()
        for i, line in enumerate(rows):
            if line.lstrip().startswith("layer head"):
                break
        else:
            raise Error("attn diagnose: no table in its output:\n" + text)
        for line in rows[i + 1:]:
            if not line.strip():
                break  # the table ends; the advice below may start with a number
            f = line.split(None, 11)
            if len(f) < 11 or not f[0].isdigit():
                continue
            h = {"layer": int(f[0]), "head": int(f[1]), "pattern": f[2]}
            h.update(zip(_NUM, map(float, f[3:9])))
            key, _, weight = f[9].partition(":")
            h["max_key"], h["max_weight"] = int(key), float(weight)
            h["rare"] = None if f[10] == "-" else float(f[10])
            h["detail"] = f[11] if len(f) > 11 else ""
            self.heads.append(h)

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return "Diagnosis(%d heads: %s)" % (
            len(self.heads), ", ".join(h["pattern"] for h in self.heads))


def diagnose(weights: ArrayLike, tokens: Optional[Sequence[object]] = None,
             freq: Optional[ArrayLike] = None, causal: Union[bool, str] = "auto",
             chart: Optional[str] = None) -> Diagnosis:
    """Per head of weights ([Lq, Lk], [H, Lq, Lk] or [Layers, H, Lq, Lk]):
    entropy, distances, diagonal / previous / next mass, the most attended
    key and a pattern (diagonal, local, previous-token, next-token, focused,
    sentence, rare-token (needs freq [Lk]), uniform, mixed). causal: "auto",
    True or False; chart: also draw the table to this path. Returns Diagnosis."""
    c = {True: "yes", False: "no", "auto": "auto"}.get(causal)
    if c is None:
        raise Error("causal: %r, expected True, False or 'auto'" % (causal,))
    args = ["--causal", c] + (["--chart", chart] if chart else [])
    return Diagnosis(run_on_weights("diagnose", weights, tokens, None, freq, args))
