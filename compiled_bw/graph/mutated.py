"""Graph inputs a captured graph mutates, and the version counters eager leaves on them.

Consumes a traced GraphModule (graph inputs: root grads, then saved tensors); produces, per
graph input that an aten op of the graph writes to (directly, through a view of it, or
through an earlier in-place op's result, which is the input), how many times eager's
backward bumps its version counter there, for runtime/run.py Note [Graph inputs the backward
mutates].

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
it runs, and Inductor assumes inputs do not alias: that backward runs eager autograd.  So
does one where two written inputs share storage (one counter, two bumps to add).

Note [Buffer writes at the recomputation point]
A checkpointed region's recomputation may update a module's buffers in place (training
BatchNorm's running_mean, running_var and num_batches_tracked: eager's recomputation updates
them a second time).  Eager writes them when the region recomputes, mid-backward; a hook or
post-accumulate-grad hook that runs later in the same backward reads the new values, one that
ran earlier the old ones.  An aten `copy_` into a graph input would not keep that moment on
Inductor: its functionalization moves every write into an input to the graph's end.  So the
traced recomputation (checkpoint/recompute.py) writes each buffer with `compiled_bw::assign
(dst, src, bumps)`: `dst.copy_(src)` with eager's version bumps (1 for an in-place op, 0 for
the running stats native_batch_norm writes without saying so in its schema), a call whose
schema writes nothing, so functionalization leaves it where it is, and which Inductor keeps in graph
order with our other calls (backends/inductor.py Note [Inductor: call order]: every kernel
before it runs before it, a kernel reading dst after it runs after it).  mutated_inputs counts
it as a write with its bumps (the version check and the storage-sharing fallback above), and a
graph holding one is neither verified nor run as a CUDA graph (which would write a static copy).
"""
from __future__ import annotations

import operator

import torch

from ..torchapi.dynamo import HigherOrderOperator, OpOverload

_LIB = torch.library.Library("compiled_bw", "FRAGMENT")
_LIB.define("assign(Tensor dst, Tensor src, int bumps) -> ()")


def assign_direct(dst: torch.Tensor, src: torch.Tensor, bumps: int) -> None:
    """Note [Buffer writes at the recomputation point]: the write, with `bumps` version
    bumps (eager's: 1 for an in-place op, 0 for BatchNorm's running stats)."""
    dst.data.copy_(src)     # `.data`: a version counter of its own, dst's stays
    for _ in range(bumps):
        torch.autograd.graph.increment_version(dst)


_LIB.impl("assign", assign_direct, "CompositeExplicitAutograd")
assign = torch.ops.compiled_bw.assign.default
torch.fx.node.has_side_effect(assign)


@torch.library.register_fake("compiled_bw::assign", lib=_LIB)
def _assign_fake(dst: torch.Tensor, src: torch.Tensor, bumps: int) -> None:
    return None


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


def returns_alias(target) -> bool:
    """Whether an op returns an alias of an argument (a view, an in-place op's result)."""
    return isinstance(target, OpOverload) and any(
        r.alias_info is not None for r in target._schema.returns)


def _aliased_arg(n: torch.fx.Node, ret: int):
    """The argument node n's return `ret` aliases (its schema's `Tensor(a)` / `Tensor(a!)`:
    a view, an in-place op's result, an out= op's `out`), else None."""
    t = n.target
    if n.op != "call_function" or not isinstance(t, OpOverload):
        return None
    rets = t._schema.returns
    r = rets[ret] if ret < len(rets) else (rets[0] if len(rets) == 1 else None)  # Tensor[]
    if r is None or r.alias_info is None:
        return None
    # `Tensor(a)[]` (split, unbind) shows no set to Python: its argument is `Tensor(a -> *)`
    want = r.alias_info.before_set or {"*"}
    for k, a in enumerate(t._schema.arguments):
        if a.alias_info is not None and a.alias_info.after_set & want:
            return n.args[k] if k < len(n.args) else n.kwargs.get(a.name)
    return None


def input_of(arg, placeholders: dict):
    """The graph input (its value in `placeholders`) `arg` is or aliases through a chain of
    views and in-place results (`x.mul_(2).add_(1)`: add_ writes x), else None."""
    while isinstance(arg, torch.fx.Node):
        if arg.op == "placeholder":
            return placeholders.get(arg)
        if arg.op == "call_function" and arg.target is operator.getitem and \
                isinstance(arg.args[0], torch.fx.Node) and isinstance(arg.args[1], int):
            arg = _aliased_arg(arg.args[0], arg.args[1])    # one of split()'s views
        else:
            arg = _aliased_arg(arg, 0)
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
        if t is assign:     # Note [Buffer writes at the recomputation point]
            p = input_of(n.args[0], placeholders)
            if p is not None:
                bumps[p] = bumps.get(p, 0) + n.args[2]
            continue
        if not isinstance(t, OpOverload) or not t._schema.is_mutable:
            continue
        for a in written_args(n):
            p = input_of(a, placeholders)
            if p is None:
                continue
            if t.namespace != "aten":
                other.add(p)
            else:
                bumps[p] = bumps.get(p, 0) + (0 if n.meta.get(NO_VERSION_BUMP) else 1)
    return tuple((p, b) for p, b in sorted(bumps.items()) if p not in other)


def read_inputs(gm: torch.fx.GraphModule) -> frozenset:
    """The positions of the graph inputs it uses: only those can alias a mutated one in a way
    that matters (a checkpointed closure's region takes every module of the closure as inputs,
    timm's checkpoint_seq, though it reads and writes only its own blocks')."""
    return frozenset(k for k, n in enumerate(gm.graph.find_nodes(op="placeholder")) if n.users)
