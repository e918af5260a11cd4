"""The `eager` backend: runs the captured FX graph op by op.  The reference for the others.

Consumes a GraphModule and example inputs; produces a boxed callable `f(box) -> list`: a copy
of the graph with FX's boxed codegen, whose code takes the box, empties it, and drops every
value (inputs included) after its last use, so saved tensors die during the backward as in
eager autograd.  The captured GraphModule itself is left as is (last_graph() shows it).
"""
import torch

from ..torchapi.dynamo import BoxedCodeGen


def compile_eager(gm: torch.fx.GraphModule, example_inputs: list):
    graph = torch.fx.Graph()
    graph.output(graph.graph_copy(gm.graph, {}))
    graph.set_codegen(BoxedCodeGen())
    boxed = torch.fx.GraphModule(gm, graph)
    assert boxed._boxed_call

    def run(box: list) -> list:
        return boxed(box)

    return run
