"""`python -m benchmarks`: eager autograd vs torch compiled autograd vs compiled_bw.

Consumes --models, --modes, --steps, --quick, --out; produces the tables on stdout and in
<out>/latest.md, <out>/latest.json, and <out>/time_ratio.png + peak_memory.png (with the `bench`
extra).  Every model runs all its modes in one process, interleaved; ratios are relative to
eager autograd measured in the same run.  Compiles are cold (measure.py).  The model
`varying_shapes` (CPU) is measured by benchmarks/varying_shapes.py instead: a sequence of
shapes, its own table; the Hugging Face models (CPU: hf_gpt2, hf_llama, hf_llama_ckpt,
hf_mixtral; in the full run where `transformers` is installed) by benchmarks/hf_step.py: a full
training step per mode (eager, compiled_bw, torch.compile, both, torch.compile + torch's
compiled autograd), a table each; the higher-order steps (pinn, gradient_penalty: grads taken
with create_graph=True; in the full run) by benchmarks/higher_order.py, a table each; the
first backward of a second process with a warm COMPILED_BW_CACHE_DIR (warm_start, in the full
run) by benchmarks/warm_start.py, a table.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import shutil
import sys
import tempfile
import time
import warnings

import torch

from compiled_bw.walk import fastwalk

from . import hf_step, higher_order, warm_start
from . import modes as modes_mod
from .measure import bench_model
from .models import GPU_MODELS, MODELS, on_device
from .report import charts, table
from .varying_shapes import FULL, QUICK, bench_varying

QUICK_MODELS = ("overhead", "pointwise", "cnn", "custom_hooks", "varying_shapes")
VARYING = ("varying_shapes",)   # CPU only
GPU_QUICK_MODELS = ("overhead", "pointwise", "custom_hooks")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    ap.add_argument("--models", help=f"comma list of "
                    f"{sorted(MODELS) + list(VARYING) + list(hf_step.BENCH_MODELS)}"
                    f"{list(higher_order.MODELS)} warm_start")
    ap.add_argument("--modes", help="comma list of eager,torch-ca,cbw-eager,cbw-inductor")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--quick", action="store_true",
                    help="5 steps, no torch compiled autograd, small models (CI smoke test)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results"))
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                    help="cuda: GPU-sized models (models.GPU_MODELS) and the CUDA-graphs mode")
    a = ap.parse_args(argv)
    # custom_hooks' first block takes the model input, which needs no grad: torch warns about
    # that on every mode's first backward (eager's too); the harness's output is its tables.
    warnings.filterwarnings("ignore", message="Full backward hook is firing")
    # The output is the tables and one progress line per model: torch-ca's recompile warnings
    # (Dynamo's logger) and Hugging Face's config warnings go to their logs at ERROR only.
    logging.getLogger("torch._dynamo").setLevel(logging.ERROR)
    logging.getLogger("transformers").setLevel(logging.ERROR)
    gpu = a.device == "cuda"
    if gpu and not torch.cuda.is_available():
        print("--device cuda: no CUDA device here", file=sys.stderr)
        return 2
    if not gpu:
        torch.set_num_threads(2)
    available = modes_mod.available_modes(a.device)
    default = (modes_mod.GPU_QUICK if a.quick else modes_mod.GPU) if gpu else \
        (modes_mod.QUICK if a.quick else modes_mod.DEFAULT)
    names = a.modes.split(",") if a.modes else list(default)
    names = [m for m in names if m in available]
    if "eager" not in names:
        names.insert(0, "eager")
    catalog = GPU_MODELS if gpu else MODELS
    models = a.models.split(",") if a.models else list(
        (GPU_QUICK_MODELS if gpu else QUICK_MODELS) if a.quick else
        (list(catalog) + ([] if gpu else list(VARYING) + _hf_models() +
                          list(higher_order.MODELS) + ["warm_start"])))
    steps = 5 if a.quick else a.steps
    t0 = time.perf_counter()        # the C++ walk: built once per machine, not part of a cell
    ok = fastwalk.in_use()
    print(f"C++ walk {'ready' if ok else 'UNAVAILABLE (Python walk)'} in "
          f"{time.perf_counter() - t0:.1f} s", file=sys.stderr)
    results, hf, ho, warm = {}, {}, {}, {}
    tmp_root = tempfile.mkdtemp(prefix="compiled_bw_bench_")   # the cold Inductor caches
    t_start = time.perf_counter()
    try:
        for k, name in enumerate(models, 1):
            n_steps = (QUICK if a.quick else FULL).steps if name in VARYING and not gpu else steps
            n_modes = len(names)
            if name in hf_step.BENCH_MODELS:
                n_steps, n_modes = (5 if a.quick else 10), len(hf_step.MODES)
            if name in higher_order.MODELS:
                n_steps, n_modes = (3 if a.quick else 10), len(higher_order.MODES)
            print(f"[{k}/{len(models)} {name}] {n_modes} modes x {n_steps} steps ...",
                  end="", file=sys.stderr, flush=True)
            t_model = time.perf_counter()
            if name == "warm_start":        # fresh processes of their own: a table
                warm = warm_start.run(warm_start.MODELS)
                print(f" {time.perf_counter() - t_model:.0f} s", file=sys.stderr, flush=True)
                continue
            step_rows = hf if name in hf_step.BENCH_MODELS else \
                ho if name in higher_order.MODELS else None
            if step_rows is not None:       # a full training step per mode, a table each
                step_rows[name] = r = _bench_hf(name, n_steps) if step_rows is hf else \
                    _bench_higher_order(name, n_steps, a.device)
                print(f" {time.perf_counter() - t_model:.0f} s; " + ", ".join(
                    f"{m} {x:.2f}x" for m, x in r["step_ratio"].items() if m != "eager"),
                    file=sys.stderr, flush=True)
                continue
            if name in VARYING and not gpu:     # (--quick: without cbw-eager's captures)
                vnames = [m for m in names if not a.quick or m != "cbw-eager"]
                results[name] = bench_varying({m: available[m] for m in vnames},
                                              QUICK if a.quick else FULL, tmp_root)
            else:
                results[name] = bench_model(on_device(catalog[name], a.device, name),
                                            {m: available[m] for m in names}, steps, tmp_root)
            print(f" {time.perf_counter() - t_model:.0f} s; " + ", ".join(
                f"{m} {_short(results[name][m])}" for m in names if m != "eager" and m in results[name]),
                file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)
    lines = table(results, names) if results else []
    for name, r in hf.items():
        lines += ["", hf_step.header(*hf_step.BENCH_MODELS[name], r["steps"], r, r["seconds"]),
                  "", *hf_step.table(r, list(hf_step.MODES))]
    for name, r in ho.items():
        lines += ["", higher_order.header(name, r["steps"], r, r["seconds"]), "",
                  *higher_order.table(r, list(higher_order.MODES))]
    if warm:
        lines += ["", *warm_start.table(warm, "inductor")]
    for line in lines:
        print(line)
    os.makedirs(a.out, exist_ok=True)
    meta = {"torch": torch.__version__, "machine": platform.machine(),
            "cpu": _cpu_name(), "cpus": os.cpu_count(), "device": a.device,
            "gpu": torch.cuda.get_device_name() if gpu else None,
            "threads": torch.get_num_threads(), "steps": steps, "date": time.strftime("%Y-%m-%d"),
            "seconds": round(time.perf_counter() - t_start), "cpp_walk": ok}
    with open(os.path.join(a.out, "latest.json"), "w") as f:
        json.dump({"meta": meta, "modes": names, "results": results, "hf_step": hf,
                   "higher_order": ho, "warm_start": warm}, f, indent=1)
    with open(os.path.join(a.out, "latest.md"), "w") as f:
        on = f"{meta['gpu']} + " if gpu else ""
        f.write(f"{meta['date']}, torch {meta['torch']}, {on}{meta['cpu']} ({meta['cpus']} CPUs, "
                f"{meta['threads']} threads), {steps} steps per mode, run took "
                f"{meta['seconds']} s.\n\n" + "\n".join(lines) + "\n")
    for p in charts(results, names, a.out) if results else ():
        print(f"chart: {p}", file=sys.stderr)
    return 1 if any(r.get(m, {}).get("fail") for r in results.values() for m in names) else 0


def _hf_models() -> list:
    """The Hugging Face rows where `transformers` is installed (the `models` extra)."""
    try:
        import transformers  # noqa: F401
    except ImportError:
        return []
    return list(hf_step.BENCH_MODELS)


def _bench_hf(name: str, steps: int) -> dict:
    """hf_step.run's result for `name`, every mode (_one_thread)."""
    model, ckpt = hf_step.BENCH_MODELS[name]
    return _one_thread(lambda: hf_step.run(model, ckpt, steps, list(hf_step.MODES)), steps)


def _bench_higher_order(name: str, steps: int, device: str = "cpu") -> dict:
    """higher_order.run's result for `name`, every mode (_one_thread)."""
    return _one_thread(lambda: higher_order.run(name, steps, list(higher_order.MODES), device),
                       steps)


def _one_thread(run, steps: int) -> dict:
    """run()'s result, its steps and the run's own seconds (it runs on one thread; the other
    models' thread count is restored after)."""
    threads = torch.get_num_threads()
    t0 = time.perf_counter()
    try:
        r = run()
    finally:
        torch.set_num_threads(threads)
    return {**r, "steps": steps, "seconds": time.perf_counter() - t0}


def _short(cell: dict) -> str:
    """A cell as the progress line shows it: its time ratio to eager, or why it has none."""
    if cell.get("fail"):
        return "FAIL"
    if cell.get("steady_ratio"):    # varying shapes: steady backward, total incl. compiles
        return f"{cell['steady_ratio']:.2f}x (total {cell['total_ratio']:.2f}x)"
    return f"{cell['ratio']:.2f}x" if cell.get("ratio") else "n/a"


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


if __name__ == "__main__":
    sys.exit(main())
