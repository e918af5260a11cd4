"""compiled_bw's own fake-tensor work on this thread: its traces, its recomputation traces and
its Inductor compiles.

Consumes THREAD (core/thread.py) and torchapi's log filter; produces `ours()`, a context
inside which a meta kernel's failure is compiled_bw's to report (a fallback reason, or
eager's own error) and not FakeTensor's to log (torchapi/dynamo.py Note [Meta failures are
our fallbacks]).
"""
from __future__ import annotations

from ..torchapi.dynamo import filter_meta_failures
from .thread import THREAD, flag


def ours() -> flag:
    """Context: this thread does compiled_bw's own fake work (nests: restores what it found)."""
    return flag("fake_work", True)


filter_meta_failures(lambda: THREAD.fake_work)
