"""Backend registry: name -> compile(gm, example_inputs) -> boxed callable f(box) -> list.

`enable(backend=...)` takes a registered name or a callable with that signature (a plain
callable is wrapped so it gets the inputs unpacked, `f(*args)`, as torch.compile backends do).
Optional backends are imported on first use, so a missing dependency (e.g. a torch built
without Inductor) disables only that backend, with a message saying why.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable

from .eager import compile_eager

BACKENDS: dict[str, Callable] = {"eager": compile_eager}
# name -> (module, function), imported by lookup_backend on first use.
LAZY: dict[str, tuple[str, str]] = {"inductor": (".inductor", "compile_inductor")}


def register_backend(name: str, fn: Callable) -> None:
    BACKENDS[name] = fn


def _load(name: str) -> Callable:
    module, attr = LAZY[name]
    try:
        fn = getattr(importlib.import_module(module, __name__), attr)
    except ImportError as e:
        raise ValueError(
            f"compiled_bw: backend {name!r} is unavailable: importing it failed with "
            f"{type(e).__name__}: {e}. Use backend='eager', or install a torch build that "
            f"provides it.") from e
    BACKENDS[name] = fn
    return fn


def lookup_backend(backend) -> Callable:
    if callable(backend):
        def compile_user(gm, example_inputs):
            fn = backend(gm, example_inputs)
            if getattr(fn, "_boxed_call", False):
                return fn

            def run(box: list) -> list:
                args = list(box)
                box.clear()
                return fn(*args)
            return run
        return compile_user
    fn = BACKENDS.get(backend)
    if fn is not None:
        return fn
    if backend in LAZY:
        return _load(backend)
    raise ValueError(f"compiled_bw: unknown backend {backend!r}; registered: "
                     f"{sorted({*BACKENDS, *LAZY})} (or pass a callable (gm, example_inputs) -> fn)")
