"""The autograd graph as compiled_bw reads it: what every stage above needs to know about it.

Consumes torch's autograd objects (nodes, saved variables, hooks, custom Functions' contexts,
the backward graphs of torch.compile'd forwards); produces the facts the walk, the run-time calls
and the tracer share:
  nodes.py, node_table.py   what kind of node each one is (traced, leaf, custom, AOT, opaque)
                            and the node table of the installed torch (node_tables/)
  saved.py, packed.py       saved tensors: Slots, their eager errors, traceable packed hooks
  hooks.py                  the hooks registered on the graph (observed at registration)
  custom.py                 custom autograd.Functions: their forward records and backward calls
  aot.py, rng.py, mutated.py  the backward graphs of torch.compile'd forwards, their RNG
                            replays and the inputs they mutate (and the buffer writes of
                            traced checkpoint recomputations)
  subclass.py, defined.py, validate.py, heap.py  tensor subclasses, undefined grads,
                            validate_outputs, the engine's ready-queue order
  native.py                 the loaded C++ walk extension, as the modules below the walk reach it
Imports only torchapi/ and core/.
"""
