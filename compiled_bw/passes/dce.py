"""dce: dead-code elimination.

Consumes a GraphModule; produces it without nodes whose results nothing uses (e.g. the
partial ops of a node that fake tensors could not run, which then became an opaque call).
Calls FX marks impure (our opaque op and delivery points among them: calls/opaque.py,
calls/deliver.py) stay, by FX's own rules in `Node.is_impure`, and so do calls with side
effects FX does not count (Note [Side effects stay]).
"""
import torch

from ..torchapi.dynamo import OpOverload, has_side_effects

# Note [Side effects stay]
#    FX's `Node.is_impure` (torch 2.13) counts an effectful op (one registered with
#    `_register_effectful_op`, whose calls AOTAutograd threads with effect tokens) as impure,
#    but not the `with_effects` call it sits in: an effectful op called for its side effect in
#    the backward of a torch.compile'd forward (its result unused, the token only returned to
#    AOT's epilogue, which drops it) was removed here, and its side effect never happened (a
#    logging op: eager called it once per step, we never did; issue #36 item 3).  A call
#    stays when its target has side effects: `with_effects`, an effectful op, an op with a
#    mutable argument (its schema says it writes), whatever FX says is impure.


def side_effect(n: torch.fx.Node) -> bool:
    """Note [Side effects stay]."""
    if n.is_impure():
        return True
    if n.op != "call_function":
        return False
    t = n.target
    return has_side_effects(t) or (isinstance(t, OpOverload) and t._schema.is_mutable)


def dce(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    gm.graph.eliminate_dead_code(is_impure_node=side_effect)
    return gm
