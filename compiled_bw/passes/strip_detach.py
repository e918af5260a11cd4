"""strip_detach: removes the aten.detach nodes that unpacking saved tensors inserts.

Consumes a traced GraphModule (run under no_grad, so detach has no effect on values);
produces the same graph with every detach's uses rewired to its input.
"""
import torch


def strip_detach(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target is torch.ops.aten.detach.default:
            node.replace_all_uses_with(node.args[0])
            gm.graph.erase_node(node)
    return gm
