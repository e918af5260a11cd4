"""Per-step cost of compiled_bw's cache-hit path: walk + signature + lookup + saved bookkeeping.

Consumes nothing; prints, for a 12-layer nn.TransformerEncoder (d=256) by default, the number
of autograd nodes, the median cost of each part in µs and µs/node, and that cost as a % of
the eager backward time measured in the same process (interleaved, median of N) -- for the
Python walk and, if it can be built, the C++ walk (walk/fastwalk.py), interleaved step by
step on fresh graphs of the same model, so their ratio is measured under the same load.
Parts are wall-clock medians; "thread CPU time" (time.thread_time of the three parts) is
less disturbed by other jobs on a shared machine.
Run: python benchmarks/overhead.py [--layers 12] [--d 256] [--steps 30] [--threads 1]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

import compiled_bw
from compiled_bw.graph.saved import gradient_edge
from compiled_bw.walk import fastwalk
from compiled_bw.walk.walk import walk_graph


def build(layers: int, d: int):
    layer = torch.nn.TransformerEncoderLayer(d, 8, 4 * d, dropout=0.0, batch_first=True)
    model = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
    x = torch.randn(8, 32, d)
    return model, x


def _saved_bookkeeping(w) -> None:
    """What a cache hit with retain_graph=False does for saved tensors besides the walk
    (runtime/run.py), as if every node ran: the Python walk installs Slots before the run
    and releases them after; the C++ walk calls Node::release_variables after the run."""
    everything = range(len(w.nodes))
    if w.frees_saved_itself:
        w.release_nodes(everything)
    else:
        w.install().release(everything, len(w.nodes))


def _one(walker, model, x, cache: dict, i: int) -> tuple:
    """Wall-clock parts (walk, lookup, saved bookkeeping), thread CPU time of all three, sizes."""
    loss = model(x).pow(2).mean()
    c0 = time.thread_time()
    t0 = time.perf_counter()
    w = walker([gradient_edge(loss)])
    t1 = time.perf_counter()
    key = (w.signature, tuple(w.root_edges))
    cache.setdefault(key, i)
    t2 = time.perf_counter()
    _saved_bookkeeping(w)
    t3 = time.perf_counter()
    cpu = time.thread_time() - c0
    n, n_saved = len(w.nodes), len(w.saved)
    del loss, w
    return t1 - t0, t2 - t1, t3 - t2, cpu, n, n_saved


def measure(layers: int = 12, d: int = 256, steps: int = 30, cpp: bool = True) -> dict:
    """{impl: {nodes, saved, walk_us, lookup_us, slots_us, total_us, us_per_node, ...}}."""
    torch.manual_seed(0)
    model, x = build(layers, d)
    impls = {"python": walk_graph}
    if cpp and fastwalk.enable_fastwalk(True):
        impls["c++"] = fastwalk.fast_walk
    times = {k: ([], [], [], []) for k in impls}
    caches = {k: {} for k in impls}
    eager_t = []
    counts = {}
    for i in range(steps + 3):
        loss = model(x).pow(2).mean()
        t0 = time.perf_counter()
        loss.backward()
        eager_t.append(time.perf_counter() - t0)
        del loss
        order = list(impls) if i % 2 == 0 else list(impls)[::-1]
        for k in order:
            wt, lt, st, cpu, n, ns = _one(impls[k], model, x, caches[k], i)
            counts[k] = (n, ns)
            if i >= 3:
                for lst, v in zip(times[k], (wt, lt, st, cpu), strict=True):
                    lst.append(v)
    eager = statistics.median(eager_t[3:]) * 1e6
    out = {}
    for k in impls:
        assert len(caches[k]) == 1, f"{k}: signature not stable across steps"
        med = {p: statistics.median(v) * 1e6
               for p, v in zip(("walk", "lookup", "slots", "cpu"), times[k], strict=True)}
        total = med["walk"] + med["lookup"] + med["slots"]
        n, ns = counts[k]
        out[k] = dict(nodes=n, saved=ns, total_us=total, us_per_node=total / n,
                      pct_of_eager=100 * total / eager, eager_us=eager,
                      cpu_us_per_node=med["cpu"] / n,
                      **{p + "_us": v for p, v in med.items()})
    return out


def measure_e2e(layers: int = 12, d: int = 256, steps: int = 20) -> dict:
    """Median wall time of a whole cache-hit `loss.backward()` under compiled_bw.enable(eager),
    Python walk vs C++ walk, interleaved step by step (each has its own cache entry)."""
    torch.manual_seed(0)
    model, x = build(layers, d)
    modes = {"python": False, "c++": True}
    if not fastwalk.enable_fastwalk(True):
        modes.pop("c++")
    times: dict = {k: [] for k in modes}
    for i in range(steps + 2):
        for k, on in (modes.items() if i % 2 == 0 else list(modes.items())[::-1]):
            fastwalk.enable_fastwalk(on)
            loss = model(x).pow(2).mean()
            model.zero_grad(set_to_none=True)
            t0 = time.perf_counter()
            with compiled_bw.enable(backend="eager"):
                loss.backward()
            if i >= 2:
                times[k].append(time.perf_counter() - t0)
    st = compiled_bw.stats()
    assert st.fallbacks == 0 and st.captures == len(modes), (st.captures, st.fallback_reasons)
    return {k: statistics.median(v) * 1e3 for k, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--d", type=int, default=256)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-cpp", action="store_true", help="only the Python walk")
    ap.add_argument("--e2e", action="store_true",
                    help="also time whole cache-hit backward() calls (eager backend)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    if a.e2e:
        r = measure_e2e(a.layers, a.d, a.steps)
        print("whole cache-hit backward() under compiled_bw.enable(backend='eager'): " +
              ", ".join(f"{k} walk {v:.1f} ms" for k, v in r.items()))
    res = measure(a.layers, a.d, a.steps, cpp=not a.no_cpp)
    first = next(iter(res.values()))
    print(f"TransformerEncoder layers={a.layers} d={a.d}: {first['nodes']} autograd nodes, "
          f"{first['saved']} saved tensors; eager backward {first['eager_us'] / 1000:.1f} ms "
          f"({a.threads} thread(s))")
    for k, r in res.items():
        print(f"  {k:>6}: walk+signature {r['walk_us']:.0f} µs, lookup {r['lookup_us']:.0f} µs, "
              f"saved bookkeeping {r['slots_us']:.0f} µs; total {r['total_us']:.0f} µs = "
              f"{r['us_per_node']:.2f} µs/node = {r['pct_of_eager']:.1f}% of eager "
              f"(thread CPU time {r['cpu_us_per_node']:.2f} µs/node)")
    if "c++" in res:
        print(f"  python/c++ ratio: {res['python']['total_us'] / res['c++']['total_us']:.1f}x")
    elif not a.no_cpp:
        print(f"  (C++ walk unavailable: {fastwalk.counters()['error']})")
    _ = compiled_bw


if __name__ == "__main__":
    main()
