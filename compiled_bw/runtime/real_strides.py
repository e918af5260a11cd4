"""Real output strides: what a graph's first run returned, for the compile that follows it.

Consumes the outputs of a graph's first run (on the eager backend, before its background
Inductor compile starts) and the captured GraphModule; produces the same GraphModule whose
output nodes' `val`s have the strides that run produced, where the trace predicted others.

Note [Real output strides]
Inductor lays each output out as the captured graph's output `val` says (backends/inductor.py
Note [Inductor: output strides]), and those strides are what the trace's meta kernels
predicted, which is not always what the real kernels produce: a conv with one input channel
differentiated twice gets two weight grads, summed; meta predicted a layout for one of them
that the real kernel does not give, the sum's predicted strides were (9, 36, 3, 1), eager's
real `.grad` (9, 9, 3, 1), and AccumulateGrad's layout contract, which ignores size-1
dimensions, stored Inductor's.  The eager backend runs the real kernels, and a graph's first
run is on it (its compile starts after that run: runtime/run.py _run_first_or_hit), so that
run's output strides replace the predicted ones for the compile (the graph the compile worker
gets carries them).  Only static shapes; the eager backend's own code is unchanged.
"""
from __future__ import annotations

import torch


def strides_of(outs) -> list:
    """Per output: its strides, or None (not a dense tensor)."""
    return [tuple(o.stride()) if isinstance(o, torch.Tensor) and o.layout == torch.strided
            else None for o in outs]


def adopt(gm: torch.fx.GraphModule, strides: list | None) -> int:
    """Note [Real output strides]: how many output `val`s took a run's strides."""
    if not strides:
        return 0
    args = gm.graph.find_nodes(op="output")[0].args[0]     # the graph returns a flat list
    if not isinstance(args, (list, tuple)) or len(args) != len(strides):
        return 0
    n = 0
    for a, s in zip(args, strides, strict=True):
        v = a.meta.get("val") if isinstance(a, torch.fx.Node) else None
        if s is None or not isinstance(v, torch.Tensor) or getattr(v, "fake_mode", None) is None:
            continue
        if not all(isinstance(d, int) for d in (*v.shape, *v.stride())) or \
                tuple(v.stride()) == s or len(s) != v.dim():
            continue
        with v.fake_mode:
            a.meta["val"] = torch.empty_strided(v.shape, s, dtype=v.dtype, device=v.device)
        n += 1
    return n
