"""dce: dead-code elimination.

Consumes a GraphModule; produces it without nodes whose results nothing uses (e.g. the
partial ops of a node that fake tensors could not run, which then became an opaque call).
Calls FX marks impure (our opaque op and delivery points among them: capture/opaque.py,
capture/deliver.py) stay, by FX's own rules in `Node.is_impure`.
"""
import torch


def dce(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    gm.graph.eliminate_dead_code()
    return gm
