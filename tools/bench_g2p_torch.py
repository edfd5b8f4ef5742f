"""PyTorch side of the G2P training benchmark (`make bench-g2p`, docs/G2P.md).

The same model as attn g2p (src/apps/seq2seq/g2p_model.h) in torch 1.13:
grapheme / phoneme embeddings x sqrt(E) + sinusoidal positions, nn.Transformer
(post-norm, ReLU, N encoder + N decoder layers, its final encoder / decoder
LayerNorms replaced by identities: attn's stack has none), output projection
tied to the phoneme embedding plus a bias; label-smoothed cross-entropy (0.1,
padding ignored), AdamW (betas 0.9 / 0.98, weight decay 0.01 except
embeddings, biases and norms), gradient clipping at 1.0, dropout as given.

It trains on the very batches `attn g2p train --bench STEPS` wrote
(OUT/bench_batches.bin: int32 "G2PB", count; per batch B, Ls, Lt, src [B, Ls],
src_len [B], tin [B, Lt], tout [B, Lt]); the first batch warms up untimed,
as attn's. Prints:  bench: torch N steps, T tokens in S s: X tokens/s
"""
import argparse
import math
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

PAD = 0
N_PHONES = 73  # <pad> <unk> <s> </s>, 24 consonants, 15 vowels x 3 stresses


def read_batches(path):
    raw = np.fromfile(path, dtype="<i4")
    if raw.size < 2 or raw[0] != 0x42503247:
        raise SystemExit(f"{path}: not a bench_batches.bin of attn g2p train --bench")
    count, k, out = int(raw[1]), 2, []
    for _ in range(count):
        B, Ls, Lt = (int(v) for v in raw[k:k + 3])
        k += 3
        parts = []
        for n in (B * Ls, B, B * Lt, B * Lt):
            parts.append(raw[k:k + n].astype(np.int64))
            k += n
        src, src_len, tin, tout = parts
        out.append((torch.from_numpy(src.reshape(B, Ls)), torch.from_numpy(src_len),
                    torch.from_numpy(tin.reshape(B, Lt)), torch.from_numpy(tout.reshape(B, Lt))))
    return out


def sinusoids(L, E):
    pe = torch.zeros(L, E)
    t = torch.arange(L, dtype=torch.float64).unsqueeze(1)
    i = torch.arange(0, E, 2, dtype=torch.float64)
    ang = t / torch.pow(10000.0, i / E)
    pe[:, 0::2] = torch.sin(ang).float()
    pe[:, 1::2] = torch.cos(ang).float()
    return pe


class G2P(nn.Module):
    def __init__(self, vs, vt, d, heads, ff, enc, dec, dropout, max_len=64):
        super().__init__()
        self.d = d
        self.src_embedding = nn.Embedding(vs, d)
        self.tgt_embedding = nn.Embedding(vt, d)
        nn.init.normal_(self.src_embedding.weight, std=1 / math.sqrt(d))
        nn.init.normal_(self.tgt_embedding.weight, std=1 / math.sqrt(d))
        self.register_buffer("pe", sinusoids(max_len, d))
        self.transformer = nn.Transformer(d, heads, enc, dec, ff, dropout, batch_first=True)
        self.transformer.encoder.norm = nn.Identity()
        self.transformer.decoder.norm = nn.Identity()
        self.out_bias = nn.Parameter(torch.zeros(vt))

    def forward(self, src, src_pad, tin):
        sc = math.sqrt(self.d)
        x = self.src_embedding(src) * sc + self.pe[: src.shape[1]]
        y = self.tgt_embedding(tin) * sc + self.pe[: tin.shape[1]]
        causal = torch.triu(torch.full((tin.shape[1], tin.shape[1]), float("-inf")), 1)
        h = self.transformer(x, y, tgt_mask=causal, src_key_padding_mask=src_pad,
                             memory_key_padding_mask=src_pad)
        return F.linear(h, self.tgt_embedding.weight, self.out_bias)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("batches")
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ff", type=int, default=512)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--dropout", type=float, default=0.0)  # attn g2p train's default
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--smoothing", type=float, default=0.1)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    batches = read_batches(a.batches)
    vs = 1 + max(int(b[0].max()) for b in batches)
    model = G2P(vs, N_PHONES, a.dim, a.heads, a.ff, a.layers, a.layers, a.dropout)
    model.train()
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if "embedding" in name or "bias" in name or "norm" in name else decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.98))
    lossf = nn.CrossEntropyLoss(ignore_index=-1, label_smoothing=a.smoothing)
    tokens, seconds = 0, 0.0
    for k, (src, src_len, tin, tout) in enumerate(batches):
        t0 = time.perf_counter()
        src_pad = torch.arange(src.shape[1]).unsqueeze(0) >= src_len.unsqueeze(1)
        logits = model(src, src_pad, tin)
        loss = lossf(logits.reshape(-1, N_PHONES), tout.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if k > 0:  # the first batch warms up
            seconds += time.perf_counter() - t0
            tokens += int((tout != -1).sum())
    print(f"bench: torch {len(batches) - 1} steps, {tokens} tokens in {seconds:.2f} s: "
          f"{tokens / seconds if seconds > 0 else 0:.1f} tokens/s (f32, {a.threads} threads, "
          f"torch {torch.__version__})")


if __name__ == "__main__":
    main()
