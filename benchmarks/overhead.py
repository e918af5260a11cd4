"""Per-step cost of compiled_bw's cache-hit path: walk + signature + lookup (+ slot install).

Consumes nothing; prints, for a 12-layer nn.TransformerEncoder (d=256) by default, the number
of autograd nodes, the median cost of each part in µs and µs/node, and that cost as a % of
the eager backward time measured in the same process (interleaved, median of N).
Run: python benchmarks/overhead.py [--layers 12] [--d 256] [--steps 30]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

import compiled_bw
from compiled_bw.capture.saved import gradient_edge, install_slots
from compiled_bw.capture.walk import walk_graph


def build(layers: int, d: int):
    layer = torch.nn.TransformerEncoderLayer(d, 8, 4 * d, dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
    x = torch.randn(8, 32, d)
    return model, x


def measure(layers: int = 12, d: int = 256, steps: int = 30) -> dict:
    torch.manual_seed(0)
    model, x = build(layers, d)
    walk_t, slot_t, lookup_t, eager_t = [], [], [], []
    cache: dict = {}
    nodes = 0
    for i in range(steps + 3):
        # eager backward timing
        loss = model(x).pow(2).mean()
        t0 = time.perf_counter()
        loss.backward()
        eager_t.append(time.perf_counter() - t0)
        # walk on a fresh graph of the same model
        loss = model(x).pow(2).mean()
        t0 = time.perf_counter()
        w = walk_graph([gradient_edge(loss)])
        t1 = time.perf_counter()
        key = (w.signature, tuple(w.root_edges))
        cache.setdefault(key, i)
        t2 = time.perf_counter()
        install_slots(w.nodes, w.saved_node)
        t3 = time.perf_counter()
        nodes = len(w.nodes)
        if i >= 3:
            walk_t.append(t1 - t0)
            lookup_t.append(t2 - t1)
            slot_t.append(t3 - t2)
        del loss, w
    assert len(cache) == 1, "signature not stable across steps"
    parts = {"walk": walk_t, "lookup": lookup_t, "slots": slot_t, "eager": eager_t[3:]}
    med = {k: statistics.median(v) * 1e6 for k, v in parts.items()}
    total = med["walk"] + med["lookup"] + med["slots"]
    return dict(nodes=nodes, total_us=total, us_per_node=total / nodes,
                pct_of_eager=100 * total / med["eager"], **{k + "_us": v for k, v in med.items()})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--steps", type=int, default=30)
    a = ap.parse_args()
    torch.set_num_threads(2)
    r = measure(a.layers, a.d, a.steps)
    print(f"TransformerEncoder layers={a.layers} d={a.d}: {r['nodes']} autograd nodes")
    print(f"  walk+signature {r['walk_us']:.0f} µs, lookup {r['lookup_us']:.0f} µs, "
          f"slot install {r['slots_us']:.0f} µs")
    print(f"  total {r['total_us']:.0f} µs = {r['us_per_node']:.2f} µs/node = "
          f"{r['pct_of_eager']:.1f}% of the eager backward ({r['eager_us'] / 1000:.1f} ms)")
    _ = compiled_bw


if __name__ == "__main__":
    main()
