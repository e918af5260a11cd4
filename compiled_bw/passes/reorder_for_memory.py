"""reorder_for_memory: moves the last use of saved-tensor inputs earlier when that frees memory.

Consumes a traced GraphModule (placeholders: root grads, then saved tensors; all freed after
their last use by the boxed call); produces the same graph with some nodes moved earlier,
never across a node that mutates, draws random numbers, or calls back into Python (opaque
calls, which may run hooks, and leaf delivery points), and never so that the estimated peak rises.
See Note [Reordering for memory].
"""
from __future__ import annotations

import torch

from ..calls.deliver import deliver
from ..calls.opaque import opaque
from ..graph.mutated import assign
from ..torchapi.dynamo import OpOverload, has_side_effects

# Note [Reordering for memory]
# The trace runs our engine in eager's execution order, and a node's formula consumes its
# saved tensors together with its incoming grad, so most saved tensors already die where
# eager frees them (when their node has run).  Moving every consumer of a saved tensor "as
# early as dependencies allow" would be harmful: ops that read only saved tensors
# (pow_backward's `self.pow(e - 1)`, var_backward's `self - self.mean()`) would all run at
# the start of the graph, where the live set is largest.  So a node n is moved to just after
# the last of its inputs (and of the barriers before it) only when
#   - it is the last use of a saved input that then dies earlier (no other user in between),
#   - it frees more bytes than it allocates, so memory is lower over the span it skips, and
#   - its own transient (live bytes at its new place + its output) does not exceed the
#     largest transient of the span: tensors that nodes in the span would have freed are
#     still alive there (gemm's gelu_backward moved above the weight-grad mm would run next
#     to the activation that mm frees: +12 MB).
# Before that, view ops move up to their inputs (_hoist_views), so that a consumer whose real
# inputs are ready early is not held back by a `t` the trace made late: gemm's weight-grad mm
# then runs before the grad-input mm, freeing a 16 MB activation before 16 MB are allocated
# (peak 180 -> 164 MB on Inductor, where torch compiled autograd is).
# Estimated from the fake values' sizes (views -- by their op's schema -- free nothing).
# Inductor then reorders its own kernels for peak memory
# (torch._inductor.config.reorder_for_peak_memory); for it this is a starting order.


def _is_view_op(node: torch.fx.Node) -> bool:
    """A view op (its schema's output aliases an input).  The traced `val`s cannot say it:
    make_fx stores them as fresh fake tensors (`_is_view()` is False even for `t`)."""
    t = node.target
    return node.op == "call_function" and isinstance(t, OpOverload) and t.is_view


def _nbytes(node: torch.fx.Node) -> int:
    """Bytes freed when this value dies / allocated when it is made: 0 for views."""
    if _is_view_op(node):
        return 0
    val = node.meta.get("val")
    vals = val if isinstance(val, (list, tuple)) else (val,)
    return sum(_hint(v.numel()) * v.element_size() for v in vals if isinstance(v, torch.Tensor))


def _hint(n) -> int:
    """A dynamic graph's sizes are SymInts: estimate with this capture's values (comparing the
    symbols would add shape guards, and specialize the graph on an estimate)."""
    return n if type(n) is int else n.node.hint


def _is_barrier(node: torch.fx.Node) -> bool:
    if node.op != "call_function":
        return node.op == "output"
    t = node.target
    if has_side_effects(t):     # with_effects, effectful ops (dce.py Note [Side effects stay])
        return True
    if t is opaque or t is deliver or t is assign or not isinstance(t, OpOverload):
        return t is opaque or t is deliver or t is assign
    return t._schema.is_mutable or torch.Tag.nondeterministic_seeded in t.tags


def _timeline(nodes: list) -> tuple:
    """Per position: live bytes after the node ran, and its transient (inputs + output)."""
    last = {}
    for n in nodes:
        for a in n.all_input_nodes:
            last[a] = n
    dies: dict = {}
    for a, n in last.items():
        dies.setdefault(n, []).append(a)
    after, transient, live = [], [], 0
    for n in nodes:
        if n.op == "placeholder":
            live += _nbytes(n)
            transient.append(live)
        else:
            transient.append(live + _nbytes(n))
            live += _nbytes(n) - sum(map(_nbytes, dies.get(n, ())))
            if not n.users:
                live -= _nbytes(n)
        after.append(live)
    return after, transient


def _hoist_views(gm: torch.fx.GraphModule) -> None:
    """Each view op moves to just after the latest of its inputs and of the barrier before it
    (views keep their chain order).  A view allocates and frees nothing, and its storage lives
    until its own last use wherever it is made, so this changes no live set; it lets the loop
    below move a consumer up to where its real inputs are ready (gemm: the weight-grad mm that
    frees a 16 MB activation reads `t(grad)`, which the trace made after the grad-input mm
    that allocates 16 MB)."""
    nodes = list(gm.graph.nodes)
    pos = {n: k for k, n in enumerate(nodes)}
    attached: dict = {}          # anchor -> views to place right after it, in order
    phs = [n for n in nodes if n.op == "placeholder"]
    barrier = phs[-1] if phs else None      # placeholders stay first
    for n in nodes:
        if _is_barrier(n):
            barrier = n
            continue
        if not _is_view_op(n):
            continue
        anchor = max((*n.all_input_nodes, *([barrier] if barrier is not None else [])),
                     key=pos.__getitem__, default=None)
        if anchor is not None and pos[anchor] + 1 < pos[n]:
            attached.setdefault(anchor, []).append(n)
    if not attached:
        return
    moved = {v for vs in attached.values() for v in vs}
    order: list = []

    def emit(m) -> None:
        order.append(m)
        for v in attached.get(m, ()):
            emit(v)
    for n in nodes:
        if n not in moved:
            emit(n)
    assert len(order) == len(nodes), "hoisting views lost a node"
    prev = order[0]
    for m in order[1:]:
        if prev.next is not m:
            prev.append(m)
        prev = m


def reorder_for_memory(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    _hoist_views(gm)
    nodes = list(gm.graph.nodes)
    saved = {n for n in nodes if n.op == "placeholder"}
    last_use = {}
    for n in nodes:
        for a in n.all_input_nodes:
            last_use[a] = n
    pos = {n: k for k, n in enumerate(nodes)}
    timeline = None
    barrier = None
    for n in nodes:
        if _is_barrier(n):
            barrier = n
            continue
        val = n.meta.get("val")
        if n.op != "call_function" or not isinstance(val, torch.Tensor) or _is_view_op(n):
            continue
        dying = [a for a in n.all_input_nodes if last_use.get(a) is n]
        if not any(a in saved for a in dying):
            continue
        anchor = max((*n.all_input_nodes, *([barrier] if barrier is not None else [])),
                     key=pos.__getitem__)
        q, p = pos[anchor] + 1, pos[n]
        if q >= p:
            continue
        # an input dies at the new place only if all its other users come before it
        dying = [a for a in dying if all(pos[u] < q for u in a.users if u is not n)]
        if not any(a in saved for a in dying) or sum(map(_nbytes, dying)) <= _nbytes(n):
            continue
        if timeline is None:
            timeline = _timeline(list(gm.graph.nodes))
        after, transient = timeline
        if after[q - 1] + _nbytes(n) > max(transient[q:p + 1]):
            continue
        anchor.append(n)    # moves n to just after anchor; rare, so renumbering is cheap
        pos = {m: k for k, m in enumerate(gm.graph.nodes)}
        timeline = None
    return gm
