"""Benchmark modes: how one backward is run.  name -> (context factory, needs_reset).

eager         eager autograd (the baseline every ratio is relative to)
torch-ca      torch's compiled autograd, the anchor we must beat:
              torch._dynamo.compiled_autograd._enable(torch.compile(backend="inductor"))
cbw-eager     compiled_bw, eager backend (the reference: runs the captured FX graph)
cbw-inductor  compiled_bw, Inductor backend (when this torch has Inductor), background compile
cbw-inductor-cg  the same with enable(cudagraphs=True) (GPU only)
cbw-inductor-verify  the same with every run verified against eager autograd (enable(verify=N),
              N beyond any benchmark's steps: runtime/verify.py Note [Verify]); what a verified
              step costs (`--modes eager,cbw-inductor,cbw-inductor-verify`; not in the defaults);
              graphs with user code too (verify_user_code=True: their hooks run twice)
"""
from __future__ import annotations

import contextlib

import compiled_bw
from compiled_bw.backends import BACKENDS, LAZY


def _torch_compiled_autograd():
    import torch
    import torch._dynamo.compiled_autograd as ca
    return ca._enable(torch.compile(backend="inductor"))


VERIFY_ALL = 10**9


def available_modes(device: str = "cpu") -> dict:
    modes = {
        "eager": contextlib.nullcontext,
        "torch-ca": _torch_compiled_autograd,
        "cbw-eager": lambda: compiled_bw.enable(backend="eager"),
    }
    if "inductor" in BACKENDS or "inductor" in LAZY:
        # background compile (the default, said here for readers): the harness waits for it
        # after the first backward, and reports both times
        modes["cbw-inductor"] = lambda: compiled_bw.enable(backend="inductor",
                                                           background_compile=True)
        modes["cbw-inductor-verify"] = lambda: compiled_bw.enable(
            backend="inductor", background_compile=True, verify=VERIFY_ALL,
            verify_user_code=True)
        if device == "cuda":
            modes["cbw-inductor-cg"] = lambda: compiled_bw.enable(
                backend="inductor", background_compile=True, cudagraphs=True)
    return modes


DEFAULT = ("eager", "torch-ca", "cbw-eager", "cbw-inductor")
QUICK = ("eager", "cbw-eager", "cbw-inductor")
GPU = ("eager", "torch-ca", "cbw-eager", "cbw-inductor", "cbw-inductor-cg")
GPU_QUICK = ("eager", "cbw-inductor", "cbw-inductor-cg")
