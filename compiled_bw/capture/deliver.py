"""Delivery points: a leaf's AccumulateGrad run inside the compiled graph, where eager runs it.

Consumes an OpaqueSite of kind "leaf", registered by the trace where our engine runs a leaf's
AccumulateGrad (capture/trace.py); produces a call to the custom op `compiled_bw::deliver`,
which returns nothing and is marked side-effectful, so that no pass and no backend removes it
(Inductor keeps it as an extern call, in graph order with the other opaque calls).  At run
time it runs this step's real AccumulateGrad node with the grad as the engine runs it
(fastwalk.run_leaf: tensor pre-hooks, node pre-hooks, the accumulation and post-accumulate-grad
hooks, node post-hooks, C++ ones such as DDP's and FSDP's included), inside the running
backward's graph task, with `_current_autograd_node()` answering that node
(runtime/run.py Note [Delivery points]).
"""
from __future__ import annotations

import torch

from ..core import dispatch_tls
from ..core.thread import THREAD
from . import defined, fastwalk, hooks
from .saved import check_after_call

_LIB = torch.library.Library("compiled_bw", "FRAGMENT")
_LIB.define("deliver(int site, Tensor? grad, str label) -> ()")


def _deliver_impl(site: int, grad, label: str) -> None:
    """label: what the call runs, for readers of the graph ('leaf AccumulateGrad')."""
    step = THREAD.step
    s = step.sites[site]
    if step.undefined and grad is not None and s.in_defined and not defined.evaluate(
            s.in_defined[0], step.undefined, step.memo):
        grad = None             # undefined this step (defined.py Note [Undefined grads])
    node = step.nodes[s.node_index]
    steal = False
    if s.steal and grad is not None:    # runtime/run.py Note [Stealing at delivery points]
        ref = step.stealable.get(id(grad))
        steal = ref is not None and ref() is grad
    prev = step.current
    step.current = s.node_index
    changed = step.tls.enter()
    try:
        fastwalk.run_leaf(node, grad, steal)
    finally:
        dispatch_tls.undo(changed)
        step.current = prev
    if step.hooks_changed:      # hooks.py Note [Hooks registered during the backward]
        hooks.check_registered(step, s, fastwalk.hook_dicts())
    if step.checks:     # capture/trace.py Note [Saved tensors modified during the backward]
        check_after_call(step.checks, site)


# Inductor's generated code calls it directly (backends/inductor.py Note [Inductor: direct
# calls]); there the dispatcher state is already the graph's, and `step.tls.enter()` changes
# nothing.
deliver_direct = _deliver_impl
_LIB.impl("deliver", _deliver_impl, "CompositeExplicitAutograd")
deliver = torch.ops.compiled_bw.deliver.default
torch.fx.node.has_side_effect(deliver)


@torch.library.register_fake("compiled_bw::deliver", lib=_LIB)
def _deliver_fake(site: int, grad: torch.Tensor | None, label: str) -> None:
    return None


# `compiled_bw::barrier(live)`: does nothing; Inductor must materialize its inputs before it
# (backends/inductor.py Note [Inductor: call order] inserts one before each opaque call and
# delivery point).
_LIB.define("barrier(Tensor[] live) -> ()")
_LIB.impl("barrier", lambda live: None, "CompositeExplicitAutograd")
barrier = torch.ops.compiled_bw.barrier.default
torch.fx.node.has_side_effect(barrier)


@torch.library.register_fake("compiled_bw::barrier", lib=_LIB)
def _barrier_fake(live: list[torch.Tensor]) -> None:
    return None
