"""Pictures of attention weights from numpy arrays (`attn viz`; PNG, SVG or
PDF by the path's extension, .html for the interactive head view).

weights: probabilities [Lq, Lk], [H, Lq, Lk] or [Layers, H, Lq, Lk];
tokens: labels of both axes (or of the queries, with key_tokens for the
keys): str labels, or a byte-level tokenizer's tokens as bytes, labelled by
the characters they hold ('·' where a token cuts a character: b"\\xe4\\xbc",
b"\\x9a" are drawn 会· and ·会). Options as the tool's: cmap "bone" |
"viridis", title, region ((q0, q1), (k0, k1)), cross (axes labelled output
/ source), max_labels, merge "chars" | "words" (the attention of the
characters or words the tokens make up: a unit's keys summed, its queries
averaged; str tokens count as their UTF-8)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Sequence, Tuple

from ._tool import run_on_weights

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

Region = Tuple[Tuple[int, int], Tuple[int, int]]


MERGES = ("chars", "words")


def _args(path, layer, cmap, title, region, cross, max_labels, merge=None):
    a = [path, "--layer", layer]
    if merge is not None:
        if merge not in MERGES:
            raise ValueError("merge=%r: expected None, 'chars' or 'words'" % (merge,))
        a += ["--merge", merge]
    if cmap:
        a += ["--cmap", cmap]
    if title:
        a += ["--title", title]
    if region:
        (q0, q1), (k0, k1) = region
        a += ["--region", "%s:%s,%s:%s" % (q0, q1, k0, k1)]
    if cross:
        a.append("--cross")
    if max_labels:
        a += ["--max-labels", max_labels]
    return a


def heatmap(weights: ArrayLike, tokens: Optional[Sequence[object]] = None,
            path: str = "attention.png", key_tokens: Optional[Sequence[object]] = None,
            layer: int = 0, head: int = 0, cmap: Optional[str] = None,
            title: Optional[str] = None, region: Optional[Region] = None, cross: bool = False,
            max_labels: Optional[int] = None, merge: Optional[str] = None) -> str:
    """One head as a heatmap: query tokens down, key tokens across."""
    a = _args(path, layer, cmap, title, region, cross, max_labels, merge) + ["--head", head]
    run_on_weights("viz", weights, tokens, key_tokens, args=a)
    return path


def heads(weights: ArrayLike, tokens: Optional[Sequence[object]] = None,
          path: str = "heads.png", key_tokens: Optional[Sequence[object]] = None,
          layer: int = 0, **opts: Any) -> str:
    """Every head of one layer as small multiples."""
    run_on_weights("viz", weights, tokens, key_tokens,
                   args=_args(path, layer, **_opts(opts)) + ["--all-heads"])
    return path


def model(weights: ArrayLike, tokens: Optional[Sequence[object]] = None,
          path: str = "model.png", key_tokens: Optional[Sequence[object]] = None,
          **opts: Any) -> str:
    """The layers x heads overview."""
    run_on_weights("viz", weights, tokens, key_tokens,
                   args=_args(path, 0, **_opts(opts)) + ["--model"])
    return path


def html(weights: ArrayLike, tokens: Optional[Sequence[object]] = None,
         path: str = "attention.html", key_tokens: Optional[Sequence[object]] = None,
         title: Optional[str] = None, merge: Optional[str] = None) -> str:
    """A self-contained interactive page (head view)."""
    run_on_weights("viz", weights, tokens, key_tokens,
                   args=_args(path, 0, None, title, None, False, None, merge))
    return path


def _opts(opts):
    base = dict(cmap=None, title=None, region=None, cross=False, max_labels=None, merge=None)
    unknown = set(opts) - set(base)
    if unknown:
        raise TypeError("unexpected option(s): %s" % ", ".join(sorted(unknown)))
    base.update(opts)
    return base
