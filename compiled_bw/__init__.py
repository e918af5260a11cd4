"""compiled_bw: capture a whole PyTorch backward at run time, compile it, cache it.

    import compiled_bw
    with compiled_bw.enable(backend="eager"):
        loss.backward()

See README.md and shared DESIGN.md for the pipeline: capture/ -> passes/ -> backends/ -> runtime/.
"""
from .capture import hooks as _hooks

_hooks.install()

from .api import Stats, enable, explain, last_compiled, last_graph, reset, stats
from .backends import register_backend
from .errors import CompiledBwError, Unsupported

__all__ = [
           "CompiledBwError",
           "Stats",
           "Unsupported",
           "enable",
           "explain",
           "last_compiled",
           "last_graph",
           "register_backend",
           "reset",
           "stats",
]
