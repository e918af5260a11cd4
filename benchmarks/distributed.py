"""`python -m benchmarks.distributed`: DDP step time and bucket hand-over, and a zero-bubble
pipeline's step time, eager vs compiled_bw.

Consumes --world (processes, gloo on loopback), --steps, --modes, --width/--depth/--batch; runs
one process per rank (this module with --rank), each training an MLP wrapped in DDP with small
buckets and a comm hook that records when each bucket is handed to allreduce.  Produces a
markdown table on stdout (rank 0's medians over the steps after warm-up): backward time (DDP's
backward ends when every allreduce is done), and when the first and the last bucket were handed
over, in ms after the backward started.  Eager hands buckets over while the backward runs;
compiled_bw does the same where it delivers leaf grads at eager's points (runtime/run.py Note
[Delivery points]).  `--setup pipeline`: a 4-stage pipeline (torch.distributed.pipelining,
ScheduleInterleavedZeroBubble, 2 stages per rank, each --depth Linear+GELU layers of --width,
4 microbatches of --batch rows): median time of a whole schedule step (forwards, the input
passes and the per-param-group weight passes from GradientEdges), rank 0.  Timings on a shared
2-core machine are noisy: compare modes within a run.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

MODES = ("eager", "cbw-eager", "cbw-inductor")
WARMUP = 3


def _worker(a) -> None:
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP

    import compiled_bw
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(a.port)
    dist.init_process_group("gloo", rank=a.rank, world_size=a.world)
    results = {}
    for mode in a.modes.split(","):
        torch.manual_seed(0)
        layers = []
        for _ in range(a.depth):
            layers += [nn.Linear(a.width, a.width), nn.GELU()]
        model = DDP(nn.Sequential(*layers, nn.Linear(a.width, 1)), bucket_cap_mb=1)
        handed: list = []

        def hook(state, bucket, handed=handed):
            handed.append(time.perf_counter())
            return default_hooks.allreduce_hook(None, bucket)
        model.register_comm_hook(None, hook)
        x = torch.randn(a.batch, a.width)
        rows = []
        compiled = mode != "eager"
        for s in range(WARMUP + a.steps):
            model.zero_grad(set_to_none=True)
            loss = model(x).pow(2).mean()
            handed.clear()
            dist.barrier()
            t0 = time.perf_counter()
            if not compiled:
                loss.backward()
            else:
                with compiled_bw.enable(backend=mode.removeprefix("cbw-"),
                                        background_compile=False):
                    loss.backward()
            t1 = time.perf_counter()
            if s >= WARMUP:
                rows.append(((t1 - t0) * 1e3, (handed[0] - t0) * 1e3, (handed[-1] - t0) * 1e3,
                             len(handed)))
        fallbacks = compiled_bw.stats().fallbacks if compiled else 0
        results[mode] = {"backward_ms": statistics.median(r[0] for r in rows),
                         "first_bucket_ms": statistics.median(r[1] for r in rows),
                         "last_bucket_ms": statistics.median(r[2] for r in rows),
                         "buckets": rows[-1][3], "fallbacks": fallbacks}
        compiled_bw.reset()
    dist.destroy_process_group()
    if a.rank == 0:
        print("RESULT " + json.dumps(results), flush=True)


def _pipeline_worker(a) -> None:
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.distributed.pipelining import PipelineStage, ScheduleInterleavedZeroBubble

    import compiled_bw
    torch.set_num_threads(1)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(a.port)
    dist.init_process_group("gloo", rank=a.rank, world_size=a.world)
    n_stages = 2 * a.world
    mine = [s for s in range(n_stages) if s % a.world == a.rank]
    results = {}
    for mode in a.modes.split(","):
        mods = {}
        for s in mine:
            torch.manual_seed(s)
            layers = []
            for _ in range(a.depth):
                layers += [nn.Linear(a.width, a.width), nn.GELU()]
            mods[s] = nn.Sequential(*layers)
        stages = [PipelineStage(mods[s], s, n_stages, torch.device("cpu")) for s in mine]
        sched = ScheduleInterleavedZeroBubble(stages, n_microbatches=4,
                                              loss_fn=lambda out, y: (out - y).pow(2).mean())
        x, y = torch.randn(4 * a.batch, a.width), torch.randn(4 * a.batch, a.width)
        args = (x,) if 0 in mine else ()
        kw = {"target": y} if n_stages - 1 in mine else {}
        times = []
        compiled_bw.reset()
        for s in range(WARMUP + a.steps):
            for m in mods.values():
                m.zero_grad(set_to_none=True)
            dist.barrier()
            t0 = time.perf_counter()
            if mode == "eager":
                sched.step(*args, **kw)
            else:
                with compiled_bw.enable(backend=mode.removeprefix("cbw-"),
                                        background_compile=False):
                    sched.step(*args, **kw)
            if s >= WARMUP:
                times.append((time.perf_counter() - t0) * 1e3)
        st = compiled_bw.stats()
        results[mode] = {"step_ms": statistics.median(times),
                         "fallbacks": st.fallbacks if mode != "eager" else 0,
                         "captures": st.captures if mode != "eager" else 0}
    dist.destroy_process_group()
    if a.rank == 0:
        print("RESULT " + json.dumps(results), flush=True)


def _pipeline_table(a, res: dict) -> None:
    base = res.get("eager", {}).get("step_ms")
    print(f"Pipeline, {a.world} processes (gloo, CPU, 1 thread each), ScheduleInterleavedZeroBubble "
          f"over {2 * a.world} stages of {a.depth}x{a.width} (Linear+GELU), 4 microbatches of "
          f"{a.batch}; rank 0, medians of {a.steps} steps after {WARMUP} warm-up.\n")
    print("| mode | schedule step ms | vs eager | captures | fallbacks |")
    print("|---|---:|---:|---:|---:|")
    for mode, r in res.items():
        ratio = f"{r['step_ms'] / base:.2f}x" if base else "-"
        print(f"| {mode} | {r['step_ms']:.1f} | {ratio} | {r['captures']} | {r['fallbacks']} |")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.distributed",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--setup", choices=("ddp", "pipeline"), default="ddp")
    ap.add_argument("--rank", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.rank is not None:
        (_pipeline_worker if a.setup == "pipeline" else _worker)(a)
        return 0
    port = _free_port()
    args = [f"--world={a.world}", f"--steps={a.steps}", f"--modes={a.modes}",
            f"--width={a.width}", f"--depth={a.depth}", f"--batch={a.batch}", f"--port={port}",
            f"--setup={a.setup}"]
    t0 = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-m", "benchmarks.distributed", f"--rank={r}",
                               *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) for r in range(a.world)]
    outs = [p.communicate(timeout=900)[0] for p in procs]
    line = next((ln for ln in outs[0].splitlines() if ln.startswith("RESULT ")), None)
    if line is None or any(p.returncode for p in procs):
        print("\n".join(o[-3000:] for o in outs), file=sys.stderr)
        return 1
    res = json.loads(line[len("RESULT "):])
    if a.setup == "pipeline":
        _pipeline_table(a, res)
        return 0
    base = res.get("eager", {}).get("backward_ms")
    print(f"DDP, {a.world} processes (gloo, CPU, 1 thread each), MLP {a.depth}x{a.width}, batch "
          f"{a.batch}, bucket_cap_mb=1; medians of {a.steps} steps after {WARMUP} warm-up; run "
          f"took {time.perf_counter() - t0:.0f} s.\n")
    print("| mode | backward + allreduce ms | vs eager | first bucket handed over (ms after "
          "backward start) | last bucket | buckets | fallbacks |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for mode, r in res.items():
        ratio = f"{r['backward_ms'] / base:.2f}x" if base else "-"
        print(f"| {mode} | {r['backward_ms']:.1f} | {ratio} | {r['first_bucket_ms']:.1f} | "
              f"{r['last_bucket_ms']:.1f} | {r['buckets']} | {r['fallbacks']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
