"""CUDA (and other accelerator) streams for one compiled run, as the eager engine uses them.

Consumes a walk (the streams its nodes' forward ran on, read by the C++ extension from each
node's InputMetadata) and the devices a compiled graph touches; produces nothing when the run
may go ahead on the caller's current streams, else raises FallbackToEager with the reason.

Note [Streams]
The eager engine runs each node's backward on the stream its forward ran on (the node's
InputMetadata stream), makes a consumer wait where producer and consumer streams differ
(input_buffer.cpp), and at the end makes the caller's current stream wait on the streams the
leaves' grads were made on (engine.cpp exec_post_processing).  A compiled graph runs all its
kernels on one stream per device: the caller's current one.  That is eager's schedule exactly
when every node of the graph ran its forward on the current stream of its device (the common
case: the whole forward and the backward call on one stream), so that is what is checked, per
step (the stream is not in the cache key: it may change between steps).  A graph whose forward
used another stream, or several, runs eager autograd, with the reason; never a race.  Without
the C++ extension the streams cannot be read: graphs on such devices then run eager autograd.
"""
from __future__ import annotations

import torch


def device_types(tensors) -> frozenset:
    """The non-CPU device types among tensors (a capture's example inputs and leaves)."""
    return frozenset(t.device.type for t in tensors
                     if isinstance(t, torch.Tensor) and t.device.type not in ("cpu", "meta"))


def check(w, devices: frozenset, fallback) -> None:
    """Raise fallback(reason) unless every node ran its forward on its device's current stream."""
    if not devices:
        return
    streams = w.forward_streams()
    if streams is None:
        raise fallback(f"the graph runs on {', '.join(sorted(devices))}, and without the C++ "
                       "extension the streams its forward ran on cannot be read")
    seen: dict = {}
    for dtype, index, sid in streams:
        seen.setdefault((dtype, index), set()).add(sid)
    for (dtype, index), ids in seen.items():
        dev = torch.device(dtype, index)
        current = current_stream_id(dev)
        if len(ids) > 1:
            raise fallback(f"the forward ran on {len(ids)} streams of {dev} (ids {sorted(ids)}); "
                           "compiled_bw runs one graph on one stream per device")
        (sid,) = ids
        if sid != current:
            raise fallback(f"the forward ran on stream {sid} of {dev}, the backward is called "
                           f"on stream {current}: run backward() under the forward's stream "
                           "(torch.cuda.stream(s))")



def current_stream_id(dev: torch.device) -> int:
    """The id of the caller's current stream on dev (c10::Stream::id, as the C++ walk reads)."""
    return torch.get_device_module(dev.type).current_stream(dev).stream_id
