"""pytest plugin (-p shim_requires_cuda_and_triton): the fetched copies of
test_activation_checkpointing.py and test_aot_autograd_cache.py (pytorch/pytorch 0069a418)
decorate tests with @requires_cuda_and_triton without importing it (they import
requires_gpu_and_triton), so importing either module raises NameError and pytest collects
nothing.  This puts torch's own torch.testing._internal.triton_utils.requires_cuda_and_triton
into builtins, where the module-level name lookup finds it; the test files stay verbatim.
Used identically in every mode (eager, compiled_bw), so it cannot make the modes differ.
"""
import builtins


def pytest_configure(config):
    from torch.testing._internal.triton_utils import requires_cuda_and_triton

    builtins.requires_cuda_and_triton = requires_cuda_and_triton
