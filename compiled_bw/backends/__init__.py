"""Backend registry: name -> compile(gm, example_inputs) -> boxed callable f(box) -> list.

`enable(backend=...)` takes a registered name or a callable with that signature (a plain
callable is wrapped so it gets the inputs unpacked, `f(*args)`, as torch.compile backends do).
"""
from __future__ import annotations

from collections.abc import Callable

from .eager import compile_eager

BACKENDS: dict[str, Callable] = {"eager": compile_eager}


def register_backend(name: str, fn: Callable) -> None:
    BACKENDS[name] = fn


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
    try:
        return BACKENDS[backend]
    except KeyError:
        raise ValueError(f"compiled_bw: unknown backend {backend!r}; registered: "
                         f"{sorted(BACKENDS)} (or pass a callable (gm, example_inputs) -> fn)") from None
