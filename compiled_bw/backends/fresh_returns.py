"""Mutating custom ops whose returns may alias their inputs, made safe for Inductor.

Consumes an FX graph about to be compiled by Inductor (backends/inductor.py); produces the same
graph where each `auto_functionalized` / `auto_functionalized_v2` call of a custom op with a
plain (non-aliasing) Tensor return calls that op's twin instead: an op with the same schema,
registered in the `compiled_bw_fresh` library, that runs the original and clones any returned
tensor sharing storage with an argument.

Note [Inductor: mutating ops that return their input]
   A custom op declared `(Tensor(a!) x) -> Tensor` promises a fresh return, but nothing in
   eager checks it: an op implemented as `x.add_(5); return x` (PyTorch's own compiled-autograd
   test `trace_auto_functionalized` defines one, Meta kernel `return x`) runs fine eagerly.
   Inductor believes the schema.  Decomposing `auto_functionalized`, it traced the op's fake,
   which returned `x` itself, so the mutated `x` and the return became one value; the buffer
   holding `x` was then thought dead and reused for the next matmul's output while that
   matmul still read it: `x.grad` all zeros where eager's was up to 217 (issue #36 item 0:
   selective checkpointing recomputes the op in the backward; `torch.compile(backend=
   "inductor")` of the same forward gives the same zeros under eager autograd, so it is
   Inductor's, not ours).  In our graphs the op is called through its twin: same schema,
   same tags, whose real and fake kernels return fresh tensors (a clone where the original
   returned an alias of an argument; nothing extra where it did not), so whatever Inductor
   assumes from the schema holds.  tests/test_mutating_custom_ops.py fails once torch's own
   Inductor gets this pattern right (then this module can go).
"""
from __future__ import annotations

import torch
import torch.fx

from ..torchapi.dynamo import OpOverload, pytree

_NS = "compiled_bw_fresh"
_LIB = None
_TWINS: dict = {}
AUTO_FUNCTIONALIZED = tuple(
    getattr(torch.ops.higher_order, n) for n in ("auto_functionalized", "auto_functionalized_v2")
    if hasattr(torch.ops.higher_order, n))


def may_alias_return(op) -> bool:
    """A custom (non-aten) op whose schema has a Tensor return with no alias annotation."""
    if not isinstance(op, OpOverload) or op.namespace in ("aten", "prims"):
        return False
    return any(r.alias_info is None and isinstance(r.type, torch.TensorType)
               for r in op._schema.returns)


def _storage_ptr(t: torch.Tensor) -> int:
    try:
        return t.untyped_storage().data_ptr()
    except Exception:          # noqa: BLE001 (a tensor without storage aliases nothing)
        return 0


def _fresh(out, args, kwargs, fake: bool):
    """`out` with every tensor that shares storage with an argument replaced by its clone
    (under fake tensors, storage cannot be told apart: every tensor is cloned)."""
    if fake:
        return pytree.tree_map_only(torch.Tensor, lambda o: o.clone(), out)
    ptrs = {_storage_ptr(a) for a in pytree.tree_leaves((args, kwargs))
            if isinstance(a, torch.Tensor)}
    ptrs.discard(0)
    return pytree.tree_map_only(
        torch.Tensor, lambda o: o.clone() if _storage_ptr(o) in ptrs else o, out)


def twin(op):
    """The op's fresh-returning twin (Note [Inductor: mutating ops that return their
    input]), registered once per op and process."""
    if op in _TWINS:
        return _TWINS[op]
    global _LIB
    if _LIB is None:
        _LIB = torch.library.Library(_NS, "FRAGMENT")
    schema = str(op._schema)
    name = op.name().replace("::", "__").replace(".", "__")
    _LIB.define(name + schema[schema.index("("):], tags=tuple(op.tags))

    def real(*args, **kwargs):
        return _fresh(op(*args, **kwargs), args, kwargs, fake=False)

    def fake(*args, **kwargs):
        return _fresh(op(*args, **kwargs), args, kwargs, fake=True)

    _LIB.impl(name, real, "CompositeExplicitAutograd")
    torch.library.register_fake(f"{_NS}::{name}", fake, lib=_LIB)
    t = getattr(getattr(torch.ops, _NS), name).default
    _TWINS[op] = t
    return t


def needs_twins(gm: torch.fx.GraphModule) -> bool:
    return any(may_alias_return(n.args[0])
               for target in AUTO_FUNCTIONALIZED
               for n in gm.graph.find_nodes(op="call_function", target=target))


def use_twins(gm: torch.fx.GraphModule) -> None:
    """Each auto_functionalized call of an op that may return an alias calls its twin."""
    for target in AUTO_FUNCTIONALIZED:
        for n in gm.graph.find_nodes(op="call_function", target=target):
            if may_alias_return(n.args[0]):
                n.args = (twin(n.args[0]),) + tuple(n.args[1:])
    gm.recompile()
