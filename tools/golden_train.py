"""Golden file for tests/test_train.c: torch.optim.AdamW and Adam steps on
small tensors with fixed gradients per step (one AdamW run with gradient
clipping and a warm-up + cosine LambdaLR schedule, the no-decay parameters in
their own param group), clip_grad_norm_ results, and schedule values.
    /usr/bin/python3 tools/golden_train.py tests/golden"""
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st  # noqa: E402

out = sys.argv[1] if len(sys.argv) > 1 else "tests/golden"
torch.manual_seed(0)
SHAPES = {"lin.weight": (3, 5), "lin.bias": (3,), "norm.weight": (4,), "scale": ()}
NO_DECAY = {"lin.bias", "norm.weight"}  # attn_decay_rule_default
STEPS = 6

init = {n: torch.randn(s) for n, s in SHAPES.items()}
grads = []
for k in range(STEPS):
    # steps 1 and 4 get large gradients so that clipping to 1.0 bites
    scale = 5.0 if k in (1, 4) else 0.2
    grads.append({n: torch.randn(s) * scale for n, s in SHAPES.items()})


def factor_warmup_cosine(step, warmup, total, base, min_lr):
    """lr(step)/base: attn_schedule_lr for ATTN_SCHED_WARMUP_COSINE."""
    if step < warmup:
        return (step + 1) / warmup
    if step >= total:
        return min_lr / base
    p = (step - warmup) / (total - warmup)
    return (min_lr + (base - min_lr) * 0.5 * (1 + math.cos(math.pi * p))) / base


def run(kind, lr, betas, eps, wd, sched=None, clip=None):
    params = {n: init[n].clone().requires_grad_(True) for n in SHAPES}
    cls = torch.optim.AdamW if kind == "adamw" else torch.optim.Adam
    groups = [
        {"params": [params[n] for n in SHAPES if n not in NO_DECAY], "weight_decay": wd},
        {"params": [params[n] for n in SHAPES if n in NO_DECAY], "weight_decay": 0.0},
    ]
    opt = cls(groups, lr=lr, betas=betas, eps=eps, foreach=False, amsgrad=False)
    scheduler = None
    if sched:
        scheduler = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: factor_warmup_cosine(s, *sched))
    lrs, norms = [], []
    for k in range(STEPS):
        for n in SHAPES:
            params[n].grad = grads[k][n].clone()
        if clip:
            norms.append(float(torch.nn.utils.clip_grad_norm_([params[n] for n in SHAPES], clip)))
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        if scheduler:
            scheduler.step()
    res = {}
    for n in SHAPES:
        res[f"{kind}.{n}"] = params[n].detach().clone()
        state = opt.state[params[n]]
        res[f"{kind}.m.{n}"] = state["exp_avg"].clone()
        res[f"{kind}.v.{n}"] = state["exp_avg_sq"].clone()
    return res, lrs, norms


tensors = {}
for n in SHAPES:
    tensors[f"init.{n}"] = init[n]
    for k in range(STEPS):
        tensors[f"grad.{k}.{n}"] = grads[k][n]

# AdamW: warm-up 2, cosine to 1e-4 over 5 steps (the 6th step runs at min), clip 1.0
adamw, adamw_lrs, adamw_norms = run("adamw", 1e-2, (0.9, 0.95), 1e-8, 0.1,
                                    sched=(2, 5, 1e-2, 1e-4), clip=1.0)
# Adam: constant lr, L2 weight decay through the gradient, no clipping
adam, adam_lrs, _ = run("adam", 3e-3, (0.8, 0.99), 1e-6, 0.05)
tensors.update(adamw)
tensors.update(adam)

# clip_grad_norm_ alone on step 1's gradients (norm > 0.5: clipped)
g = [grads[1][n].clone() for n in SHAPES]
ps = [torch.zeros(s, requires_grad=True) for s in SHAPES.values()]
for p_, g_ in zip(ps, g):
    p_.grad = g_.clone()
norm = torch.nn.utils.clip_grad_norm_(ps, 0.5)
norm64 = math.sqrt(sum(float((x.double() ** 2).sum()) for x in g))
for n, p_ in zip(SHAPES, ps):
    tensors[f"clip.{n}"] = p_.grad

# schedule values: LambdaLR over 14 steps, warm-up 3, total 10, base 1e-3, min 1e-5
sch = (3, 10, 1e-3, 1e-5)
opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1e-3)
lam = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: factor_warmup_cosine(s, *sch))
sched_lrs = []
for k in range(14):
    sched_lrs.append(opt.param_groups[0]["lr"])
    opt.step()
    lam.step()
# cross-check the cosine part against CosineAnnealingLR's closed form
for k in range(3, 10):
    cos = 1e-5 + (1e-3 - 1e-5) * (1 + math.cos(math.pi * (k - 3) / 7)) / 2
    assert abs(cos - sched_lrs[k]) <= 1e-15

# weight EMA (attn_ema): torch.optim.swa_utils.AveragedModel with attn_ema's
# avg_fn. Its first update_parameters copies the weights (attn_ema_init);
# each later one is update number u = num_averaged - 1 of attn_ema_update:
# d = min(decay, (1 + u) / (10 + u)), avg + (1 - d) * (w - avg) in float32.
EMA_DECAY = 0.3  # reached after 3 updates of warm-up: both branches of the min


class Weights(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.ParameterList([torch.nn.Parameter(init[n].clone()) for n in SHAPES])


def ema_avg(avg, w, num_averaged):
    u = int(num_averaged) - 1
    d = min(EMA_DECAY, (1 + u) / (10 + u))
    return avg + (1 - d) * (w - avg)


net = Weights()
ema = torch.optim.swa_utils.AveragedModel(net, avg_fn=ema_avg)
ema.update_parameters(net)  # the copy
with torch.no_grad():
    for k in range(STEPS):
        for i, n in enumerate(SHAPES):
            net.w[i].add_(grads[k][n])
            tensors[f"emaw.{k}.{n}"] = net.w[i].detach().clone()
        ema.update_parameters(net)
for i, n in enumerate(SHAPES):
    tensors[f"ema.{n}"] = ema.module.w[i].detach().clone()

meta = {
    "ema_decay": repr(EMA_DECAY),
    "adamw_lrs": json.dumps(adamw_lrs),
    "adamw_norms": json.dumps(adamw_norms),
    "adam_lrs": json.dumps(adam_lrs),
    "clip_norm_f32": repr(float(norm)),
    "clip_norm_f64": repr(norm64),
    "sched_lrs": json.dumps(sched_lrs),
    "torch": torch.__version__,
}
st.save(os.path.join(out, "train.safetensors"), tensors, metadata=meta)
print("adamw norms", adamw_norms)
print("lrs", adamw_lrs)
