"""Graph inputs a captured graph mutates, and the version counters eager leaves on them.

Consumes a traced GraphModule (graph inputs: root grads, then saved tensors); produces, per
graph input that an aten op of the graph writes to (directly or through a view of it), how
many times eager's backward bumps its version counter there, for runtime/run.py Note
[Graph inputs the backward mutates].

Note [Graph inputs the backward mutates]
A backward may write into a tensor it reads: an AOT backward that mutates a forward input
(AOTAutograd keeps such data mutations in the backward graph as `copy_` into the input), a
traced custom backward's in-place op on a saved tensor.  The values reach the real tensor
either way (our graph writes into its input).  Eager's version counter, though, moves by what
ran: one bump per in-place aten op run op by op (a custom backward; an AOT backward of
aot_eager or any backend that runs the graph's ops), none for an AOT backward compiled by
Inductor (its kernel writes into the buffer).  Our eager backend bumps per op, our Inductor
backend never: so the run sets each such input's counter to its version before the run plus
eager's bumps.  An input written by any op that is not aten's (a custom op: its own kernel
decides; also a graph with a functionalized custom op, whose result is copied back) keeps
whatever the run did.  And where another graph input shares storage with a
mutated one (another node saved the same tensor), eager's later node checks the version when
it runs, and Inductor assumes inputs do not alias: that backward runs eager autograd.
"""
from __future__ import annotations

import torch

from ..torchapi.dynamo import HigherOrderOperator, OpOverload

# node.meta key set by aot.trace_aot on the nodes of an AOT backward Inductor compiled
NO_VERSION_BUMP = "compiled_bw_no_version_bump"


def _writes(target) -> list:
    """Argument positions an op writes to (its schema's `(a!)`)."""
    return [k for k, a in enumerate(target._schema.arguments)
            if a.alias_info is not None and a.alias_info.is_write]


def written_args(n: torch.fx.Node) -> list:
    """The arguments (args or kwargs, lists flattened) that node n's op writes to."""
    t = n.target
    out = []
    for k in _writes(t):
        arg = n.args[k] if k < len(n.args) else n.kwargs.get(t._schema.arguments[k].name)
        out.extend(arg if isinstance(arg, (list, tuple)) else (arg,))
    return out


def _is_view(target) -> bool:
    rets = target._schema.returns
    return (len(rets) == 1 and rets[0].alias_info is not None and not rets[0].alias_info.is_write
            and not _writes(target))


def _base(arg, placeholders: dict):
    """The graph input `arg` is (or is a view chain of), else None."""
    while isinstance(arg, torch.fx.Node):
        if arg.op == "placeholder":
            return placeholders.get(arg)
        t = arg.target
        if arg.op != "call_function" or not isinstance(t, OpOverload) or \
                not _is_view(t):
            return None
        arg = arg.args[0] if arg.args else None
    return None


def mutated_inputs(gm: torch.fx.GraphModule) -> tuple:
    """((graph input position, eager's version bumps), ...) for the inputs aten ops write to
    and no other op does."""
    placeholders = {n: k for k, n in enumerate(n for n in gm.graph.nodes if n.op == "placeholder")}
    bumps: dict = {}
    other: set = set()
    for n in gm.graph.nodes:
        t = n.target
        if n.op != "call_function":
            continue
        if isinstance(t, HigherOrderOperator) and "functionalized" in t.name():
            return ()   # a custom op's kernel writes (its own bumps), copied back by copy_
        if not isinstance(t, OpOverload) or not t._schema.is_mutable:
            continue
        for a in written_args(n):
            p = _base(a, placeholders)
            if p is None:
                continue
            if t.namespace != "aten":
                other.add(p)
            else:
                bumps[p] = bumps.get(p, 0) + (0 if n.meta.get(NO_VERSION_BUMP) else 1)
    return tuple((p, b) for p, b in sorted(bumps.items()) if p not in other)
