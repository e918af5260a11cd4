"""In-place sums keep their strides through Inductor's functionalization.

Consumes a captured GraphModule before backends/inductor.py retraces it functionalized;
produces it with each in-place `add_` into a fresh value nothing else reads rewritten as
`copy_(empty_strided(<its strides>), add(...))` where user code gets the sum, else as `add`:
the same values, and what user code sees in the strides the in-place op gives.

Note [Inductor: in-place sums keep their strides]
trace/holders.py emits `old.add_(g)` where eager's InputBuffer sums in place and `old + g`
would have other strides (on dims of size 1: Note [Eager's in-place sums and copied leaf
grads]).  Inductor compiles a functionalized retrace of the graph, where that becomes
`add(old, g)` with TensorIterator's strides: right for the graph's outputs (pinned to the
captured graph's strides, Note [Inductor: exact output strides]) but not for what an opaque
call gets (a hook on that tensor would see other strides than eager's).  Written as a copy
into a buffer of old's strides, the functional form keeps them, and Inductor fuses the add
into that copy.  Only where that is the same program: `old` is the fresh result of an aten op
(no view or in-place result, so no alias of it lives on), or anything for a sum the holders
emitted (marked BUFFER_SUM: they sum in place only into what the engine alone holds), that the
`add_` alone reads, with sizes and strides known (not symbolic).
A marked buffer sum whose value no opaque call or delivery point gets, not even through a
view, is written as plain `add` instead: its strides are seen by Inductor's own kernels alone
(a graph output is pinned to the captured strides, Note [Inductor: exact output strides]), and
pinning a buffer to odd strides on dims of size 1 there is what Inductor got wrong: on Hugging
Face Falcon's checkpointed attention (a key grad (2, 1, 12, 16) summed in place, then permuted
into an index_put; found with a trial rule that summed in place wherever old has a dim of size
1, not kept), the functionalized `add_` and the copy into `empty_strided` both compiled to code
that corrupted the heap (wrong grads, or a crash later), where `add` was right.  Such a chain
of sums (a marked `add_` into the result of another) is rewritten link by link.
"""
from __future__ import annotations

import torch

from ..calls.deliver import deliver, fresh_results
from ..calls.opaque import opaque
from ..graph.mutated import returns_alias
from ..trace.holders import BUFFER_SUM

_ADD_ = torch.ops.aten.add_.Tensor


def _rewritable(n: torch.fx.Node) -> bool:
    if n.op != "call_function" or n.target is not _ADD_:
        return False
    old = n.args[0]
    if not (isinstance(old, torch.fx.Node) and old.op == "call_function"
            and (n.meta.get(BUFFER_SUM) or fresh_results(old.target))
            and len(old.users) == 1):
        return False
    v = old.meta.get("val")
    return (isinstance(v, torch.Tensor) and v.layout == torch.strided
            and all(type(x) is int for x in (*v.shape, *v.stride())))


def _user_code_gets(n: torch.fx.Node) -> bool:
    """Whether an opaque call or a delivery point gets n's value, or a view of it."""
    todo, seen = [n], set()
    while todo:
        for u in todo.pop().users:
            if u.target is opaque or u.target is deliver:
                return True
            if u not in seen and returns_alias(u.target):
                seen.add(u)
                todo.append(u)
    return False


def _functional(n: torch.fx.Node) -> bool:
    """A buffer sum (holders.py) whose strides nothing but Inductor's own kernels see: written
    as `add`.  (Graph outputs are pinned to the captured strides by backends/inductor.py.)"""
    old = n.args[0]
    return (bool(n.meta.get(BUFFER_SUM)) and isinstance(old, torch.fx.Node)
            and len(old.users) == 1 and not _user_code_gets(n))


def in_place_sums(gm: torch.fx.GraphModule) -> bool:
    """Whether keep_sum_strides would rewrite anything."""
    return any(_functional(n) or _rewritable(n)
               for n in gm.graph.find_nodes(op="call_function", target=_ADD_))


def keep_sum_strides(gm: torch.fx.GraphModule) -> None:
    """Rewrites gm in place (Note [Inductor: in-place sums keep their strides]); called where
    in_place_sums says there is something to rewrite."""
    g = gm.graph
    for n in list(g.find_nodes(op="call_function", target=_ADD_)):
        if _functional(n):
            n.target = torch.ops.aten.add.Tensor
            continue
        if not _rewritable(n):
            continue
        old, new = n.args[0], n.args[1]
        v = old.meta["val"]
        with g.inserting_before(n):
            buf = g.call_function(torch.ops.aten.empty_strided.default,
                                  (list(v.shape), list(v.stride())),
                                  {"dtype": v.dtype, "device": v.device})
            total = g.call_function(torch.ops.aten.add.Tensor, (old, new), dict(n.kwargs))
            out = g.call_function(torch.ops.aten.copy_.default, (buf, total))
        out.meta.update(n.meta)
        n.replace_all_uses_with(out)
        g.erase_node(n)
    gm.recompile()
