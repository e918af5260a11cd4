"""Delivery points: a leaf's AccumulateGrad run inside the compiled graph, where eager runs it.

Consumes an OpaqueSite of kind "leaf", registered by the trace where our engine runs a leaf's
AccumulateGrad (trace/trace.py); produces a call to the custom op `compiled_bw::deliver`,
which returns nothing and is marked side-effectful, so that no pass and no backend removes it
(Inductor keeps it as an extern call, in graph order with the other opaque calls).  At run
time it runs this step's real AccumulateGrad node with the grad as the engine runs it
(native.run_leaf: tensor pre-hooks, node pre-hooks, the accumulation and post-accumulate-grad
hooks, node post-hooks, C++ ones such as DDP's and FSDP's included), inside the running
backward's graph task, with `_current_autograd_node()` answering that node
(runtime/run.py Note [Delivery points]).
"""
from __future__ import annotations

import operator
import sys

import torch

from ..core import dispatch_tls
from ..core.thread import THREAD
from ..graph import defined
from ..graph.native import hook_dicts, run_leaf
from ..graph.saved import check_after_call
from ..torchapi.autograd import storage_use_count
from ..torchapi.dynamo import OpOverload
from . import run_hooks
from .opaque import originals

_LIB = torch.library.Library("compiled_bw", "FRAGMENT")
_LIB.define("deliver(int site, Tensor? grad, str label, bool owned=False) -> ()")


def _deliver_impl(site: int, grad, label: str, owned: bool = False) -> None:
    """The dispatcher's kernel: user code runs with the dispatcher state the graph started
    with (core/dispatch_tls.py), not the Autograd-excluded one of a custom op's kernel."""
    changed = THREAD.step.tls.enter()
    try:
        deliver_direct(site, grad, label, owned)
    finally:
        dispatch_tls.undo(changed)


def deliver_direct(site: int, grad, label: str, owned: bool = False) -> None:
    """One delivery point, called by the graph's code directly (backends/inductor.py Note
    [Inductor: direct calls], the eager backend) -- there the dispatcher state is already the
    graph's -- or by `_deliver_impl`.  label: what the call runs, for readers of the graph
    ('leaf AccumulateGrad').  owned: the grad is a buffer only the graph holds
    (runtime/run.py Note [Stealing at delivery points]; set on the graph that is run, after
    every pass)."""
    step = THREAD.step
    s = step.sites[site]
    if step.undefined and grad is not None and s.in_defined and not defined.evaluate(
            s.in_defined[0], step.undefined, step.memo):
        grad = None             # undefined this step (defined.py Note [Undefined grads])
    if step.originals and grad is not None:
        # calls/opaque.py Note [The tensor user code returned, to user code]
        grad = originals(step, [grad])[0]
    node = step.nodes[s.node_index]
    steal = owned       # runtime/run.py Note [Stealing at delivery points]
    held = None
    if s.steal and grad is not None:
        ref = step.stealable.get(id(grad))
        steal = ref is not None and ref() is grad
        if steal and step.shared:   # calls/opaque.py Note [One grad for several leaves]
            left = step.shared.get(id(grad), 1)
            if left > 1:            # a later delivery point gets it too: this one copies
                step.shared[id(grad)] = left - 1
                steal = False
                # (read here, in this frame: calls/opaque.py Note [Counting references inline])
                held = (sys.getrefcount(grad), grad._use_count(),
                        storage_use_count(grad.untyped_storage()._cdata))
    prev = step.current
    step.current = s.node_index
    try:
        run_leaf(node, grad, steal)
    finally:
        step.current = prev
    if held is not None and held != (sys.getrefcount(grad), grad._use_count(),
                                     storage_use_count(grad.untyped_storage()._cdata)):
        # this leaf's hooks kept the tensor (or a view of it): the later leaves copy it too,
        # as eager's AccumulateGrad does with a grad referenced elsewhere
        step.stealable.pop(id(grad), None)
    if step.hooks_changed:      # hooks.py Note [Hooks registered during the backward]
        run_hooks.check_registered(step, s, hook_dicts())
    if step.checks:     # trace/trace.py Note [Saved tensors modified during the backward]
        check_after_call(step.checks, site)


def owned_grad(g) -> bool:
    """runtime/run.py Note [Stealing at delivery points]: whether the graph value `g` a
    delivery point gets lives in storage that only the graph made and that nothing else in the
    graph reads: an aten op's fresh result, or views of one, each used once (barriers, which
    only order, aside)."""
    while True:
        if not isinstance(g, torch.fx.Node) or g.op != "call_function":
            return False
        if sum(1 for u in g.users if u.target is not barrier) != 1:
            return False
        op = g.target
        if op is operator.getitem:
            parent = g.args[0]
            # one result of a multi-output op: its own storage if the op's results are fresh
            return isinstance(parent, torch.fx.Node) and fresh_results(parent.target)
        if not isinstance(op, OpOverload) or op.namespace != "aten":
            return False
        if fresh_results(op):
            return True
        g = g.args[0]                   # a view (or in-place op) of its first argument


# aten ops that return their input's storage without saying so in their schema
_SHARES_STORAGE = frozenset({torch.ops.aten._unsafe_view.default})


def fresh_results(op) -> bool:
    return (isinstance(op, OpOverload) and op.namespace == "aten"
            and op not in _SHARES_STORAGE
            and all(r.alias_info is None for r in op._schema.returns))


_LIB.impl("deliver", _deliver_impl, "CompositeExplicitAutograd")
deliver = torch.ops.compiled_bw.deliver.default
torch.fx.node.has_side_effect(deliver)


@torch.library.register_fake("compiled_bw::deliver", lib=_LIB)
def _deliver_fake(site: int, grad: torch.Tensor | None, label: str, owned: bool = False) -> None:
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
