"""Slots on a step's saved tensors: installed before a capture (or a run whose walk the C++
hit path does not serve), and which of them the graph's box alone owns.

Consumes a walk (walk/walk.py, walk/fastwalk.py) and a Plan; produces the walk's Slots
(or FallbackToEager when the saved tensors carry someone else's hooks) and the saved-tensor
positions whose Slots can be emptied before the run (runtime/run.py Note [Box ownership]).
runtime/run.py and runtime/dynamic.py use both.
"""
from __future__ import annotations

from ..graph.saved import SavedHooksInUse
from .cache import FallbackToEager


def slots_of(w):
    """Install the walk's Slots (w.install())."""
    try:
        return w.install()
    except SavedHooksInUse as e:
        raise FallbackToEager(f"saved tensors already carry hooks (saved_tensors_hooks?): {e}") from None


def box_owned(w, plan) -> tuple:
    """Positions in w.saved whose Slots can be emptied before the run (Note [Box ownership])."""
    computed = set(plan.executed) - {s.node_index for s in plan.opaque_sites}
    return tuple(k for k, (i, _, _) in enumerate(w.saved_node) if i in computed)
