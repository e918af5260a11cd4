"""Triton kernels for what Inductor does not fuse (the `triton` backend, issue 5).

Each kernel will come with a torch reference, a test (TRITON_INTERPRET=1 on CPU) and a
benchmark.  None yet.
"""
