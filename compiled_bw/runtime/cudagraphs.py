"""CUDA graphs for compiled backward graphs: `enable(cudagraphs=True)`.

Consumes a cache entry (runtime/cache.py Compiled) whose graph runs on one CUDA device with no
opaque call, and this step's Box; produces the graph's outputs for this step, fresh tensors (as
the graph itself would make them), by replaying a CUDA graph of the entry's callable.

Note [CUDA graphs]
An overhead-bound backward is hundreds of small kernel launches from the CPU; a CUDA graph is
one launch.  Per entry callable (a background compile replacing the eager-backend callable with
Inductor's is a new one): the first step copies the Box into static input buffers and runs the
callable on them (the real run of that step, which also does every lazy initialization: Triton
kernel loads, cuBLAS handles), then records a CUDA graph of the callable on those buffers.
Each later step copies the Box into the static inputs (one `_foreach_copy_`), replays the graph,
and copies the static outputs into fresh tensors (one `_foreach_copy_`): a grad handed to a leaf
or returned by grad() never aliases memory the next replay overwrites, so AccumulateGrad can
steal it as in eager, and an output that appears twice stays one tensor.
Requires: static shapes (every graph is, today), no opaque call (user code cannot run inside a
CUDA graph), no write into a graph input (a replay writes the static copy), every Box entry a dense, non-overlapping tensor on the graph's one CUDA device (no
CPU scalar).  Where that does not hold, or recording fails, the entry runs without a CUDA graph
and `stats().notes` says why, once per entry.  Costs: one copy of the inputs (the saved
activations) and the graph's private memory pool live for as long as the entry.
"""
from __future__ import annotations

import torch

from ..calls.opaque import dense
from ..torchapi import autograd as torch_autograd


class NoGraph:
    """entry.fn runs without a CUDA graph, for `reason`."""
    __slots__ = ("fn", "reason")

    def __init__(self, fn, reason: str) -> None:
        self.fn = fn
        self.reason = reason


class Replay:
    __slots__ = ("fn", "graph", "static_in", "static_out")

    def __init__(self, fn, graph, static_in: list, static_out: list) -> None:
        self.fn = fn
        self.graph = graph
        self.static_in = static_in
        self.static_out = static_out


def unusable(entry, box: list) -> str | None:
    """Why entry cannot run as a CUDA graph with this Box, or None."""
    if entry.plan.opaque_sites:
        return "user code (custom Functions, hooks) runs inside the graph"
    if entry.plan.mutated_inputs:   # the replay would write the static copies
        return "the graph writes into its inputs (graph/mutated.py)"
    if entry.devices != frozenset({"cuda"}):
        return f"the graph touches devices {sorted(entry.devices)}, not CUDA alone"
    dev = None
    for t in box:
        if not isinstance(t, torch.Tensor) or t.device.type != "cuda":
            return f"a graph input is {'a ' + t.device.type + ' tensor' if isinstance(t, torch.Tensor) else type(t).__name__}"
        if dev is not None and t.device != dev:
            return f"graph inputs on {dev} and {t.device}"
        dev = t.device
        if t.numel() and not dense(t):
            return "a graph input is not dense (expanded or overlapping strides)"
    return None


def _fresh_like(t: torch.Tensor) -> torch.Tensor:
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)


def run(entry, box: list, state) -> list:
    """The outputs of entry.fn(box) (which empties box); state.note(text) reports, once per
    entry, why a CUDA graph is not used for it; state.stats.cudagraph_replays counts replays."""
    note = state.note
    r = entry.replay
    if isinstance(r, Replay) and r.fn is entry.fn:
        torch_autograd.foreach_copy_(r.static_in, box)
        box.clear()
        r.graph.replay()
        state.stats.cudagraph_replays += 1
        return _copy_out(r.static_out)
    if _no_graph_decided(entry):
        return entry.fn(box)
    reason = unusable(entry, box)
    if reason is not None:
        _no_graph(entry, reason, note)
        return entry.fn(box)
    return _record(entry, box, note)


def skip(entry, state) -> None:
    """A graph that does not run through run() (user code inside it): say so, once per entry."""
    if not _no_graph_decided(entry):
        _no_graph(entry, unusable(entry, []) or "not a direct run", state.note)


def _no_graph_decided(entry) -> bool:
    """Entry's current callable is known to run without a CUDA graph (said once)."""
    r = entry.replay
    return isinstance(r, NoGraph) and r.fn is entry.fn


def _no_graph(entry, reason: str, note) -> None:
    entry.replay = NoGraph(entry.fn, reason)
    note(f"cudagraphs: not used for this graph: {reason}")


def _copy_out(static_out) -> list:
    outs, seen = [], {}
    fresh_list, static_list = [], []
    for o in static_out:
        if not isinstance(o, torch.Tensor):
            outs.append(o)
            continue
        k = id(o)
        if k not in seen:
            seen[k] = _fresh_like(o)
            fresh_list.append(seen[k])
            static_list.append(o)
        outs.append(seen[k])
    if fresh_list:
        torch_autograd.foreach_copy_(fresh_list, static_list)
    return outs


def _record(entry, box: list, note) -> list:
    fn = entry.fn
    static_in = [_fresh_like(t) for t in box]
    torch_autograd.foreach_copy_(static_in, box)
    box.clear()
    outs = fn(list(static_in))      # this step's run; also every lazy initialization
    # an output may be (a view of) an input, e.g. a root grad passed through: the next
    # replay's input copy would overwrite it under the leaf's .grad
    ptrs = {t.untyped_storage().data_ptr() for t in static_in}
    copies: dict = {}
    outs = [copies.setdefault(id(o), o.clone()) if isinstance(o, torch.Tensor)
            and o.untyped_storage().data_ptr() in ptrs else o for o in outs]
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.device(static_in[0].device if static_in else torch.cuda.current_device()):
            torch.cuda.current_stream().synchronize()
            with torch.cuda.graph(graph):
                static_out = list(fn(list(static_in)))
    except Exception as e:  # noqa: BLE001 -- recording failed: this entry runs without a graph
        _no_graph(entry, f"recording the CUDA graph failed: {type(e).__name__}: "
                  f"{str(e).splitlines()[0][:200]}", note)
        return outs
    entry.replay = Replay(fn, graph, static_in, static_out)
    return outs
