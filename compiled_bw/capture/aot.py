"""AOT backward splicing: every use of AOTAutograd internals (torch 2.13) lives here.

Consumes a `CompiledFunctionBackward` node (the autograd node of a `torch.compile`d forward);
produces, at trace time, its backward inlined into our graph: the AOT prologue (tangent
coercion, argument order `[*symints, *saved, *opaque, *tangents]`) traced, the AOT backward FX
module's nodes copied in (names prefixed `aot<k>_`), the epilogue traced.  The prologue is
traced rather than proxied: its decisions depend only on tensor metadata that the signature
holds, and an opaque call would have to copy every saved tensor it passes through.
`CompiledFunction.compiled_bw` is never touched, so the lazy backward compile never happens.
When the module is not available, `aot_plan` says why and the node runs as one opaque custom
call.  tests/test_private_api.py checks every attribute used here and names what moved.
"""
from __future__ import annotations

import torch

from ..torchapi import dynamo as torch_dynamo

REQUIRED_CF_ATTRS = ("_aot_id", "_lazy_backward_info", "_bw_prologue_fn", "_bw_epilogue_fn",
                     "metadata")
_PLANS: dict = {}


def is_aot_node_class(cls) -> bool:
    fwd = getattr(cls, "_forward_cls", None)
    return fwd is not None and hasattr(fwd, "_aot_id") and hasattr(fwd, "_lazy_backward_info")


class AotPlan:
    """Per CompiledFunction class: its backward module, or why it cannot be spliced."""
    __slots__ = ("bw_module", "cf", "reason")

    def __init__(self, cf, bw_module, reason: str) -> None:
        self.cf = cf
        self.bw_module = bw_module
        self.reason = reason


def aot_plan(cls) -> AotPlan:
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _PLANS[cls] = _make_plan(cls._forward_cls)
    return plan


def _make_plan(cf) -> AotPlan:
    missing = [a for a in REQUIRED_CF_ATTRS if not hasattr(cf, a)]
    if missing:
        return AotPlan(cf, None, f"AOTAutograd's CompiledFunction has no {missing} (torch moved it)")
    meta = cf.metadata
    if getattr(meta, "is_rng_op_functionalized", False) or getattr(meta, "num_graphsafe_rng_states", 0):
        return AotPlan(cf, None, "AOT backward with functionalized RNG state")
    try:
        bw = torch_dynamo.extract_bw_module(cf)
    except Exception as e:  # noqa: BLE001 -- any failure: run the compiled backward opaquely
        return AotPlan(cf, None, f"AOT backward module not available ({type(e).__name__}: {e})")
    if bw is None:
        return AotPlan(cf, None, "AOT backward module not available")
    return AotPlan(cf, bw, "")


def saved_of(node) -> tuple:
    """(saved tensors -- unpacked, so eager's version check runs -- , the no-vc-check list,
    symints, opaque objects) of this step's ctx."""
    return (node.saved_tensors, list(getattr(node, "_tensors_no_vc_check", ()) or ()),
            tuple(node.symints), tuple(getattr(node, "opaque_objects", ()) or ()))


def trace_aot(plan: AotPlan, node, saved: list, no_vc: list, grads: list, prefix: str,
              tracer_graph) -> tuple:
    """Inline one AOT backward (under make_fx); returns the per-forward-input grads tuple that
    CompiledFunction.backward would return.  Graph nodes created here get `prefix`."""
    from torch.fx import Interpreter

    cf = plan.cf
    before = set(tracer_graph.nodes)
    all_args = cf._bw_prologue_fn(tuple(saved) + tuple(no_vc), list(node.symints),
                                  list(getattr(node, "opaque_objects", ()) or ()), list(grads))
    with torch.no_grad():
        out = Interpreter(plan.bw_module).run(*all_args)
    out = cf._bw_epilogue_fn(out)
    for n in tracer_graph.nodes:
        if n not in before and n.op == "call_function":
            n._rename(prefix + n.name)
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)
