"""The bottom layer: what every stage of the pipeline shares (above torchapi/ only).

The layers, each importing only from the ones before it (tests/test_layers.py checks it):
  torchapi/   torch's private API and our patches of torch
  core/       shared by every stage: thread.py (the per-thread state of every layer: the
              step being traced or run, nesting, enable() settings), dispatch_tls.py (the
              dispatcher state user code inside the graph runs under)
  capture/    walk the autograd graph, key it, trace it into one FX graph; the opaque and
              delivery ops the graph calls
  passes/     FX passes over the captured graph
  backends/   eager, Inductor: the graph -> a callable
  runtime/    one backward: walk -> key -> cache -> capture -> passes -> compile -> run
  api.py      enable(), stats(), ...; compiled_bw/__init__.py
"""
