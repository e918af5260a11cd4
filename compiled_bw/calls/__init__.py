"""What the compiled graph calls back into at run time: user code and eager's own objects.

Consumes the call sites the tracer placed (opaque.py OpaqueSite; delivery points); produces,
while a compiled graph runs, eager's behaviour at each: a node run opaquely, a custom backward,
a hook (run_hooks.py), an unpack of a hooked saved tensor (unpacked.py), the accumulation into a
leaf's .grad through the real AccumulateGrad (deliver.py).  Imports graph/ and below; the C++
walk (walk/) calls into opaque.py, wired in when it loads.
"""
