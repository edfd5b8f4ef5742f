"""Pictures of attention weights from numpy arrays (`attn viz`; PNG, SVG or
PDF by the path's extension, .html for the interactive head view).

weights: probabilities [Lq, Lk], [H, Lq, Lk] or [Layers, H, Lq, Lk];
tokens: labels of both axes (or of the queries, with key_tokens for the
keys). Options as the tool's: cmap "bone" | "viridis", title, region
((q0, q1), (k0, k1)), cross (axes labelled output / source), max_labels."""
from ._tool import run_on_weights


def _args(path, layer, cmap, title, region, cross, max_labels):
    a = [path, "--layer", layer]
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
            cmap=None, title=None, region=None, cross=False, max_labels=None):
    """One head as a heatmap: query tokens down, key tokens across."""
    a = _args(path, layer, cmap, title, region, cross, max_labels) + ["--head", head]
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


def html(weights, tokens=None, path="attention.html", key_tokens=None, title=None):
    """A self-contained interactive page (head view)."""
    run_on_weights("viz", weights, tokens, key_tokens,
                   args=_args(path, 0, None, title, None, False, None))
    return path


def _opts(opts):
    base = dict(cmap=None, title=None, region=None, cross=False, max_labels=None)
    unknown = set(opts) - set(base)
    if unknown:
        raise TypeError("unexpected option(s): %s" % ", ".join(sorted(unknown)))
    base.update(opts)
    return base
