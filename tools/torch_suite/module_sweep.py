"""nn.Module conformance sweep: every ModuleInfo of torch's module_db, grads eager vs compiled_bw.

Consumes `torch.testing._internal.common_modules.module_db` (the module inputs PyTorch's
test/test_modules.py runs: constructor and forward arguments, edge cases included); for each
module, dtype and up to `--samples` module inputs on CPU: builds the module (same seed), runs
the forward in training mode, then `torch.autograd.grad` of every floating output that needs
grad (random grad_outputs, same seed) w.r.t. the parameters and inputs that need grad, once
under eager autograd and once under `compiled_bw.enable(backend=..., cache_size_limit=100000)`.
Produces (stdout) one line per difference:
  MISMATCH  a grad differs beyond tolerance     NONE     a grad is None on one side only
  CRASH     we raise where eager does not       STRIDE   equal values, different strides
and per input the way it ran when it fell back (`fb`, with the reason); last line `bad N`.

    python tools/torch_suite/module_sweep.py [--dtype float32|float64] [--backend eager|inductor]
        [--samples 6] [--only nn.LSTM,nn.Conv2d]

Results of the 2026-11-24 run are in README.md ("nn suites").
"""
from __future__ import annotations

import argparse

import torch
import torch.utils._pytree as pytree

import compiled_bw

TOL = {torch.float32: {"rtol": 1e-4, "atol": 1e-5}, torch.float64: {"rtol": 1e-7, "atol": 1e-7}}


def _fresh(x):
    if isinstance(x, torch.Tensor):
        return x.detach().clone().requires_grad_(x.requires_grad)
    return x


def grads(mi, sample, dtype, backend=None):
    """The module's grads for one module input; None if nothing needs grad."""
    from torch.testing._internal.common_utils import freeze_rng_state
    torch.manual_seed(0)
    ctor = sample.constructor_input
    with freeze_rng_state():
        m = mi.module_cls(*ctor.args, **ctor.kwargs).to(dtype)
    m.train(mi.train_and_eval_differ)
    args = pytree.tree_map(_fresh, sample.forward_input.args)
    kwargs = pytree.tree_map(_fresh, sample.forward_input.kwargs)
    wrt = [p for p in m.parameters() if p.requires_grad]
    wrt += [t for t in pytree.tree_leaves((args, kwargs))
            if isinstance(t, torch.Tensor) and t.requires_grad]
    with freeze_rng_state():
        out = m(*args, **kwargs)
    outs = [o for o in pytree.tree_leaves(out)
            if isinstance(o, torch.Tensor) and o.requires_grad and o.is_floating_point()]
    if not outs or not wrt:
        return None
    torch.manual_seed(1)
    gos = [torch.randn_like(o) for o in outs]
    if backend is None:
        return torch.autograd.grad(outs, wrt, gos, allow_unused=True)
    with compiled_bw.enable(backend=backend, cache_size_limit=100000):
        return torch.autograd.grad(outs, wrt, gos, allow_unused=True)


def compare(name, eager, ours, dtype, how) -> int:
    bad = 0
    for j, (a, b) in enumerate(zip(eager, ours, strict=True)):
        if (a is None) != (b is None):
            print(f"NONE {name} grad {j}: eager None={a is None}, ours None={b is None}")
            bad += 1
        elif a is not None:
            try:
                torch.testing.assert_close(b, a, **TOL[dtype], equal_nan=True)
            except AssertionError as e:
                print(f"MISMATCH {name} grad {j} ({how}): {str(e)[:300]}")
                bad += 1
                continue
            if a.numel() > 1 and a.stride() != b.stride():
                print(f"STRIDE {name} grad {j} ({how}): {a.stride()} vs {b.stride()}")
    return bad


def main() -> None:
    from torch.testing._internal.common_modules import module_db
    p = argparse.ArgumentParser()
    p.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    p.add_argument("--backend", default="eager", choices=("eager", "inductor"))
    p.add_argument("--samples", type=int, default=6)
    p.add_argument("--only", default="")
    a = p.parse_args()
    dtype = getattr(torch, a.dtype)
    only = set(a.only.split(",")) if a.only else None
    torch.set_num_threads(1)
    bad = compared = 0
    for mi in module_db:
        if only and mi.name not in only:
            continue
        try:
            samples = mi.module_inputs_func(mi, device="cpu", dtype=dtype, requires_grad=True,
                                            training=True)
        except Exception:  # noqa: BLE001 -- this module has no CPU inputs for this dtype
            continue
        for k, sample in enumerate(samples[:a.samples]):
            name = f"{mi.name}[{k}]"
            if sample.forward_input is None:
                continue
            try:
                eager = grads(mi, sample, dtype)
            except Exception:  # noqa: BLE001 -- eager itself raises: nothing to compare
                continue
            if eager is None:
                continue
            s = compiled_bw.stats()
            fb, cap, nreasons = s.fallbacks, s.captures, len(s.fallback_reasons)
            try:
                ours = grads(mi, sample, dtype, a.backend)
            except Exception as e:  # noqa: BLE001 -- reported: eager did not raise
                print(f"CRASH {name}: {type(e).__name__}: {str(e)[:200]}")
                bad += 1
                continue
            s = compiled_bw.stats()
            how = "captured" if s.captures > cap else "cache hit"
            if s.fallbacks > fb:
                how = f"fallback: {s.fallback_reasons[nreasons:][:1]}"
                print(f"  fb {name}: {how[:200]}")
            compared += 1
            bad += compare(name, eager, ours, dtype, how)
    print(f"compared {compared} module inputs")
    print(f"bad {bad}")


if __name__ == "__main__":
    main()
