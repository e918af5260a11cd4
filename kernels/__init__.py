"""Triton kernels of compiled_bw, one file each (Triton-tutorial style: the `@triton.jit`
kernel, its torch reference, a test, a benchmark), registered as torch ops with
`torch.library.triton_op` so that `make_fx` and Inductor see one op they can schedule.

- `quantize_absmax.py`: absmax-scaled quantize to fp8 e4m3 / int8, per group of G contiguous
  elements (a row, a block, the whole tensor), in one launch: absmax, then the cast.
- `dequantize_absmax.py`: its inverse, `q.float() * scale` in the caller's dtype.

Which path runs (`path_for(device)`): "triton" for CUDA tensors when `triton` imports,
"triton-interpret" for CPU tensors when TRITON_INTERPRET=1 is set (Triton's interpreter:
correctness, not speed), else "torch" (the reference, which Inductor compiles to C++).
`python -m kernels test` runs every kernel's test (set TRITON_INTERPRET=1 on a CPU machine);
`python -m kernels bench` runs their benchmarks.
"""
from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import os
import re

import torch

TRITON = importlib.util.find_spec("triton") is not None


def interpreting() -> bool:
    """Triton's interpreter is on (it runs kernels on CPU tensors, in numpy)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


@functools.cache            # path_for asks on every op call: read the version once
def interpreter_unsupported() -> str | None:
    """Why Triton's interpreter cannot run these kernels with the installed Triton, or None.
    Triton 3.6's (torch 2.11's) passes a kernel's scalar arguments as 1-element arrays, and a
    `for off in range(0, group, BLOCK)` over one raises (TypeError: only 0-dimensional arrays
    can be converted to Python scalars); 3.7 on pass scalars.  Compiled kernels (GPU) are not
    affected."""
    if not TRITON:
        return "triton is not installed"
    v = importlib.metadata.version("triton")
    if tuple(int(p) for p in re.findall(r"\d+", v)[:2]) < (3, 7):
        return (f"Triton {v}'s interpreter passes scalar kernel arguments as 1-element arrays, "
                "which range() cannot take (3.7 and later run these kernels)")
    return None


def path_for(device: torch.device) -> str:
    """Which implementation the ops of this package run for tensors on `device` (CPU tensors
    under an interpreter that cannot run the kernels: the torch references)."""
    if not TRITON:
        return "torch"
    if device.type == "cuda":
        return "triton"
    if device.type == "cpu" and interpreting() and interpreter_unsupported() is None:
        return "triton-interpret"
    return "torch"


def launchable(kernel):
    """`torch.library.wrap_triton(kernel)`, except under Triton's interpreter: there
    `@triton.jit` makes an InterpretedFunction, which torch 2.13's wrap_triton returns unchanged
    and torch 2.11's rejects ("wrap_triton only works on functions annotated with triton.jit or
    triton.autotune"); passing it through here gives every release 2.13's behaviour."""
    from torch.library import wrap_triton
    if interpreting():
        from triton.runtime.jit import JITFunction
        if not isinstance(kernel, JITFunction):
            return kernel
    return wrap_triton(kernel)
