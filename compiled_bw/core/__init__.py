"""The bottom layer: what every stage of the pipeline shares (above torchapi/ only).

The layers, each importing only from the ones before it (tests/test_layers.py checks it):
  torchapi/   torch's private API and our patches of torch
  core/       shared by every stage: thread.py (the per-thread state of every layer: the
              step being traced or run, nesting, enable() settings), dispatch_tls.py (the
              dispatcher state user code inside the graph runs under)
  graph/      the autograd graph as we read it: node kinds, saved tensors, hooks, custom
              Functions, AOT regions; the loaded C++ extension (native.py)
  checkpoint/ checkpointed regions: walk entries, recomputation traced under guards
  calls/      what the compiled graph calls back into at run time: opaque calls, hooks,
              unpacks, delivery points
  walk/       every step: walk the autograd graph and key it (C++ in walk/cpp/)
  trace/      once per signature: trace the walk into one FX graph and its Plan
  passes/     FX passes over the captured graph
  backends/   eager, Inductor: the graph -> a callable
  runtime/    one backward: walk -> key -> cache -> capture -> passes -> compile -> run
  api.py      enable(), stats(), ...; compiled_bw/__init__.py
"""
