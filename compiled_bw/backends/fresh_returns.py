"""Mutating custom ops in our graphs, made safe for Inductor.

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

Note [Inductor: mutating ops called directly]
   A custom backward (or hook) that calls a mutating custom op is traced into our graph as
   that call itself, not `auto_functionalized` (AOTAutograd's functionalization makes those;
   our trace does not functionalize).  Our Inductor retrace functionalizes with
   torch.func.functionalize, which refuses a custom op with alias annotations ("Found a custom
   (non-ATen) operator whose output has alias annotations"): the graph ran on the eager
   backend.  Such a call becomes its functional twin -- the op's schema without the `!`s,
   returning the op's returns (fresh, as above) and then the new value of each argument it
   writes, computed on clones -- followed by `copy_` of each new value into the argument, which
   functionalization turns into plain dataflow.  Only ops whose written arguments are plain
   Tensors and whose returns are Tensors (or nothing) are rewritten; others keep the old
   behaviour (the eager backend, named).
"""
from __future__ import annotations

import operator
import re

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


_FUNCTIONAL: dict = {}


def _written(op) -> list | None:
    """(index, name) of each argument the op writes, when all are plain Tensors and every
    return is a fresh Tensor; else None (Note [Inductor: mutating ops called directly])."""
    sch = op._schema
    if not all(isinstance(r.type, torch.TensorType) and r.alias_info is None for r in sch.returns):
        return None
    out = []
    for i, a in enumerate(sch.arguments):
        if a.alias_info is not None and a.alias_info.is_write:
            if not isinstance(a.type, torch.TensorType):
                return None
            out.append((i, a.name))
    return out or None


def functional_twin(op):
    """The op as a functional custom op: returns (*its returns, *new values of what it
    writes), computed on clones (Note [Inductor: mutating ops called directly])."""
    if op in _FUNCTIONAL:
        return _FUNCTIONAL[op]
    global _LIB
    if _LIB is None:
        _LIB = torch.library.Library(_NS, "FRAGMENT")
    written = _written(op)
    sch = str(op._schema)
    args = re.sub(r"\(\w+!\)", "", sch[sch.index("("):sch.rindex(") ->") + 1])
    rets = ["Tensor"] * (len(op._schema.returns) + len(written))
    name = op.name().replace("::", "__").replace(".", "__") + "__functional"
    _LIB.define(f"{name}{args} -> ({', '.join(rets)})")

    def run(args, kwargs, fake):
        args, kwargs = list(args), dict(kwargs)
        new = []
        for i, n in written:
            if i < len(args):
                args[i] = args[i].clone()
                new.append(args[i])
            else:
                kwargs[n] = kwargs[n].clone()
                new.append(kwargs[n])
        out = op(*args, **kwargs)
        outs = () if out is None else (out if isinstance(out, tuple) else (out,))
        res = (*_fresh(tuple(outs), args, kwargs, fake), *new)
        return res[0] if len(res) == 1 else res

    _LIB.impl(name, lambda *a, **k: run(a, k, False), "CompositeExplicitAutograd")
    torch.library.register_fake(f"{_NS}::{name}", lambda *a, **k: run(a, k, True), lib=_LIB)
    t = getattr(getattr(torch.ops, _NS), name).default
    _FUNCTIONAL[op] = t
    return t


def _direct_mutating_calls(gm: torch.fx.GraphModule) -> list:
    return [n for n in gm.graph.nodes
            if n.op == "call_function" and isinstance(n.target, OpOverload)
            and n.target.namespace not in ("aten", "prims", "compiled_bw", _NS)
            and n.target._schema.is_mutable
            and _written(n.target) is not None and len(n.target._schema.returns) <= 1]


def needs_functional(gm: torch.fx.GraphModule) -> bool:
    return bool(_direct_mutating_calls(gm))


def use_functional(gm: torch.fx.GraphModule) -> None:
    """Each direct call of a mutating custom op becomes its functional twin and a `copy_`
    into each argument it writes (Note [Inductor: mutating ops called directly])."""
    g = gm.graph
    for n in _direct_mutating_calls(gm):
        op = n.target
        written = _written(op)
        k = len(op._schema.returns)
        with g.inserting_before(n):
            f = g.call_function(functional_twin(op), n.args, dict(n.kwargs))
            one = k + len(written) == 1        # then the twin returns a Tensor, not a tuple
            for j, (i, name) in enumerate(written):
                src = n.args[i] if i < len(n.args) else n.kwargs[name]
                new = f if one else g.call_function(operator.getitem, (f, k + j))
                g.call_function(torch.ops.aten.copy_.default, (src, new))
            if k:
                n.replace_all_uses_with(f if one else g.call_function(operator.getitem, (f, 0)))
        g.erase_node(n)
    gm.recompile()
