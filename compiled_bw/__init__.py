"""compiled_bw: capture a whole PyTorch backward at run time, compile it, cache it.

    import compiled_bw
    with compiled_bw.enable(backend="eager"):
        loss.backward()

See docs/ARCHITECTURE.md for the pipeline: walk/ -> trace/ -> passes/ -> backends/ -> runtime/,
over graph/, checkpoint/ and calls/.
"""
from .api import (
    Stats,
    enable,
    explain,
    install,
    last_compiled,
    last_graph,
    reset,
    stats,
    uninstall,
    wait_for_compiles,
)
from .backends import register_backend
from .calls.run_hooks import HookRegisteredDuringBackward
from .compress import compress_activations
from .errors import CompiledBwError, Unsupported
from .graph.packed import traceable_saved_tensors_hooks
from .runtime import background as _background
from .runtime import warm as _warm
from .runtime.run import profile_compiled

# Registration entry points are wrapped at import: hooks and custom Functions created before
# this line are not seen (graph/hooks.py, graph/custom.py).  uninstall() undoes it.
install()
if _warm.prefetch():             # runtime/warm.py Note [Prefetch at import]
    _background.job_thread()    # (Note [Read-ahead]: started here, not in a first backward)

__all__ = [
           "CompiledBwError",
           "HookRegisteredDuringBackward",
           "Stats",
           "Unsupported",
           "compress_activations",
           "enable",
           "explain",
           "install",
           "last_compiled",
           "last_graph",
           "profile_compiled",
           "register_backend",
           "reset",
           "stats",
           "traceable_saved_tensors_hooks",
           "uninstall",
           "wait_for_compiles",
]
