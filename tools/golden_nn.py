"""Golden files for the nn modules (tests/golden/nn_*.safetensors).

For each case: build the torch module (float64, fixed seed, dropout 0,
training mode so the regular — not "fast" — path runs), random inputs, run
forward, backward with a random dout, and store in F32:
  parameters under their state_dict names, inputs under PyTorch's argument
  names (batch first), dout, out, attn_weights (mha), grad.<name> for every
  input and parameter;
  __metadata__: kind, num_heads, norm_first, activation, layer_norm_eps, ...
Inputs and parameters are rounded to f32 first, so the float64 reference is
the exact answer for the stored values. Tolerance in the C tests: 1e-4
relative + small absolute (see tests/test_nn_golden.c).
Usage: /usr/bin/python3 tools/golden_nn.py tests/golden [GROUP,...]
(groups: mha, layer, seed, act, bf, lowp, mhax; default all)
"""
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st  # noqa: E402

OUT = sys.argv[1] if len(sys.argv) > 1 else "tests/golden"


def r32(t):
    """round to f32, back to float64"""
    return t.float().double()


def prep(module, seed):
    torch.manual_seed(seed)
    module.train()
    module.double()
    with torch.no_grad():
        for p in module.parameters():
            # torch default init, plus a small random bias so bias grads are tested
            if p.dim() == 1 and torch.all(p == 0):
                p.uniform_(-0.1, 0.1)
            p.copy_(r32(p))
    return module


def rnd(*shape, scale=1.0):
    return r32(torch.randn(*shape, dtype=torch.float64) * scale).requires_grad_(True)


def save(name, module, inputs, out, extra, meta, drop=(), dtypes=None):
    """inputs: dict argname -> tensor (float ones get grads); extra: dict of
    more output tensors (attn_weights); dtypes: name -> torch dtype the
    tensor is stored in (default F32; the values must be exact in it)."""
    torch.manual_seed(12345)
    dout = r32(torch.randn_like(out))
    out.backward(dout)
    t = {}
    for k, v in module.state_dict().items():
        t[k] = v.float()
    for k, v in inputs.items():
        t[k] = v.detach().float() if v.dtype.is_floating_point else v.detach()
    t["dout"] = dout.float()
    t["out"] = out.detach().float()
    for k, v in extra.items():
        t[k] = v.detach().float()
    for k, v in inputs.items():
        if v.dtype.is_floating_point and v.requires_grad:
            t["grad." + k] = v.grad.float()
    for k, p in module.named_parameters():
        t["grad." + k] = p.grad.float()
    for k in drop:  # parameters that do not exist in the emulated module
        t.pop(k)
        t.pop("grad." + k)
    for k, dt in (dtypes or {}).items():
        assert torch.equal(t[k].to(dt).float(), t[k]), k  # exact in its storage dtype
        t[k] = t[k].to(dt)
    path = os.path.join(OUT, name + ".safetensors")
    st.save(path, t, meta)
    print(path, os.path.getsize(path), "bytes")


def causal_bool(L):
    return torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1)


def rand_bool_mask(*shape, p=0.3):
    m = torch.rand(*shape) < p
    m[..., 0] = False  # key 0 always allowed: no fully masked rows
    return m


def kpm_bool(B, L):
    m = torch.zeros(B, L, dtype=torch.bool)
    m[1, L - 2 :] = True  # batch 1 pads its last two keys
    return m


def float_mask(*shape):
    m = torch.randn(*shape, dtype=torch.float64)
    m[torch.rand(*shape) < 0.2] = float("-inf")
    m[..., 0] = 0.0
    return r32(m)


# ---- MultiheadAttention ------------------------------------------------------
def mha_case(name, E, H, B, Lq, Lk, kdim=None, vdim=None, bias=True, cross=False,
             kpm=None, attn_mask=None, average=True, seed=0, batch_first=True,
             add_bias_kv=False, add_zero_attn=False):
    m = prep(nn.MultiheadAttention(E, H, dropout=0.0, bias=bias, batch_first=batch_first,
                                   kdim=kdim, vdim=vdim, add_bias_kv=add_bias_kv,
                                   add_zero_attn=add_zero_attn), seed)
    bl = (lambda b, l: (b, l)) if batch_first else (lambda b, l: (l, b))
    query = rnd(*bl(B, Lq), E)
    inputs = {"query": query}
    if cross:
        key = rnd(*bl(B, Lk), kdim or E)
        value = rnd(*bl(B, Lk), vdim or E)
        inputs["key"] = key
        inputs["value"] = value
    else:
        key = value = query
    if kpm is not None:
        inputs["key_padding_mask"] = kpm
    if attn_mask is not None:
        inputs["attn_mask"] = attn_mask
    out, w = m(query, key, value, key_padding_mask=kpm, attn_mask=attn_mask,
               need_weights=True, average_attn_weights=average)
    meta = {"kind": "mha", "num_heads": H, "batch_first": int(batch_first),
            "average_attn_weights": int(average)}
    if add_zero_attn:
        meta["add_zero_attn"] = 1
    save(name, m, inputs, out, {"attn_weights": w}, meta)


def mha_cases():
    torch.manual_seed(1)
    mha_case("nn_mha_self", E=64, H=8, B=2, Lq=7, Lk=7, seed=1)
    torch.manual_seed(2)
    mha_case("nn_mha_cross_kvdim", E=32, H=4, B=2, Lq=5, Lk=9, kdim=24, vdim=20, cross=True, seed=2)
    torch.manual_seed(3)
    mha_case("nn_mha_nobias_masks", E=32, H=4, B=2, Lq=6, Lk=8, bias=False, cross=True,
             kpm=kpm_bool(2, 8), attn_mask=rand_bool_mask(6, 8), seed=3)
    torch.manual_seed(4)
    B, H, Lq, Lk = 2, 4, 5, 6
    mha_case("nn_mha_perhead_float_masks", E=32, H=H, B=B, Lq=Lq, Lk=Lk, cross=True,
             kpm=kpm_bool(B, Lk), attn_mask=float_mask(B * H, Lq, Lk), average=False, seed=4)
    # A float key_padding_mask is added to the logits. (torch 1.13 only does
    # that when attn_mask is absent: with a float attn_mask it masked_fill()s
    # the nonzero entries with -inf, a quirk torch 2.x removed; so the float
    # key padding case has no attn_mask.)
    torch.manual_seed(5)
    kpm = torch.zeros(B, Lk, dtype=torch.float64)
    kpm[1, -1] = float("-inf")
    kpm[0, 2] = -0.5
    kpm[1, 0] = 0.75
    mha_case("nn_mha_float_kpm", E=16, H=2, B=B, Lq=Lq, Lk=Lk, kpm=r32(kpm), cross=True, seed=5)


# ---- Transformer layers ------------------------------------------------------
def no_bias(m):
    """torch 2.1+ bias=False, emulated on torch 1.13: zero every bias (they
    are then dropped from the file with their gradients)."""
    names = [k for k, _ in m.named_parameters() if k.endswith("bias")]
    with torch.no_grad():
        for k, p in m.named_parameters():
            if k.endswith("bias"):
                p.zero_()
    return names


def enc_case(name, E, H, FF, B, L, norm_first, act, eps, src_mask=None, kpm=None, seed=0,
             bias=True, batch_first=True):
    m = prep(nn.TransformerEncoderLayer(E, H, FF, dropout=0.0, activation=act,
                                        layer_norm_eps=eps, batch_first=batch_first,
                                        norm_first=norm_first), seed)
    drop = [] if bias else no_bias(m)
    src = rnd(B, L, E) if batch_first else rnd(L, B, E)
    inputs = {"src": src}
    if src_mask is not None:
        inputs["src_mask"] = src_mask
    if kpm is not None:
        inputs["src_key_padding_mask"] = kpm
    out = m(src, src_mask=src_mask, src_key_padding_mask=kpm)
    meta = {"kind": "encoder", "num_heads": H, "norm_first": int(norm_first), "activation": act,
            "layer_norm_eps": repr(eps), "batch_first": int(batch_first)}
    save(name, m, inputs, out, {}, meta, drop)


def dec_case(name, E, H, FF, B, L, Lm, norm_first, act, eps, masks, seed=0, batch_first=True):
    m = prep(nn.TransformerDecoderLayer(E, H, FF, dropout=0.0, activation=act,
                                        layer_norm_eps=eps, batch_first=batch_first,
                                        norm_first=norm_first), seed)
    tgt = rnd(B, L, E) if batch_first else rnd(L, B, E)
    memory = rnd(B, Lm, E) if batch_first else rnd(Lm, B, E)
    inputs = {"tgt": tgt, "memory": memory}
    inputs.update({k: v for k, v in masks.items() if v is not None})
    out = m(tgt, memory, **masks)
    meta = {"kind": "decoder", "num_heads": H, "norm_first": int(norm_first), "activation": act,
            "layer_norm_eps": repr(eps), "batch_first": int(batch_first)}
    save(name, m, inputs, out, {}, meta)


def layer_cases():
    torch.manual_seed(10)
    enc_case("nn_encoder_post_relu", E=16, H=4, FF=32, B=2, L=6, norm_first=False,
             act="relu", eps=1e-5, seed=10)
    torch.manual_seed(11)
    enc_case("nn_encoder_pre_gelu_masks", E=16, H=4, FF=32, B=2, L=7, norm_first=True,
             act="gelu", eps=1e-6, src_mask=rand_bool_mask(7, 7), kpm=kpm_bool(2, 7), seed=11)
    torch.manual_seed(12)
    enc_case("nn_encoder_post_float_mask", E=16, H=2, FF=32, B=2, L=5, norm_first=False,
             act="gelu", eps=1e-5, src_mask=float_mask(5, 5), seed=12)
    torch.manual_seed(15)
    enc_case("nn_encoder_nobias_3d_mask", E=16, H=2, FF=32, B=2, L=5, norm_first=True,
             act="relu", eps=1e-5, src_mask=rand_bool_mask(2 * 2, 5, 5), seed=15, bias=False)
    torch.manual_seed(13)
    L, Lm, B = 6, 8, 2
    dec_case("nn_decoder_post_relu_masks", E=16, H=4, FF=32, B=B, L=L, Lm=Lm, norm_first=False,
             act="relu", eps=1e-5, seed=13,
             masks={"tgt_mask": causal_bool(L), "memory_mask": rand_bool_mask(L, Lm),
                    "tgt_key_padding_mask": kpm_bool(B, L),
                    "memory_key_padding_mask": kpm_bool(B, Lm)})
    torch.manual_seed(14)
    L, Lm, B = 5, 7, 2
    cm = torch.zeros(L, L, dtype=torch.float64)
    cm[causal_bool(L)] = float("-inf")
    dec_case("nn_decoder_pre_gelu_masks", E=16, H=4, FF=32, B=B, L=L, Lm=Lm, norm_first=True,
             act="gelu", eps=1e-5, seed=14,
             masks={"tgt_mask": r32(cm), "memory_mask": float_mask(L, Lm),
                    "tgt_key_padding_mask": kpm_bool(B, L),
                    "memory_key_padding_mask": kpm_bool(B, Lm)})


# ---- batch_first=False (torch's default): sequence-first [L, B, E] tensors ------
def seq_first_cases():
    B, H, Lq, Lk = 3, 4, 5, 6
    torch.manual_seed(40)
    mha_case("nn_mha_seq_first", E=16, H=H, B=B, Lq=Lq, Lk=Lk, kdim=12, vdim=10, cross=True,
             kpm=kpm_bool(B, Lk), attn_mask=rand_bool_mask(Lq, Lk), average=False, seed=40,
             batch_first=False)
    torch.manual_seed(41)
    mha_case("nn_mha_self_seq_first", E=16, H=2, B=2, Lq=4, Lk=4, seed=41, batch_first=False)
    torch.manual_seed(42)
    enc_case("nn_encoder_seq_first", E=16, H=4, FF=32, B=B, L=Lq, norm_first=True, act="gelu",
             eps=1e-5, src_mask=causal_bool(Lq), kpm=kpm_bool(B, Lq), seed=42, batch_first=False)
    torch.manual_seed(43)
    L, Lm = 4, 7
    dec_case("nn_decoder_seq_first", E=16, H=4, FF=32, B=B, L=L, Lm=Lm, norm_first=False,
             act="relu", eps=1e-5, seed=43, batch_first=False,
             masks={"tgt_mask": causal_bool(L), "memory_key_padding_mask": kpm_bool(B, Lm)})


# ---- F16 / BF16 tensors: values rounded to the storage dtype, reference in float64 -----
def lowp_cases():
    torch.manual_seed(50)
    B, L, E, H, FF = 2, 5, 16, 4, 24
    m = prep(nn.TransformerEncoderLayer(E, H, FF, dropout=0.0, batch_first=True,
                                        activation="gelu"), 50)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(p.bfloat16().double())
    src = r32(torch.randn(B, L, E, dtype=torch.float64).half().double()).requires_grad_(True)
    kpm = kpm_bool(B, L)
    out = m(src, src_key_padding_mask=kpm)
    meta = {"kind": "encoder", "num_heads": H, "activation": "gelu", "batch_first": 1}
    dt = {k: torch.bfloat16 for k in m.state_dict()}
    dt["src"] = torch.float16
    save("nn_encoder_bf16_params_f16_src", m, {"src": src, "src_key_padding_mask": kpm}, out, {},
         meta, dtypes=dt)
    torch.manual_seed(51)
    Lq, Lk = 4, 6
    m = prep(nn.MultiheadAttention(E, H, dropout=0.0, batch_first=False), 51)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(p.half().double())
    q = torch.randn(Lq, B, E, dtype=torch.float64).bfloat16().double().requires_grad_(True)
    kv = torch.randn(Lk, B, E, dtype=torch.float64).bfloat16().double().requires_grad_(True)
    kv2 = kv.detach().clone().requires_grad_(True)  # key and value: separate inputs, same values
    am = float_mask(Lq, Lk).half().double()
    out, w = m(q, kv, kv2, attn_mask=am, need_weights=True)
    dt = {k: torch.float16 for k in m.state_dict()}
    dt.update({"query": torch.bfloat16, "key": torch.bfloat16, "value": torch.bfloat16,
               "attn_mask": torch.float16})
    save("nn_mha_f16_params_bf16_inputs_seq_first", m,
         {"query": q, "key": kv, "value": kv2, "attn_mask": am}, out, {"attn_weights": w},
         {"kind": "mha", "num_heads": H, "batch_first": 0}, dtypes=dt)


# ---- MultiheadAttention's add_bias_kv, add_zero_attn, static_k / static_v ----------
def mha_extra_cases():
    B, H, Lq, Lk = 2, 4, 5, 6
    torch.manual_seed(60)
    mha_case("nn_mha_bias_kv_zero_attn", E=16, H=H, B=B, Lq=Lq, Lk=Lk, cross=True,
             kpm=kpm_bool(B, Lk), attn_mask=rand_bool_mask(Lq, Lk), average=False, seed=60,
             add_bias_kv=True, add_zero_attn=True)
    torch.manual_seed(61)
    mha_case("nn_mha_bias_kv_float_mask", E=16, H=H, B=B, Lq=Lq, Lk=Lq, seed=61,
             attn_mask=float_mask(B * H, Lq, Lq), add_bias_kv=True)
    torch.manual_seed(62)
    mha_case("nn_mha_zero_attn_kdim", E=16, H=2, B=B, Lq=Lq, Lk=Lk, kdim=12, vdim=10, cross=True,
             kpm=kpm_bool(B, Lk), seed=62, add_zero_attn=True)
    # static_k / static_v: F.multi_head_attention_forward's arguments (the module's
    # forward has none), sequence first, self-attention (key = value = query)
    torch.manual_seed(63)
    E, Ls = 16, 7
    m = prep(nn.MultiheadAttention(E, H, dropout=0.0, add_zero_attn=True), 63)
    query = rnd(Lq, B, E)
    sk, sv = rnd(B * H, Ls, E // H), rnd(B * H, Ls, E // H)
    kpm = kpm_bool(B, Ls)  # (torch 1.13 checks an attn_mask against the key input's length)
    out, w = F.multi_head_attention_forward(
        query, query, query, E, H, m.in_proj_weight, m.in_proj_bias, None, None, True, 0.0,
        m.out_proj.weight, m.out_proj.bias, training=True, key_padding_mask=kpm,
        need_weights=True, static_k=sk, static_v=sv, average_attn_weights=True)
    save("nn_mha_static_kv_seq_first", m,
         {"query": query, "static_k": sk, "static_v": sv, "key_padding_mask": kpm}, out, {"attn_weights": w},
         {"kind": "mha", "num_heads": H, "batch_first": 0, "add_zero_attn": 1})


# ---- other FFN activations: tanh, SiLU, gated SwiGLU / GeGLU ------------------
# torch 1.13 layers take any callable activation (tanh, silu). The gated FFNs
# are not in torch: a subclass adds linear3 and computes
#   linear2(dropout(act(linear1(x)) * linear3(x)))   (Llama's w2(silu(w1 x) * w3 x))
GATES = {"swiglu": F.silu, "geglu": F.gelu}
ACTS = {"tanh": torch.tanh, "silu": F.silu}


def gated(cls):
    class Gated(cls):
        def __init__(self, d_model, nhead, dim_feedforward, gate, **kw):
            super().__init__(d_model, nhead, dim_feedforward, **kw)
            self.linear3 = nn.Linear(d_model, dim_feedforward)
            self.gate = GATES[gate]

        def _ff_block(self, x):
            return self.dropout2(self.linear2(self.dropout(self.gate(self.linear1(x)) *
                                                           self.linear3(x))))
    return Gated


class GatedDecoder(gated(nn.TransformerDecoderLayer)):
    def _ff_block(self, x):  # the decoder's last dropout is dropout3
        return self.dropout3(self.linear2(self.dropout(self.gate(self.linear1(x)) *
                                                       self.linear3(x))))


def act_layer(kind, E, H, FF, act, norm_first, seed):
    kw = dict(dropout=0.0, layer_norm_eps=1e-5, batch_first=True, norm_first=norm_first)
    if act in GATES:
        cls = gated(nn.TransformerEncoderLayer) if kind == "encoder" else GatedDecoder
        return prep(cls(E, H, FF, act, **kw), seed)
    cls = nn.TransformerEncoderLayer if kind == "encoder" else nn.TransformerDecoderLayer
    return prep(cls(E, H, FF, activation=ACTS[act], **kw), seed)


def act_cases():
    B, L, Lm, E, H, FF = 2, 5, 6, 16, 4, 24
    for i, (kind, act, nf) in enumerate([("encoder", "tanh", False), ("encoder", "silu", True),
                                         ("encoder", "swiglu", False), ("encoder", "geglu", True),
                                         ("decoder", "swiglu", True), ("decoder", "silu", False)]):
        seed = 30 + i
        torch.manual_seed(seed)
        m = act_layer(kind, E, H, FF, act, nf, seed)
        meta = {"kind": kind, "num_heads": H, "norm_first": int(nf), "activation": act,
                "layer_norm_eps": "1e-05", "batch_first": 1}
        if kind == "encoder":
            src = rnd(B, L, E)
            inputs = {"src": src, "src_key_padding_mask": kpm_bool(B, L)}
            out = m(src, src_key_padding_mask=inputs["src_key_padding_mask"])
        else:
            tgt, memory = rnd(B, L, E), rnd(B, Lm, E)
            inputs = {"tgt": tgt, "memory": memory, "tgt_mask": causal_bool(L)}
            out = m(tgt, memory, tgt_mask=inputs["tgt_mask"])
        save("nn_%s_%s" % (kind, act), m, inputs, out, {}, meta)


# ---- the seeds' modules --------------------------------------------------------
class SelfAttention000(nn.Module):
    def __init__(self, embed_size):
        super().__init__()
        self.embed_size = embed_size
        self.values = nn.Linear(embed_size, embed_size, bias=False)
        self.keys = nn.Linear(embed_size, embed_size, bias=False)
        self.queries = nn.Linear(embed_size, embed_size, bias=False)

    def forward(self, x):
        Q, K, V = self.queries(x), self.keys(x), self.values(x)
        energy = torch.matmul(Q, K.permute(0, 2, 1)) / (self.embed_size ** 0.5)
        return torch.matmul(torch.softmax(energy, dim=2), V)


class MultiHeadAttention000(nn.Module):
    def __init__(self, embed_size, heads):
        super().__init__()
        self.embed_size, self.heads, self.head_dim = embed_size, heads, embed_size // heads
        self.values = nn.Linear(self.head_dim, self.head_dim, bias=False)
        self.keys = nn.Linear(self.head_dim, self.head_dim, bias=False)
        self.queries = nn.Linear(self.head_dim, self.head_dim, bias=False)
        self.fc_out = nn.Linear(heads * self.head_dim, embed_size)

    def forward(self, x):
        N, L = x.shape[0], x.shape[1]
        x = x.reshape(N, L, self.heads, self.head_dim)
        Q, K, V = self.queries(x), self.keys(x), self.values(x)
        energy = torch.einsum("nqhd,nkhd->nhqk", [Q, K]) / (self.embed_size ** 0.5)
        att = torch.softmax(energy, dim=3)
        out = torch.einsum("nhql,nlhd->nqhd", [att, V]).reshape(N, L, self.heads * self.head_dim)
        return self.fc_out(out)


class SelfAttention004(nn.Module):
    def __init__(self, embed_size):
        super().__init__()
        self.embed_size = embed_size
        self.query = nn.Linear(embed_size, embed_size)
        self.key = nn.Linear(embed_size, embed_size)
        self.value = nn.Linear(embed_size, embed_size)

    def forward(self, x):
        Q, K, V = self.query(x), self.key(x), self.value(x)
        scores = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(self.embed_size)
        return torch.matmul(F.softmax(scores, dim=-1), V)


class MultiHeadAttention004(nn.Module):
    def __init__(self, embed_size, num_heads):
        super().__init__()
        self.embed_size, self.num_heads = embed_size, num_heads
        self.head_dim = embed_size // num_heads
        self.query = nn.Linear(embed_size, embed_size)
        self.key = nn.Linear(embed_size, embed_size)
        self.value = nn.Linear(embed_size, embed_size)
        self.fc_out = nn.Linear(embed_size, embed_size)
        self.layer_norm = nn.LayerNorm(embed_size)

    def split_heads(self, x):
        return x.view(x.size(0), -1, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, x):
        B, L, _ = x.size()
        Q, K, V = (self.split_heads(f(x)) for f in (self.query, self.key, self.value))
        scores = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(self.head_dim)
        out = torch.matmul(F.softmax(scores, dim=-1), V)
        out = out.transpose(1, 2).contiguous().view(B, L, self.embed_size)
        return self.layer_norm(self.fc_out(out) + x)


class FeedForward004(nn.Module):
    def __init__(self, embed_size, ff_dim):
        super().__init__()
        self.fc1 = nn.Linear(embed_size, ff_dim)
        self.fc2 = nn.Linear(ff_dim, embed_size)
        self.layer_norm = nn.LayerNorm(embed_size)

    def forward(self, x):
        return self.layer_norm(self.fc2(torch.relu(self.fc1(x))) + x)


class TransformerLayer004(nn.Module):
    def __init__(self, embed_size, num_heads, ff_dim):
        super().__init__()
        self.attention = MultiHeadAttention004(embed_size, num_heads)
        self.ffn = FeedForward004(embed_size, ff_dim)

    def forward(self, x):
        return self.ffn(self.attention(x))


def seed_case(name, module, kind, E, H, B, L, seed):
    m = prep(module, seed)
    with torch.no_grad():  # non-trivial LayerNorm affine parameters
        for k, p in m.named_parameters():
            if "layer_norm" in k:
                p.add_(r32(torch.rand_like(p) * 0.2 - 0.1))
                p.copy_(r32(p))
    x = rnd(B, L, E)
    out = m(x)
    save(name, m, {"x": x}, out, {}, {"kind": kind, "num_heads": H, "layer_norm_eps": "1e-05"})


def seed_cases():
    torch.manual_seed(20)
    seed_case("nn_seed000_self_attention", SelfAttention000(32), "seed000_self_attention",
              32, 1, 2, 6, 20)
    torch.manual_seed(21)
    seed_case("nn_seed000_mha", MultiHeadAttention000(32, 4), "seed000_mha", 32, 4, 2, 6, 21)
    torch.manual_seed(22)
    seed_case("nn_seed004_self_attention", SelfAttention004(32), "seed004_self_attention",
              32, 1, 2, 6, 22)
    torch.manual_seed(23)
    seed_case("nn_seed004_mha", MultiHeadAttention004(32, 8), "seed004_mha", 32, 8, 1, 5, 23)
    torch.manual_seed(24)
    seed_case("nn_seed004_transformer", TransformerLayer004(16, 4, 32), "seed004_transformer",
              16, 4, 2, 6, 24)


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    groups = {"mha": mha_cases, "layer": layer_cases, "seed": seed_cases, "act": act_cases,
              "bf": seq_first_cases, "lowp": lowp_cases,
              "mhax": mha_extra_cases}
    for g in (sys.argv[2].split(",") if len(sys.argv) > 2 else groups):
        groups[g]()
