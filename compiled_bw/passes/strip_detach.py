"""strip_detach: removes the aten.detach nodes that unpacking saved tensors inserts.

Consumes a traced GraphModule (run under no_grad, so detach has no effect on values);
produces the same graph with every detach's uses rewired to its input.  For a create_graph=True
graph (run with grad mode on: trace/differentiable.py Note [create_graph]) only the detaches
of saved tensors go: eager's SavedVariable::unpack gives a saved tensor back with its history
(the trace records its shallow copy of the placeholder as a detach), while a detach a formula
makes itself cuts history in eager too and stays.
"""
import torch


def strip_detach(gm: torch.fx.GraphModule, create_graph: bool = False) -> torch.fx.GraphModule:
    detach = torch.ops.aten.detach.default
    found = [n for n in gm.graph.nodes if n.op == "call_function" and n.target is detach
             and (not create_graph or _unpacked(n.args[0]))]
    for node in found:
        node.replace_all_uses_with(node.args[0])
        gm.graph.erase_node(node)
    return gm


def _unpacked(arg) -> bool:
    """A saved tensor's placeholder (trace/trace.py names them saved_*), as unpacked."""
    return isinstance(arg, torch.fx.Node) and arg.op == "placeholder" and \
        arg.name.startswith("saved_")
