"""Dispatcher thread-local state around opaque calls (torchapi/autograd.py's dispatcher API).

Consumes the dispatch-key exclusions in force when a compiled graph starts (`snapshot()`);
produces `restored(snapshot)`, a context that, inside a `compiled_bw::opaque` call, puts them
back.  A custom op's implementation runs with the Autograd (and Autocast) dispatch keys
excluded, but the user code we run there -- a custom Function's backward, a hook -- may use
autograd itself (checkpoint's recomputation, grads taken inside a hook), exactly as under the
eager engine.  tests/test_private_api.py checks the API.
"""
from __future__ import annotations

from ..torchapi import autograd as torch_autograd

_DK = torch_autograd.DispatchKey
KEYS = tuple(getattr(_DK, k) for k in (
    "AutogradFunctionality", "AutogradOther", "AutogradNestedTensor", "ADInplaceOrView",
    "AutocastCPU", "AutocastCUDA", "AutocastXPU", "AutocastMPS", "AutocastHPU", "AutocastIPU",
    "AutocastPrivateUse1") if hasattr(_DK, k))
_is_excluded = torch_autograd.dispatch_tls_is_dispatch_key_excluded
_set_excluded = torch_autograd.dispatch_tls_set_dispatch_key_excluded


def snapshot() -> tuple:
    return tuple(_is_excluded(k) for k in KEYS)


class restored:
    __slots__ = ("changed", "snap")

    def __init__(self, snap: tuple) -> None:
        self.snap = snap
        self.changed: list = []

    def __enter__(self):
        for k, was in zip(KEYS, self.snap, strict=True):
            now = _is_excluded(k)
            if now != was:
                _set_excluded(k, was)
                self.changed.append((k, now))

    def __exit__(self, *exc) -> None:
        for k, now in self.changed:
            _set_excluded(k, now)
