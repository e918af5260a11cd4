"""Streams (runtime/streams.py Note [Streams]), on any machine: the rule that decides whether a
compiled graph may run on the caller's current streams.  The CUDA cases that exercise it for
real are in tests/test_cuda.py (skipped without a GPU)."""
import pytest
import torch

import compiled_bw
from compiled_bw.runtime import streams
from compiled_bw.runtime.run import FallbackToEager
from compiled_bw.walk import fastwalk


def test_cpu_graph_reads_no_streams():
    # the C++ walk reads each node's InputMetadata stream; CPU nodes have none to check
    if not fastwalk.in_use():
        pytest.skip("C++ walk unavailable")
    from compiled_bw.graph.saved import gradient_edge
    x = torch.randn(3, requires_grad=True)
    y = (x.sin() * 2).sum()
    assert fastwalk.walk([gradient_edge(y)]).forward_streams() == []
    assert streams.device_types([x, torch.empty(1, device="meta"), 3]) == frozenset()


class _Walk:
    """A walk whose nodes ran their forward on these streams (the walk interface's
    forward_streams)."""

    def __init__(self, seen) -> None:
        self.seen = seen

    def forward_streams(self):
        return self.seen


@pytest.mark.parametrize(("seen", "current", "reason"), [
    ([("cuda", 0, 7)], 7, None),                                   # one stream, the current one
    ([("cuda", 0, 7), ("cuda", 1, 9)], 7, None),                   # one per device
    ([("cuda", 0, 7), ("cuda", 0, 8)], 7, "ran on 2 streams of cuda:0"),
    ([("cuda", 0, 8)], 7, "ran on stream 8 of cuda:0, the backward is called on stream 7"),
])
def test_stream_rule(monkeypatch, seen, current, reason):
    monkeypatch.setattr(streams, "current_stream_id",
                        lambda dev: current if dev.index == 0 else 9)
    if reason is None:
        streams.check(_Walk(seen), frozenset({"cuda"}), FallbackToEager)
    else:
        with pytest.raises(FallbackToEager, match=reason):
            streams.check(_Walk(seen), frozenset({"cuda"}), FallbackToEager)


def test_unreadable_streams_fall_back():
    with pytest.raises(FallbackToEager, match="without the C\\+\\+ extension"):
        streams.check(_Walk(None), frozenset({"cuda"}), FallbackToEager)
    streams.check(_Walk(None), frozenset(), FallbackToEager)      # CPU graphs: nothing to read


def test_cudagraphs_option_on_cpu_changes_nothing():
    # enable(cudagraphs=True) only applies to CUDA graphs: a CPU backward runs as without it
    from differential import differential, grads

    def build():
        return torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))

    def step(m):
        m.zero_grad(set_to_none=True)
        m(torch.randn(3, 4)).pow(2).sum().backward()
        return grads(m)
    st = differential(build, step, options={"cudagraphs": True})
    assert st.cudagraph_replays == 0
    assert not any("cudagraphs" in n for n in compiled_bw.stats().notes)


def test_dense_check_for_cuda_graph_inputs():
    # runtime/cudagraphs.py copies each Box tensor into a static buffer of the same strides:
    # only tensors whose elements fill their extent exactly once can be copied into
    from compiled_bw.calls.opaque import dense
    assert dense(torch.randn(3, 4)) and dense(torch.randn(3, 4).t()) and dense(torch.randn(1, 5))
    assert dense(torch.randn(2, 3, 4).permute(2, 0, 1))
    assert not dense(torch.randn(3, 1).expand(3, 4))       # overlapping
    assert not dense(torch.randn(6, 4)[::2])                # gaps
