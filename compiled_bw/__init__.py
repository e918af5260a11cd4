"""compiled_bw: capture a whole PyTorch backward at run time, compile it, cache it.

    import compiled_bw
    with compiled_bw.enable(backend="eager"):
        loss.backward()

See README.md and shared DESIGN.md for the pipeline: capture/ -> passes/ -> backends/ -> runtime/.
"""
from .api import Stats, enable, explain, last_compiled, last_graph, reset, stats, wait_for_compiles
from .backends import register_backend
from .capture import custom as _custom
from .capture import hooks as _hooks
from .errors import CompiledBwError, Unsupported
from .runtime import engine_state as _engine_state
from .runtime.run import profile_compiled

# Registration entry points are wrapped at import: hooks and custom Functions created before
# this line are not seen (capture/hooks.py, capture/custom.py).
_hooks.install()
_custom.install()
_engine_state.install()

__all__ = [
           "CompiledBwError",
           "Stats",
           "Unsupported",
           "enable",
           "explain",
           "last_compiled",
           "last_graph",
           "profile_compiled",
           "register_backend",
           "reset",
           "stats",
           "wait_for_compiles",
]
