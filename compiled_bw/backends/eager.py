"""The `eager` backend: runs the captured FX graph op by op.  The reference for the others.

Consumes a GraphModule and example inputs; produces a boxed callable `f(box) -> list`: a copy
of the graph with FX's boxed codegen, whose code takes the box, empties it, and drops every
value (inputs included) after its last use, so saved tensors die during the backward as in
eager autograd.  The captured GraphModule itself is left as is (last_graph() shows it).
In the copy, opaque calls and delivery points call their Python implementation directly
(Note [Direct opaque calls]).  The copy's `forward` is called, never the module itself
(Note [The graph is no user module]).
"""
import torch

from ..capture import deliver, opaque
from ..torchapi.dynamo import BoxedCodeGen

# Note [Direct opaque calls]
# Through the dispatcher, an opaque call (or a delivery point: capture/deliver.py) costs
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


def compile_eager(gm: torch.fx.GraphModule, example_inputs: list):
    graph = torch.fx.Graph()
    graph.output(graph.graph_copy(gm.graph, {}))
    for node in graph.nodes:
        if node.op == "call_function" and node.target is opaque.opaque:
            node.target = opaque.opaque_direct
        elif node.op == "call_function" and node.target is deliver.deliver:
            node.target = deliver.deliver_direct
    graph.set_codegen(BoxedCodeGen())
    boxed = torch.fx.GraphModule(gm, graph)
    assert boxed._boxed_call

    return boxed.forward
