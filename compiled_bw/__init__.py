"""compiled_bw: capture a whole PyTorch backward at run time, compile it, cache it.

    import compiled_bw
    with compiled_bw.enable(backend="eager"):
        loss.backward()

See README.md and shared DESIGN.md for the pipeline: capture/ -> passes/ -> backends/ -> runtime/.
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
from .capture.packed import traceable_saved_tensors_hooks
from .capture.run_hooks import HookRegisteredDuringBackward
from .compress import compress_activations
from .errors import CompiledBwError, Unsupported
from .runtime.run import profile_compiled

# Registration entry points are wrapped at import: hooks and custom Functions created before
# this line are not seen (capture/hooks.py, capture/custom.py).  uninstall() undoes it.
install()

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
