"""Dispatcher thread-local state around opaque calls (torchapi/autograd.py's dispatcher API).

Consumes the dispatch-key exclusions in force when a compiled graph starts (`snapshot()`);
produces `restored(snapshot)`, a context that, inside a `compiled_bw::opaque` call, puts them
back, and `Restorer(snapshot)`, the same for many calls of one graph run: it reads the whole
local exclude set in one call and redoes the per-key comparison only when that set differs
from the one it last saw (an opaque call's dispatcher state is the same on every call).  A custom op's implementation runs with the Autograd (and Autocast) dispatch keys
excluded, but the user code we run there -- a custom Function's backward, a hook -- may use
autograd itself (checkpoint's recomputation, grads taken inside a hook), exactly as under the
eager engine.  Also `kept()`: a context that puts the whole local include and exclude sets back
as they were on entry, however its body ends (Note [Dispatch state after a failed trace]).
tests/test_private_api.py checks the API.
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
_exclude_set = torch_autograd.dispatch_tls_local_exclude_set


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


class Restorer:
    """`restored(snap)` for the calls of one graph run, without a per-call object or 11 key
    queries: `enter()` puts the snapshot's exclusions back and returns what `undo` reverts."""
    __slots__ = ("_changed", "_seen", "snap")

    def __init__(self, snap: tuple) -> None:
        self.snap = snap
        self._seen = None
        self._changed: tuple = ()

    def enter(self) -> tuple:
        cur = _exclude_set()
        if self._seen is None or not cur == self._seen:
            self._changed = tuple((k, was) for k, was in zip(KEYS, self.snap, strict=True)
                                  if _is_excluded(k) != was)
            self._seen = cur
        for k, was in self._changed:
            _set_excluded(k, was)
        return self._changed


def undo(changed: tuple) -> None:
    for k, was in changed:
        _set_excluded(k, not was)


# Note [Dispatch state after a failed trace]
# A capture traces the real nodes under make_fx with fake tensors; eager never does.  When that
# trace raises inside torch, torch does not always unwind the dispatcher's thread-local state:
# a ConvolutionBackward0 fed a forward-AD dual grad (forward-over-reverse, PyTorch's
# test_conv_backend) reaches aten._fw_primal's native kernel through FakeTensor's meta
# fallback, which fails an internal assert and leaves ADInplaceOrView, AutogradOther,
# PythonTLSSnapshot, the functorch keys and more excluded in this thread.  We fall back to
# eager for that step, correctly, but every later op in the thread then ran below autograd:
# outputs without grad_fn ("element 0 of tensors does not require grad" at the next
# backward, under compiled_bw or not), functorch and Python dispatch modes bypassed.  The
# state is set when the failed trace's frames are freed (a guard object held by a frame
# local restores what it saw), i.e. when the exception dies, after the trace returned.  So a
# trace runs inside `kept()`, which restores both sets as they were when it began, and clears
# the frames of its exception (traceback.clear_frames) before leaving it.
def kept():
    """Context manager: the local dispatch-key include and exclude sets on exit are those on
    entry (torch's ForceDispatchKeyGuard, entered with the current sets)."""
    return torch_autograd.ForceDispatchKeyGuard(torch_autograd.dispatch_tls_local_include_set(),
                                                _exclude_set())
