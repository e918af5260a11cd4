"""The differential helper every test uses: same program, same seed, eager vs compiled_bw.

`differential(build, step)` runs `state = build()` then `step(state)` for `steps` steps,
once under eager autograd and once under `compiled_bw.enable(...)`, each from the same
seed, and compares everything `step` returns (tensors: values within dtype tolerance, dtype,
shape, strides; other values: equality) and every exception (type and message).  It also
checks that the compiled run really compiled: no fallback, and the expected capture count.
The backend is `backend=` if given, else $COMPILED_BW_TEST_BACKEND (default "eager"; tests
marked `both_backends` run on both, tests/conftest.py).  On Inductor a graph's first step runs
while it compiles in the background (as users get it) and its later steps run the compiled code.
"""
from __future__ import annotations

import os

import torch
import torch.utils._pytree as pytree

import compiled_bw

TOL = {torch.float64: (1e-10, 1e-10), torch.float32: (1e-5, 1e-5),
       torch.bfloat16: (2e-2, 2e-2), torch.float16: (2e-3, 2e-3)}


def sized(sizes, make):
    """build/step over a sequence of sizes: step k runs make(state, sizes[k]); make(None,
    None) builds the state (tests of dynamic shapes)."""
    def build():
        return {"k": 0, "state": make(None, None)}

    def step(s):
        n = sizes[s["k"]]
        s["k"] += 1
        return make(s["state"], n)
    return build, step


def _run(build, step, steps, seed, after_step=lambda: None):
    torch.manual_seed(seed)
    state = build()
    out = []
    for _ in range(steps):
        try:
            out.append(("ok", step(state)))
        except Exception as e:  # noqa: BLE001 -- the error is part of the observable behaviour
            out.append(("raised", (type(e), str(e))))
        after_step()
    return out


def assert_same(a, b, where="result"):
    fa, sa = pytree.tree_flatten(a)
    fb, sb = pytree.tree_flatten(b)
    assert sa == sb, f"{where}: structure differs:\n eager {sa}\n ours  {sb}"
    for k, (x, y) in enumerate(zip(fa, fb, strict=True)):
        w = f"{where}[{k}]"
        if isinstance(x, torch.Tensor):
            assert isinstance(y, torch.Tensor), f"{w}: eager gave a tensor, we gave {y!r}"
            assert x.dtype == y.dtype, f"{w}: dtype {x.dtype} vs {y.dtype}"
            assert x.shape == y.shape, f"{w}: shape {x.shape} vs {y.shape}"
            assert x.stride() == y.stride(), f"{w}: stride {x.stride()} vs {y.stride()}"
            rtol, atol = TOL.get(x.dtype.to_real() if x.is_complex() else x.dtype, (0, 0))
            torch.testing.assert_close(y, x, rtol=rtol, atol=atol, equal_nan=True, msg=lambda m, w=w: f"{w}: {m}")
        else:
            assert x == y, f"{w}: eager {x!r} vs ours {y!r}"


def selected_backend() -> str:
    return os.environ.get("COMPILED_BW_TEST_BACKEND", "eager")


def compare_runs(eager: list, ours: list, adjust=lambda eager_value, our_value: our_value) -> None:
    """Per step: same outcome (value or raised), same error, same values (assert_same).
    `adjust(eager_value, our_value)` may normalise ours first (the fuzzer's known deviations)."""
    for i, ((ke, ve), (ko, vo)) in enumerate(zip(eager, ours, strict=True)):
        assert ke == ko, (f"step {i}: eager {ke} {ve if ke == 'raised' else ''} "
                          f"vs ours {ko} {vo if ko == 'raised' else ''}")
        if ke == "raised":
            assert ve == vo, f"step {i}: eager raised {ve}, we raised {vo}"
        else:
            assert_same(ve, adjust(ve, vo), f"step {i}")


def differential(build, step, *, steps=3, backend=None, seed=0, captures=1,
                 fallbacks=0, strict=None, allow_errors=False, options=None):
    """Returns compiled_bw.stats() of the compiled run after asserting equality.

    An exception in a step is compared like a value, but only allowed when the test says the
    error is its point (allow_errors=True): a program that always raises compares nothing.
    options: more enable() arguments (e.g. cudagraphs=True).
    """
    if backend is None:
        backend = selected_backend()
    eager = _run(build, step, steps, seed)
    raised = [v for k, v in eager if k == "raised"]
    assert allow_errors or not raised, f"eager raised {raised[0]}; pass allow_errors=True if intended"
    compiled_bw.reset()
    if strict is None:
        strict = fallbacks == 0
    with compiled_bw.enable(backend=backend, strict=strict, **(options or {})):
        # With background compile (the default), a graph's first step runs on the eager
        # backend while Inductor compiles it: wait, so its later steps run Inductor's code.
        ours = _run(build, step, steps, seed, after_step=compiled_bw.wait_for_compiles)
    st = compiled_bw.stats()
    compare_runs(eager, ours)
    assert fallbacks is None or st.fallbacks == fallbacks, f"fallbacks {st.fallbacks} != {fallbacks}: {st.fallback_reasons}"
    if captures is not None:
        assert st.captures == captures, f"captures {st.captures} != {captures}: {st.recompile_reasons}"
    return st


def grads(module_or_tensors) -> list:
    """Clones of every .grad (None kept), for returning from a step."""
    ps = module_or_tensors.parameters() if isinstance(module_or_tensors, torch.nn.Module) else module_or_tensors
    return [None if p.grad is None else p.grad.clone() for p in ps]


def grads_raw(tensors) -> list:
    """The .grad objects themselves (keeps strides as the engine produced them)."""
    return [p.grad for p in tensors]
