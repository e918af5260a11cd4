"""Stand-in for PyTorch's test/functorch/common_utils.py (not fetched: ~120k characters).

test_aotdispatch.py imports decorate, decorateForModules, saved_tensors_hooks_to_gm, skip,
skipOps, xfail from it.  xfail/skip/decorate/skipOps/decorateForModules only build the expected-
failure lists of the OpInfo/ModuleInfo classes (TestEagerFusionOpInfo, TestEagerFusionModuleInfo),
which this suite does not run (run_aot.sh deselects them): here they are inert stand-ins that let
the module import (entries are plain tuples, the decorators return the test unchanged).
saved_tensors_hooks_to_gm is copied verbatim from PyTorch (test/dynamo/test_aot_autograd_cache.py
carries the same function).
"""
import unittest

import torch


def xfail(op_name, variant_name="", *, device_type=None, dtypes=None):
    return ("xfail", op_name, variant_name)


def skip(op_name, variant_name="", *, device_type=None, dtypes=None):
    return ("skip", op_name, variant_name)


def decorate(op_name, variant_name="", *, decorator=None, device_type=None, dtypes=None):
    return ("decorate", op_name, variant_name)


def skipOps(test_case_name, base_test_name, to_skip):
    return lambda fn: fn


def decorateForModules(decorator, module_classes, device_type=None, dtypes=None):
    return lambda fn: fn


def saved_tensors_hooks_to_gm(
    pack_fn,
    unpack_fn,
    pack_cache_hash=None,
    unpack_cache_hash=None,
    symbolic_tracing=True,
    inp_fn=None,
):
    if symbolic_tracing:
        pack_gm = torch.fx.symbolic_trace(pack_fn)
        unpack_gm = torch.fx.symbolic_trace(unpack_fn)
    else:
        from functorch import make_fx

        if inp_fn:
            inp = inp_fn()
        else:
            inp = torch.randn(2, 3)
            torch._dynamo.mark_dynamic(inp, 0)
            torch._dynamo.mark_dynamic(inp, 1)
        pack_out = pack_fn(inp)
        pack_gm = make_fx(pack_fn)(inp)
        unpack_gm = make_fx(unpack_fn)(pack_out)

    def set_manual_hash(g, manual_hash):
        for node in g.nodes:
            if node.meta and node.meta.get("is_wrapped", False):
                node.meta["user_cache_hash"] = manual_hash

    if pack_cache_hash:
        set_manual_hash(pack_gm.graph, pack_cache_hash)
    if unpack_cache_hash:
        set_manual_hash(unpack_gm.graph, unpack_cache_hash)
    return pack_gm, unpack_gm


# --- added for test_eager_transforms.py (imports only expectedFailureIf from here) ---
# Verbatim from pytorch/pytorch test/functorch/common_utils.py (commit 05fb445).
def expectedFailureIf(condition):
    def decorator(fn):
        if condition:
            return unittest.expectedFailure(fn)
        return fn

    return decorator
