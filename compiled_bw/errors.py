"""The exceptions compiled_bw raises itself (errors eager autograd would raise are re-raised as is)."""


class CompiledBwError(RuntimeError):
    """Base class."""


class Unsupported(CompiledBwError):
    """Raised under enable(strict=True) where compiled_bw would otherwise fall back to eager.

    The message says what was unsupported (naming the autograd node) and how to opt out:
    drop strict=True to let compiled_bw run eager autograd for such calls.
    """
