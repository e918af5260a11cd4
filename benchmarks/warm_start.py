"""First backward in a second process: warm start from COMPILED_BW_CACHE_DIR (runtime/warm.py).

Consumes --models (benchmarks/models.py names), --backend; produces a markdown table
(`python -m benchmarks` prints it in its full run).  Per model, two fresh processes share one
empty COMPILED_BW_CACHE_DIR and Inductor cache dir: the first (cold: capture + compile), then
the second (warm: the stored graph loaded).  Each process times eager autograd's first backward
of the model (its own copy, before compiled_bw runs anything), then compiled_bw's first
backward, then the time until the compiled code is in use (wait_for_compiles()).
Run: python -m benchmarks.warm_start [--models overhead,cnn] [--backend inductor]
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import time

MODELS = ("overhead", "pointwise", "cnn", "gemm", "custom_hooks")


def child(model: str, backend: str) -> dict:
    import torch

    import compiled_bw

    from .models import MODELS as CATALOG
    torch.set_num_threads(int(os.environ.get("CBW_BENCH_THREADS", "2")))
    torch.manual_seed(0)
    net, x = CATALOG[model]()
    other = copy.deepcopy(net)
    t = time.perf_counter()
    net(x).sum().backward()
    eager = time.perf_counter() - t
    t = time.perf_counter()
    with compiled_bw.enable(backend=backend):
        other(x).sum().backward()
        first = time.perf_counter() - t
        compiled_bw.wait_for_compiles()
        ready = time.perf_counter() - t
    s = compiled_bw.stats()
    return {"eager_first": eager, "first": first, "ready": ready, "captures": s.captures,
            "warm_loads": s.warm_loads}


def run(models, backend: str = "inductor") -> dict:
    out = {}
    for name in models:
        with tempfile.TemporaryDirectory(prefix="cbw_warm_") as d:
            env = {**os.environ, "COMPILED_BW_CACHE_DIR": os.path.join(d, "graphs"),
                   "TORCHINDUCTOR_CACHE_DIR": os.path.join(d, "inductor"),
                   "PYTHONPATH": os.pathsep.join(sys.path)}
            rows = []
            for _ in ("cold", "warm"):
                r = subprocess.run([sys.executable, "-m", "benchmarks.warm_start", "--child",
                                    name, "--backend", backend], capture_output=True, text=True,
                                   env=env, timeout=900, check=False)
                if r.returncode != 0:
                    rows.append({"error": (r.stderr.strip().splitlines() or ["?"])[-1][:100]})
                    break
                rows.append(json.loads(r.stdout.strip().splitlines()[-1]))
            out[name] = rows
    return out


def table(res: dict, backend: str) -> list:
    head = (f"First backward of a fresh process, {backend} backend: cold (first process: "
            "capture + compile) and warm (second process, same COMPILED_BW_CACHE_DIR: loaded); "
            "ratio to eager autograd's first backward in the same process; \"ready\": "
            "compiled code in use:")
    cols = "| model | eager first | cold first | cold ready | warm first | warm ready | warm loads |"
    lines = [head, "", cols, "|---|---:|---:|---:|---:|---:|---:|"]
    for name, rows in res.items():
        if any("error" in r for r in rows) or len(rows) < 2:
            lines.append(f"| {name} | error: {rows[-1].get('error', '?')} | | | | | |")
            continue
        cold, warm = rows
        lines.append(
            f"| {name} | {warm['eager_first'] * 1e3:.1f} ms | {cold['first'] * 1e3:.0f} ms "
            f"({cold['first'] / cold['eager_first']:.0f}x) | {cold['ready']:.1f} s | "
            f"{warm['first'] * 1e3:.1f} ms ({warm['first'] / warm['eager_first']:.1f}x) | "
            f"{warm['ready']:.1f} s | {warm['warm_loads']} (captures {warm['captures']}) |")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.warm_start",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--backend", default="inductor")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(child(a.child, a.backend)))
        return 0
    res = run(a.models.split(","), a.backend)
    print("\n".join(table(res, a.backend)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
