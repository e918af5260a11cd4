"""`python -m compiled_bw.doctor`: what compiled_bw can do with the torch installed here.

Consumes the installed torch (and builds or loads the C++ walk); produces a report: the torch
release and build (CPU or the CUDA version), the C++ walk's state, the backends (Inductor, a C++
compiler for it on CPU, Triton and a GPU), and the feature table for this release -- each
feature that depends on torch internals, on or off, and what happens where it is off (the node
runs as an opaque call, or the backward runs eager autograd with that reason).  `--json` prints
the same as one JSON object (the README's per-release tables are made from it).
"""
from __future__ import annotations

import json
import shutil
import sys

import torch

from . import torchapi
from .torchapi import checkpoint as torch_checkpoint
from .torchapi import dynamo as torch_dynamo
from .walk import fastwalk


def _walk() -> tuple:
    ok = fastwalk.enable_fastwalk(True)
    c = fastwalk.counters()
    if ok:
        return True, f"built in {fastwalk.build_dir()}"
    return False, f"not built ({c.get('error')}): the Python walk is used (slower per step)"


def _inductor() -> tuple:
    try:
        from .torchapi import inductor  # noqa: F401 (Inductor's entry points, as we use them)
    except Exception as e:  # noqa: BLE001
        return False, f"Inductor's entry points do not import ({type(e).__name__}: {e})"
    cxx = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if cxx is None:
        return False, "no C++ compiler on PATH: Inductor cannot compile CPU graphs"
    return True, f"C++ compiler {cxx}"


def _triton() -> tuple:
    try:
        import triton
    except ImportError:
        return False, "triton not installed: no GPU kernels (CPU graphs use C++)"
    if not torch.cuda.is_available():
        return False, f"triton {triton.__version__}, but no CUDA device"
    return True, f"triton {triton.__version__} on {torch.cuda.get_device_name()}"


def _release_feature(name: str, what: str):
    """A feature torchapi turns off where this release lacks its private API (torchapi
    features_off(): its reason names the release)."""
    def probe() -> tuple:
        why = torchapi.features_off().get(name)
        return (why is None, why or what)
    return probe


def _dynamo_skip() -> tuple:
    def probe():
        return None
    if torch_dynamo.skip_frame(probe):
        return True, "Dynamo skips our Function.apply wrapper's frame"
    return False, ("cannot mark our wrapper's frame skipped: with Dynamo's nested_graph_breaks, "
                   "torch.compile may fail where a Function is applied after a graph break")


FEATURES = {
    "C++ walk": _walk,
    "Inductor backend": _inductor,
    "Triton/GPU": _triton,
    torch_dynamo.AOT_SPLICE_FEATURE: _release_feature(
        torch_dynamo.AOT_SPLICE_FEATURE,
        "a torch.compile'd forward's backward is spliced into our graph"),
    torch_checkpoint.RECOMPUTE_FEATURE: _release_feature(
        torch_checkpoint.RECOMPUTE_FEATURE, "checkpointed regions are traced"),
    torch_checkpoint.SAC_FEATURE: _release_feature(
        torch_checkpoint.SAC_FEATURE, "selective-checkpoint regions are traced"),
    "Dynamo skips our wrappers": _dynamo_skip,
}


def report() -> dict:
    build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "CPU"
    out = {"torch": torch.__version__, "build": build, "git": torch.version.git_version,
           "python": sys.version.split()[0], "features": {}}
    for name, probe in FEATURES.items():
        try:
            on, detail = probe()
        except Exception as e:  # noqa: BLE001 -- a probe that breaks is a finding too
            on, detail = False, f"probe failed: {type(e).__name__}: {e}"
        out["features"][name] = {"on": bool(on), "detail": detail}
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    r = report()
    if "--json" in argv:
        print(json.dumps(r, indent=1))
        return 0
    print(f"torch {r['torch']} ({r['build']}, git {str(r['git'])[:10]}), Python {r['python']}")
    width = max(map(len, r["features"]))
    for name, f in r["features"].items():
        print(f"  {name:<{width}}  {'on ' if f['on'] else 'OFF'}  {f['detail']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
