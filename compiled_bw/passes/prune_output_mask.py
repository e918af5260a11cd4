"""prune_output_mask: backward ops compute only the outputs the graph uses.

Consumes a GraphModule after dce; produces it with each `output_mask` argument (of
aten.convolution_backward, native_layer_norm_backward, native_batch_norm_backward, ...)
cleared where nothing reads that output.

Note [Output masks]
A node's formula asks its task which outputs to compute (`task_should_compute_output`: eager's
exec_info, for grad() and backward(inputs=...) only the paths to the inputs).  The trace runs
each formula outside any task, where every output with a valid edge counts as needed, so a
grad(loss, x) through a conv computed the weight and bias grads too (a WGAN-GP penalty's
grad through its critic: two weight-grad convolutions per step that eager does not run), and
dce cannot drop part of one op.  The outputs the graph does read are computed exactly as
before (the mask only skips the others, which the op then returns undefined).
"""
import operator

import torch

from ..torchapi.dynamo import OpOverload


def _mask_position(target) -> int | None:
    if not isinstance(target, OpOverload):
        return None
    for k, a in enumerate(target._schema.arguments):
        if a.name == "output_mask":
            return k
    return None


def prune_output_mask(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    changed = False
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        k = _mask_position(n.target)
        if k is None or not all(u.op == "call_function" and u.target is operator.getitem
                                for u in n.users):
            continue
        used = {u.args[1] for u in n.users}
        in_kwargs = "output_mask" in n.kwargs
        mask = n.kwargs["output_mask"] if in_kwargs else (n.args[k] if k < len(n.args) else None)
        if mask is None:
            continue
        new = [bool(m) and i in used for i, m in enumerate(mask)]
        if new == list(mask):
            continue
        if in_kwargs:
            n.kwargs = {**n.kwargs, "output_mask": new}
        else:
            n.args = (*n.args[:k], new, *n.args[k + 1:])
        changed = True
    if changed:
        gm.recompile()
    return gm
