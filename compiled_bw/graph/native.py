"""The loaded C++ walk extension, as the modules below the walk reach it.

Consumes what walk/fastwalk.py loads (it sets `_S.ext`, builds it on first use and walks with
it); produces the state of that extension (`_S`: loaded or not, why not, the walk's counters)
and the few things the run-time calls and checkpoint regions ask of it: free a node's saved
variables as eager's engine does (`release_node`), run an AccumulateGrad node (`run_leaf`),
read a node's hook dicts (`hook_dicts`).  Imports nothing of compiled_bw: the extension calls
back into calls/opaque.py, which walk/fastwalk.py wires in when it loads it.
"""
from __future__ import annotations

import os


class _State:
    def __init__(self) -> None:
        self.ext = None            # the loaded module
        self.tried = False
        self.error = ""            # why it is unavailable
        self.enabled = os.environ.get("COMPILED_BW_FASTWALK", "1") not in ("", "0")
        self.build_seconds = 0.0
        self.gave_up: dict = {}    # reason -> count
        self.fast_walks = 0        # steps walked in C++
        self.py_walks = 0          # steps walked in Python while enabled (gave up)
        self.python_roots: dict = {}   # root key -> why its graph needs the Python walk


_S = _State()


def hook_dicts():
    """The C++ reader of a node's (pre-hook, post-hook) dicts (hooks.node_hooks' `dicts`),
    None without the extension."""
    return _S.ext.hook_dicts if _S.ext is not None else None


def release_node(node) -> None:
    """What eager's engine does after a node ran with retain_graph=False: free its saved
    variables (with their hooks and packed objects).  Without the extension nothing is freed
    here (the autograd graph frees them when it dies)."""
    ext = _S.ext
    if ext is not None:
        ext.release_node(node)


def run_leaf(node, grad, steal: bool = False) -> None:
    """Run an AccumulateGrad node as the engine does (hooks of every kind, the accumulation);
    only called where leaf_observed answered (the extension is loaded).  steal: runtime/run.py
    Note [Stealing at delivery points]."""
    _S.ext.run_leaf(node, grad, steal)
