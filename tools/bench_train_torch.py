"""PyTorch side of the side-by-side training benchmark (`make bench-train`).

The same model as attn's classifier (token embedding + learned positions,
N post-norm TransformerEncoderLayers, masked mean pooling, linear head),
trained with AdamW and cross-entropy on random token batches of the same
shape. Prints one line per precision:  torch-f32 tokens/s 12345.6
Run it as PyTorch runs best here (see README): libopenblas0 installed,
OPENBLAS_CORETYPE=SkylakeX, ATEN_CPU_CAPABILITY=avx512, 2 threads.
"""
import argparse
import time

import torch
import torch.nn as nn


class Classifier(nn.Module):
    def __init__(self, vocab, d, heads, ff, layers, max_len, classes):
        super().__init__()
        self.embedding = nn.Embedding(vocab, d)
        self.positions = nn.Embedding(max_len, d)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, batch_first=True)
            for _ in range(layers)
        )
        self.fc = nn.Linear(d, classes)

    def forward(self, ids, pad):
        pos = torch.arange(ids.shape[1]).unsqueeze(0)
        x = self.embedding(ids) + self.positions(pos)
        for layer in self.layers:
            x = layer(x, src_key_padding_mask=pad)
        keep = (~pad).unsqueeze(-1).float()
        x = (x * keep).sum(1) / keep.sum(1).clamp(min=1.0)
        return self.fc(x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--ff", type=int, default=512)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", default="f32,bf16")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    for prec in a.precision.split(","):
        model = Classifier(a.vocab, a.dim, a.heads, a.ff, a.layers, a.seq, 2)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        lossf = nn.CrossEntropyLoss()
        ids = torch.randint(0, a.vocab, (a.batch, a.seq))
        lens = torch.randint(a.seq // 2, a.seq + 1, (a.batch,))
        pad = torch.arange(a.seq).unsqueeze(0) >= lens.unsqueeze(1)
        y = torch.randint(0, 2, (a.batch,))

        def step():
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=(prec == "bf16")):
                loss = lossf(model(ids, pad), y)
            loss.backward()
            opt.step()

        step()  # warm-up
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(a.steps):
            step()
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        # tokens per wall second, and per CPU second of the process (all threads)
        n = a.batch * a.seq * a.steps
        print(f"torch-{prec} tokens/s {n / dt:.1f} cpu {n / dc:.1f}", flush=True)


if __name__ == "__main__":
    main()
