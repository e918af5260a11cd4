"""torch's private API, all of what compiled_bw uses: one module per torch subsystem.

  autograd.py  the autograd engine, the dispatcher and functorch state (torch._C), the legacy
               vmap, torch's Function/Tensor internals
  dynamo.py    AOTAutograd, Dynamo, fake tensors, FX internals, pytree, Python dispatch
  inductor.py  Inductor (imported on first use: importing it costs seconds)

No other module of compiled_bw names `torch._*` or a private torch submodule
(tests/test_private_api.py checks it).  Each module lists what it takes from torch and who uses
it in `USED` (`"dotted.path": "user"`); tests/test_private_api.py resolves every entry on the
installed torch and fails naming the symbol and its user when torch moved it.  A symbol listed
also in the module's `OPTIONAL` (symbol -> feature) may be missing from a release: that feature
is then off there, and `features_off()` says why, naming the release.

Patches: what compiled_bw replaces in torch is named in the subsystem modules' `PATCHED`
tables (name -> (owner, attribute); an owner may be a dict, for Inductor's lowering table), and
replaced through `patch()` here only, so `uninstall()` gives torch back exactly as it was
(`compiled_bw.uninstall()`).  Bottom layer: these modules import torch only.
"""
from __future__ import annotations

import threading
from typing import NamedTuple


class _Patch(NamedTuple):
    owner: object
    attr: object
    original: object       # as found in the owner's __dict__ (a classmethod/staticmethod stays one)


INDUCTOR = "torch._inductor"     # inductor.py imports it; backends/ check it can be found first
_patches: dict[str, _Patch] = {}
_lock = threading.Lock()


_INHERITED = object()      # the attribute was a base class's: uninstall deletes ours


def _get(owner, attr):
    if isinstance(owner, dict):
        return owner[attr]
    if isinstance(owner, type):
        return owner.__dict__.get(attr, _INHERITED)
    return getattr(owner, attr)


def _set(owner, attr, value) -> None:
    if isinstance(owner, dict):
        owner[attr] = value
    elif value is _INHERITED:
        delattr(owner, attr)
    else:
        setattr(owner, attr, value)


def original(table: dict, name: str):
    """What `table[name]` is in torch itself (unwrapped: a classmethod's function), whether or
    not it is patched now."""
    p = _patches.get(name)
    owner, attr = table[name]
    raw = p.original if p is not None else _get(owner, attr)
    if raw is _INHERITED:
        raw = getattr(owner, attr) if p is None else getattr(owner.__mro__[1], attr)
    return getattr(raw, "__func__", raw)


def is_patched(name: str) -> bool:
    return name in _patches


def patch(table: dict, name: str, replacement, wrap=lambda f: f) -> None:
    """Set `table[name]` (an (owner, attribute) of torch) to `wrap(replacement)`, once (a later
    call changes nothing until uninstall())."""
    with _lock:
        if name not in _patches:
            owner, attr = table[name]
            _patches[name] = _Patch(owner, attr, _get(owner, attr))
            _set(owner, attr, wrap(replacement))


def uninstall() -> None:
    """Put back everything `patch()` replaced, in reverse order: torch as it was."""
    with _lock:
        for p in reversed(list(_patches.values())):
            _set(p.owner, p.attr, p.original)
        _patches.clear()


def features_off() -> dict:
    """{feature: why it is off on the installed torch} over the subsystem modules: features
    whose private API this release lacks (each module's `OPTIONAL` symbols name the feature
    their absence turns off, `FEATURES_OFF` says why, naming the release)."""
    from . import checkpoint, dynamo
    off = dict(checkpoint.FEATURES_OFF)
    if (why := dynamo.aot_splice_off()) is not None:
        off[dynamo.AOT_SPLICE_FEATURE] = why
    return off
