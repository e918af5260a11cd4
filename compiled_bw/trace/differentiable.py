"""Whether a captured graph can run as a create_graph=True backward.

Consumes a traced GraphModule and its Plan (trace/trace.py); produces None when running the
graph's ops with grad mode on records the history eager's create_graph=True backward records,
else the reason it cannot (a fallback reason naming the nodes).

Note [create_graph]
Eager's engine runs each node with grad mode on when create_graph=True: the formulas' aten
ops record a second-order graph through the grads and the saved tensors (unpacked with their
history: walk/fastwalk.py Note [Saved tensors with history]), and AccumulateGrad stores
`.grad` with history (a clone, or an out-of-place sum).  The captured graph holds the same
aten ops the formulas called (traced below autograd), so running it with grad mode on records
the same ops, through the same inputs: the grads it returns carry eager's history, and a
backward through them (itself captured like any other) gives eager's second-order grads.  A
backward() runs it inside the real engine's task with create_graph=True (runtime/run.py
_deliver), so AccumulateGrad is the real node, run with grad mode on as eager runs it, and
the engine warns as eager's does; a grad() (no user code inside, nothing to deliver) calls it
directly with grad mode on (runtime/run.py Note [Direct delivery]).

What this does not do yet, and so falls back with the reason below: user code inside the
graph (custom Functions, hooks on interior nodes: their backward would have to run with grad
mode on, recording history, or raise eager's error for `once_differentiable`), delivery points
(a hook on a leaf observes when its grad arrives), AOT backwards spliced from torch.compile
(AOTAutograd's compiled backward is not differentiable), checkpointed regions and other
saved-tensor hooks (the C++ walk gives those up: fastwalk.walk), tensor subclasses, a backward
that mutates its inputs, and anything the graph calls that is not an aten/prims op.  The
graph runs on the eager backend (its ops one by one): AOTAutograd's joint compile of it would
make its results' backward AOT's, which raises at third order (a PINN needs it).  A compiled
form with a differentiable backward (one custom Function: Inductor's forward, the partitioned
joint as its backward) was built and measured on branch `create-graph-compiled`: exact, but
on a CPU no faster than this (PINN step 0.90-1.01x eager's against 0.79-0.83x here:
benchmarks/RESULTS.md), so not on main; a GPU, where this eager backend pays a launch per
op, is where it may pay.
"""
from __future__ import annotations

import operator

import torch

from ..graph.nodes import AOT, CUSTOM, TRACE_CUSTOM
from ..torchapi.dynamo import OpOverload

_NAMESPACES = ("aten", "prims")
_USER_CODE = (CUSTOM, TRACE_CUSTOM, AOT)


_SITE_KINDS = {"pre": "tensor/pre hooks of", "pre-capture": "grad() capture hooks of",
               "post": "post hooks of", "hooked": "saved-tensor hooks of",
               "unpack": "unpack hooks of", "leaf": "a hook on a leaf, run by its"}


def _site(s) -> str:
    """An opaque site in words: the node it runs, or whose hooks it runs."""
    what = _SITE_KINDS.get(s.kind)
    return s.name if what is None else f"{what} {s.name}"


def not_differentiable(gm: torch.fx.GraphModule, plan, kinds) -> str | None:
    """Note [create_graph]: None, or why the graph cannot run with history.  kinds: the walk's
    NodeKind per node (custom Functions are refused even where traced: eager runs their
    backward with grad mode on, or raises for once_differentiable, which a trace cannot tell)."""
    user = sorted({kinds[i].name for i in plan.executed if kinds[i].how in _USER_CODE})
    if user:
        return (f"custom autograd.Function / torch.compile backwards in the graph "
                f"({', '.join(user[:4])}{', ...' if len(user) > 4 else ''}) do not record "
                "history yet")
    if plan.opaque_sites:
        names = sorted({_site(s) for s in plan.opaque_sites})
        return (f"the graph runs user code or untraced nodes as opaque calls ({', '.join(names[:4])}"
                f"{', ...' if len(names) > 4 else ''}), which do not record history yet")
    if plan.delivers:
        return "a hook on a leaf observes when its grad arrives (delivery points)"
    if plan.in_layouts is not None or plan.out_layouts is not None:
        return "tensor subclasses among the graph's inputs or outputs"
    if plan.mutated_inputs:
        return "the backward mutates a tensor it reads"
    for n in gm.graph.nodes:
        if n.op != "call_function" or n.target is operator.getitem:
            continue
        t = n.target
        if not isinstance(t, OpOverload) or t.namespace not in _NAMESPACES:
            return f"the graph calls {getattr(t, '__name__', t)!s}, not an aten op"
    return None
