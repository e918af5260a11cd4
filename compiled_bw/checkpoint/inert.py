"""Module hooks known to do nothing when eager's recomputation of a checkpointed region calls
them at this backward.

Consumes the instance hooks of a region's modules at walk time; produces `active(module)`
(whether any submodule has a hook that is not such an inert one: the region then declines,
recompute.py) and `hidden(module)` (those hooks out of the modules' hook dicts while Dynamo
judges the region once: it cannot trace them).

Note [Inert hooks]
Hugging Face's output recording (transformers 5, utils/output_capturing.py) installs a forward
hook on every decoder layer, attention and router of a model the first time a forward is asked
for hidden states, attentions or router logits (Mixtral and Qwen2-MoE ask for router logits),
and never removes it: every checkpointed region of such a model has hooked modules, and
regions with instance hooks are declined (Dynamo does not guard hooks).  The hook's first act
is to read a context variable, the collector its model's forward sets for the length of that
forward and resets after; without one it returns, touching nothing.  Eager's recomputation
runs at the backward, in the backward's context (the engine hands the caller's context to its
device threads), so where `_active_collector.get()` is None now, the hook does nothing in this
recomputation: the region is what it would be without it.  That is checked at every walk (a
backward run inside a forward that records outputs declines, and its nodes run hooked).  The
traced recomputation (make_fx) runs the hooks, which return at once; Dynamo cannot trace a
context variable's `get`, so its one judgment of a region runs with these hooks out of the
hook dicts (the same dicts, emptied and refilled in order around the call; a forward of the
same module in another thread during that call would miss its recording), and its guards,
which do not cover hooks (`skip_nnmodule_hook_guards`), are checked with them in place.  Only
hooks whose module, name and code are the known ones count; any other hook declines.
"""
from __future__ import annotations

import contextlib

HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks",
               "_forward_hooks_with_kwargs", "_forward_pre_hooks_with_kwargs")
_HF_MODULE = "transformers.utils.output_capturing"
_HF_HOOK = "install_output_capuring_hook.<locals>.output_capturing_hook"


def _inert(fn) -> bool:
    """Whether forward hook fn is Hugging Face's output-capturing hook with no collector now."""
    if getattr(fn, "__module__", None) != _HF_MODULE or \
            getattr(fn, "__qualname__", None) != _HF_HOOK or \
            "_active_collector" not in getattr(getattr(fn, "__code__", None), "co_names", ()):
        return False
    collector = fn.__globals__.get("_active_collector")
    try:
        return collector is not None and collector.get() is None
    except Exception:  # noqa: BLE001 -- another version's collector: not known to be inert
        return False


def active(module) -> bool:
    """Whether any submodule of `module` has an instance hook that is not inert now."""
    for m in module.modules():
        d = vars(m)
        for name in HOOK_DICTS:
            hooks = d.get(name)
            if not hooks:
                continue
            if name != "_forward_hooks" or not all(_inert(h) for h in hooks.values()):
                return True
    return False


@contextlib.contextmanager
def hidden(module):
    """The inert forward hooks of `module`'s submodules out of their dicts, then back in order
    (Note [Inert hooks])."""
    kept = []
    for m in module.modules():
        hooks = vars(m).get("_forward_hooks")
        if hooks and any(_inert(h) for h in hooks.values()):
            items = list(hooks.items())
            kept.append((hooks, items))
            hooks.clear()
            hooks.update((k, h) for k, h in items if not _inert(h))
    try:
        yield
    finally:
        for hooks, items in kept:
            hooks.clear()
            hooks.update(items)
