"""The `eager` backend: runs the captured FX graph op by op.  The reference for the others.

Consumes a GraphModule and example inputs; produces a boxed callable `f(box) -> list`: a copy
of the graph with FX's boxed codegen, whose code takes the box, empties it, and drops every
value (inputs included) after its last use, so saved tensors die during the backward as in
eager autograd.  The captured GraphModule itself is left as is (last_graph() shows it).
In the copy, opaque calls and delivery points call their Python implementation directly
(Note [Direct opaque calls]).
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

    def run(box: list) -> list:
        return boxed(box)

    return run
