"""Probe (CPU; the GPU consequence is unverified): does compiled_bw's Inductor compile take the
user's global `torch._inductor.config.triton.cudagraphs = True`?

Seen in test_compiled_autograd.py's test_cudagraphs_cpu_graph_graph_partition_False, which
passes only under compiled_bw-Inductor: it sets triton.cudagraphs = True around a backward and
asserts counters["inductor"]["cudagraph_skips"] == 1 -- Inductor compiled compiled_bw's graph
with cudagraphs requested and skipped them only because the graph is on the CPU.
backends/inductor.py calls compile_fx_inner without `cudagraphs=`, so Inductor falls back to
BoxedBool(config.triton.cudagraphs); inductor_artifact.load_compiled (background compiles)
passes BoxedBool(False).  On CUDA that would put Inductor's own CUDA-graph wrapping around
graphs compiled_bw does not CUDA-graph (user code inside, written inputs: runtime/cudagraphs.py).

Usage: COMPILED_BW_BACKGROUND_COMPILE=0 PYTHONPATH=<repo> python probe_inductor_global_cudagraphs.py
"""
import torch
from torch._dynamo.utils import counters

import compiled_bw

w = torch.randn(4, 4, requires_grad=True)
calls = []
w.register_hook(lambda g: calls.append(1))
torch._inductor.config.triton.cudagraphs = True
counters.clear()
with compiled_bw.enable(backend="inductor", background_compile=False):
    (w.sin() @ w).sum().backward()
torch._inductor.config.triton.cudagraphs = False
print("inductor compiles:", compiled_bw.stats().inductor_compiles,
      "| cudagraph_skips counted by Inductor while compiling compiled_bw's graph:",
      counters["inductor"]["cudagraph_skips"], "| hook calls:", len(calls))
