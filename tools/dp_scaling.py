#!/usr/bin/env python3
"""The data-parallel scaling model of docs/DISTRIBUTED.md, as a table.

Per optimizer step on each of P machines (weak scaling: each machine keeps
its batch, the global batch is P times it):
  t_comp            compute of one machine's batch (forward + backward + step), seconds
  G                 gradient bytes (4 x parameters: the flat f32 buffer)
  t_comm(P, link)   = 2 (P - 1) / P * G / link_bytes_per_s + 2 (P - 1) * n_buckets * alpha
                      (reduce-scatter + all-gather: each machine sends and receives
                      2 (P-1)/P G; alpha: one message's latency; attn sends each bucket
                      to every other rank in each of the two stages)
  exposed           = t_comm - min(overlap * t_comm, t_bwd)   with t_bwd = bwd_share * t_comp
                      (the buckets of the layers above the embeddings go during the
                      backward; overlap = the share of G that is not the embedding and
                      position tables, which the backward writes last)
  efficiency        = t_comp / (t_comp + exposed)
  tokens/s          = P * tokens_per_step / (t_comp + exposed)
Fill --step-ms and --tokens from `attn bench train` (1 machine), --grad-mb from
`attn bench allreduce`'s first row; the rest are defaults for attn train's model.
"""
import argparse

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--step-ms", type=float, required=True, help="t_comp: one machine's step, ms")
ap.add_argument("--tokens", type=float, default=32 * 256, help="tokens per machine per step")
ap.add_argument("--grad-mb", type=float, default=5.95, help="G in MB (attn train's model: 5.95)")
ap.add_argument("--overlap", type=float, default=0.27,
                help="share of G sent during the backward (attn train's model: 0.27; the "
                     "embedding and position tables, 73 %%, are written last)")
ap.add_argument("--bwd-share", type=float, default=0.6, help="backward's share of the step")
ap.add_argument("--bucket-mb", type=float, default=1.0, help="bucket size (1 MB)")
ap.add_argument("--alpha-us", type=float, default=30.0, help="per-message latency, us (TCP: 20-50)")
ap.add_argument("--links", default="10,25,100", help="link speeds, Gb/s")
ap.add_argument("--machines", default="2,4,8,16,32,64")
a = ap.parse_args()

t = a.step_ms / 1e3
G = a.grad_mb * 1e6
nb = max(1, int(-(-a.grad_mb // a.bucket_mb)))
links = [float(x) for x in a.links.split(",")]
print(f"t_comp {a.step_ms:g} ms, G {a.grad_mb:g} MB in {nb} buckets, overlap {a.overlap:g} of G "
      f"during a {a.bwd_share * a.step_ms:.1f} ms backward, alpha {a.alpha_us:g} us")
print("machines " + "".join(f"| {l:g} Gb/s: comm ms, eff, tokens/s ".ljust(38) for l in links))
for P in [int(x) for x in a.machines.split(",")]:
    row = f"{P:8d} "
    for l in links:
        bw = l * 1e9 / 8
        comm = 2 * (P - 1) / P * G / bw + 2 * (P - 1) * nb * a.alpha_us * 1e-6
        hidden = min(comm * a.overlap, a.bwd_share * t)
        exposed = max(0.0, comm - hidden)
        eff = t / (t + exposed)
        row += f"| {comm * 1e3:8.1f} {100 * eff:5.1f} % {P * a.tokens / (t + exposed):12.0f}   "
    print(row)
