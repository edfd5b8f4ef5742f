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
from ._tool import run_on_weights


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


def heatmap(weights, tokens=None, path="attention.png", key_tokens=None, layer=0, head=0,
            cmap=None, title=None, region=None, cross=False, max_labels=None, merge=None):
    """One head as a heatmap: query tokens down, key tokens across."""
    a = _args(path, layer, cmap, title, region, cross, max_labels, merge) + ["--head", head]
    run_on_weights("viz", weights, tokens, key_tokens, args=a)
    return path


def heads(weights, tokens=None, path="heads.png", key_tokens=None, layer=0, **opts):
    """Every head of one layer as small multiples."""
    run_on_weights("viz", weights, tokens, key_tokens,
                   args=_args(path, layer, **_opts(opts)) + ["--all-heads"])
    return path


def model(weights, tokens=None, path="model.png", key_tokens=None, **opts):
    """The layers x heads overview."""
    run_on_weights("viz", weights, tokens, key_tokens,
                   args=_args(path, 0, **_opts(opts)) + ["--model"])
    return path


def html(weights, tokens=None, path="attention.html", key_tokens=None, title=None, merge=None):
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
