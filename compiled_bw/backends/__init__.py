"""Backend registry: name -> compile(gm, example_inputs) -> boxed callable f(box) -> list.

`enable(backend=...)` takes a registered name or a callable with that signature (a plain
callable is wrapped so it gets the inputs unpacked, `f(*args)`, as torch.compile backends do).
Optional backends are imported on first use, so a missing dependency (e.g. a torch built
without Inductor) disables only that backend, with a message saying why.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable

from ..torchapi import INDUCTOR
from .eager import compile_eager

BACKENDS: dict[str, Callable] = {"eager": compile_eager}
# name -> (module, function), imported by lookup_backend on first use.
LAZY: dict[str, tuple[str, str]] = {"inductor": (".inductor", "compile_inductor")}


def register_backend(name: str, fn: Callable) -> None:
    BACKENDS[name] = fn


# name -> the torch module it needs, checked without importing it (lookup_backend(load=False))
NEEDS = {"inductor": INDUCTOR}   # find_spec of a submodule would import this


def _unavailable(name: str, why: str) -> ValueError:
    return ValueError(
        f"compiled_bw: backend {name!r} is unavailable: {why}. Use backend='eager', or install "
        f"a torch build that provides it.")


def _load(name: str) -> Callable:
    module, attr = LAZY[name]
    try:
        fn = getattr(importlib.import_module(module, __name__), attr)
    except ImportError as e:
        raise _unavailable(name, f"importing it failed with {type(e).__name__}: {e}") from e
    BACKENDS[name] = fn
    return fn


def install_loaded() -> None:
    """Re-apply the torch patches of every backend already imported (`compiled_bw.install()`
    after `uninstall()`): a backend not yet imported applies its own on import."""
    for module, _ in LAZY.values():
        loaded = sys.modules.get(importlib.util.resolve_name(module, __name__))
        if loaded is not None and hasattr(loaded, "install"):
            loaded.install()


def lookup_backend(backend, load: bool = True) -> Callable | None:
    """The compile function of a backend name or callable.  load=False only checks that a lazy
    backend can be imported, without importing it (None)."""
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
        if load:
            return _load(backend)
        try:
            found = importlib.util.find_spec(NEEDS[backend]) is not None
        except ImportError:
            found = False
        if not found:
            raise _unavailable(backend, f"{NEEDS[backend]} is not in this torch")
        return None
    raise ValueError(f"compiled_bw: unknown backend {backend!r}; registered: "
                     f"{sorted({*BACKENDS, *LAZY})} (or pass a callable (gm, example_inputs) -> fn)")
