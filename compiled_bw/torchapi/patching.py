"""What compiled_bw replaces in torch, and how it puts it back (torchapi/__init__.py: Patches).

Consumes the subsystem modules' `PATCHED` tables (name -> (owner, attribute)) and their
replacements; produces the patched torch, `original()` (torch's own object, whether or not it
is patched now) and `uninstall()` (torch as it was).  Imports nothing of compiled_bw.
"""
from __future__ import annotations

import threading
from typing import NamedTuple


class _Patch(NamedTuple):
    owner: object
    attr: object
    original: object       # as found in the owner's __dict__ (a classmethod/staticmethod stays one)


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
