"""The `eager` backend: runs the captured FX graph op by op.  The reference for the others.

Consumes a GraphModule and example inputs; produces a boxed callable `f(box) -> list`: a copy
of the graph with FX's boxed codegen, whose code takes the box, empties it, and drops every
value (inputs included) after its last use, so saved tensors die during the backward as in
eager autograd.  The captured GraphModule itself is left as is (last_graph() shows it).
In the copy, opaque calls and delivery points call their Python implementation directly
(Note [Direct opaque calls]).  The copy's `forward` is called, never the module itself
(Note [The graph is no user module]).
"""
import operator

import torch

from ..calls import deliver, opaque
from ..torchapi.dynamo import BoxedCodeGen

# Note [Direct opaque calls]
# Through the dispatcher, an opaque call (or a delivery point: calls/deliver.py) costs
# OpOverload.__call__, the Autograd fallback (which excludes the Autograd keys), the Python
# kernel, and putting the graph's dispatcher state back for user code (core/dispatch_tls.py).
# The eager backend's code is Python: it calls `opaque_direct` (`deliver_direct`) itself, one
# Python call per site, in the state the graph started in.  (A TorchDispatchMode active
# around the backward sees no compiled_bw::opaque call, as under eager autograd, which has no
# such op.)  Inductor's generated code does the same (backends/inductor.py Note [Inductor:
# direct calls]).

# Note [The graph is no user module]
# A GraphModule is an nn.Module: calling it runs nn.Module.__call__, and with it the global
# module hooks a user registered (register_module_forward_pre_hook, _forward_hook,
# _backward_hook, _full_backward_hook, _full_backward_pre_hook): they would see our graph as a
# module called during the backward -- eager autograd calls no module there -- and a global
# forward pre hook may replace the graph's input box, a global backward hook wrap it in
# BackwardHookFunction.  So the backward calls the copy's generated `forward` directly (which
# also skips __call__'s hook checks, and FX's _WrappedCall, which writes the generated code's
# line to stderr when the graph raises), and Inductor's retrace calls the captured graph's
# `forward` (backends/inductor.py _tuple_outputs): under make_fx a module call runs its hooks
# too, once per compile, and a hook's error made the compile fail.


# Note [Sparse grads from opaque calls]
# A custom backward or a hook may return a sparse (COO/CSR) grad for a dense input: eager's
# validate_outputs allows it, its InputBuffer sums it with the other grads of that input, and
# AccumulateGrad stores it (sparse + sparse stays sparse).  The graph was traced with a dense
# value there; Inductor's code cannot take another layout (calls/opaque.py NotDense), but
# this backend's code is plain torch calls.  Where all the graph does with such an output is
# eager's own work on it -- sum it into an input buffer (aten.add, which the trace emits for
# InputBuffer accumulation: `_buffer_add` below puts the operands in the order eager's
# InputBuffer::accumulate does, as ATen adds a dense tensor to a sparse one only in that
# order), hand it to a delivery point (the real AccumulateGrad) or return it from grad() --
# the output may come back non-dense (opaque_direct's `loose`), and the run computes what eager
# computes.  The step records it; runtime/run.py then runs this graph's later backwards with
# eager autograd (Inductor's compile of it could not take the tensor).  Anything else done
# with such an output still raises NotDense.


def _buffer_add(old, new):
    """InputBuffer::accumulate (input_buffer.cpp): a sparse buffer is added to the new grad."""
    if old.layout in opaque.SPARSE_LAYOUTS:
        return new + old
    return old + new


def _buffer_add_(old, new):
    """The same where eager sums into `old` in place (trace/holders.py)."""
    if old.layout in opaque.SPARSE_LAYOUTS:
        return new + old
    return old.add_(new)


_SUMS = {torch.ops.aten.add.Tensor: _buffer_add, torch.ops.aten.add_.Tensor: _buffer_add_}


def _loose_outputs(node: torch.fx.Node) -> tuple:
    """(positions of an opaque call's outputs used only by accumulation, delivery and output,
    the accumulations they flow through)."""
    loose, adds = set(), set()
    for user in node.users:
        if user.target is not operator.getitem:
            return frozenset(), set()
        todo, chain, ok = [user], set(), True
        while todo and ok:
            for u in todo.pop().users:
                if u.op == "output" or (u.op == "call_function" and u.target is deliver.deliver):
                    continue
                if u.op == "call_function" and u.target in _SUMS and \
                        len(u.args) == 2 and not u.kwargs:
                    if u not in chain:
                        chain.add(u)
                        todo.append(u)
                    continue
                ok = False
                break
        if ok:
            loose.add(user.args[1])
            adds |= chain
    return frozenset(loose), adds


def compile_eager(gm: torch.fx.GraphModule, example_inputs: list):
    graph = torch.fx.Graph()
    graph.output(graph.graph_copy(gm.graph, {}))
    adds = set()
    for node in graph.nodes:
        if node.op == "call_function" and node.target is opaque.opaque:
            node.target = opaque.opaque_direct
            loose, chain = _loose_outputs(node)    # Note [Sparse grads from opaque calls]
            if loose:
                node.kwargs = {"loose": loose}
                adds |= chain
        elif node.op == "call_function" and node.target is deliver.deliver:
            node.target = deliver.deliver_direct
    for node in adds:
        node.target = _SUMS[node.target]
    graph.set_codegen(BoxedCodeGen())
    boxed = torch.fx.GraphModule(gm, graph)
    assert boxed._boxed_call

    return boxed.forward
