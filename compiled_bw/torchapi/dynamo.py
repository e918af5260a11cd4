"""AOTAutograd's, Dynamo's, fake tensors', FX's, pytree's and Python dispatch's private API.

Consumes torch; produces the private symbols below under stable names.  Dynamo itself is
imported on first use only (`extract_bw_module`, `compile_lock`): importing it costs ~1 s.
"""
from __future__ import annotations

import threading

import torch
import torch.utils._pytree as pytree
from torch._guards import TracingContext, detect_fake_mode, tracing
from torch._ops import OpOverload, OpOverloadPacket
from torch._subclasses import fake_tensor
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode, get_plain_tensors
from torch.fx.experimental.symbolic_shapes import (
    DimDynamic,
    ShapeEnv,
    StatelessSymbolicContext,
)
from torch.fx.graph import _BoxedCodeGen as BoxedCodeGen
from torch.utils._python_dispatch import (
    _get_current_dispatch_mode as current_dispatch_mode,
)
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

USED = {
    "torch.utils._pytree.tree_flatten": "capture/subclass.py, capture/packed.py, backends/inductor.py",
    "torch.utils._pytree.tree_unflatten": "capture/packed.py",
    "torch._guards.detect_fake_mode": "backends/inductor.py",
    "torch._guards.tracing": "backends/inductor.py",
    "torch._guards.TracingContext": "backends/inductor.py",
    "torch._ops.OpOverload": "passes/reorder_for_memory.py, capture/opaque.py, capture/packed.py",
    "torch._ops.OpOverloadPacket": "capture/packed.py",
    "torch._subclasses.fake_tensor.FakeTensor": "capture/trace.py, capture/subclass.py",
    "torch._subclasses.fake_tensor.FakeTensorMode": "backends/inductor_artifact.py",
    "torch._subclasses.fake_tensor.get_plain_tensors": "capture/subclass.py",
    "torch._subclasses.fake_tensor.DataDependentOutputException": "capture/trace.py",
    "torch._subclasses.fake_tensor.DynamicOutputShapeException": "capture/trace.py",
    "torch._subclasses.fake_tensor.UnsupportedOperatorException": "capture/trace.py",
    "torch.fx.graph._BoxedCodeGen": "backends/eager.py",
    "torch.utils._python_dispatch._get_current_dispatch_mode": "api.py",
    "torch.utils._python_dispatch.is_traceable_wrapper_subclass": "capture/subclass.py",
    "torch._dynamo.compiled_autograd.extract_bw_module": "capture/aot.py",
    "torch._dynamo.convert_frame.compile_lock": "runtime/background.py",
    "torch._dynamo.source.ConstantSource": "capture/dynamic.py",
    "torch.fx.experimental._config.backed_size_oblivious": "runtime/dynamic.py",
}


def size_oblivious():
    """A context in which backed size symbols made in it are not specialized to 0/1 and
    size-oblivious reasoning applies to them (torch.fx.experimental._config
    backed_size_oblivious; capture/dynamic.py Note [Sizes of one]): the whole symbolic trace
    and its Inductor compile run in it."""
    from torch.fx.experimental import _config
    return _config.patch(backed_size_oblivious=True)


def symbolic_fakes(reals: list, dynamic_dims: list):
    """Fake tensors for `reals` in a fresh FakeTensorMode with a ShapeEnv: dims listed in
    dynamic_dims[k] (a set) get their own size symbol (no duck sizing; inside size_oblivious()
    not specialized to 0/1), the others stay static.  Returns (mode, env, fakes)."""
    env = ShapeEnv()
    mode = FakeTensorMode(shape_env=env)
    fakes = []
    for t, dyn in zip(reals, dynamic_dims, strict=True):
        dims = [DimDynamic.DYNAMIC if d in dyn else DimDynamic.STATIC for d in range(t.dim())]
        ctx = StatelessSymbolicContext(dynamic_sizes=dims)
        fakes.append(mode.from_tensor(t, symbolic_context=ctx))
    return mode, env, fakes


def symint(env, value: int, name: str):
    """A backed SymInt input of its own symbol (hint `value`); a size: size-like, as a tensor's
    size symbols are inside size_oblivious()."""
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental import _config
    src = ConstantSource(name)
    sym = env.create_symbol(value, src, dynamic_dim=DimDynamic.DYNAMIC,
                            do_not_specialize_zero_one=_config.backed_size_oblivious)
    if _config.backed_size_oblivious and not isinstance(sym, int) and sym.is_Symbol:
        env.size_like.add(sym)
    return env.create_symintnode(sym, hint=value, source=src)



def extract_bw_module(compiled_function):
    """The AOT backward GraphModule of a torch.compile'd forward's CompiledFunction (or None)."""
    from torch._dynamo.compiled_autograd import extract_bw_module as extract
    return extract(compiled_function)


_own_trace_lock = threading.RLock()


def compile_lock():
    """Dynamo's compile lock, which torch.compile holds for a whole compile; our own lock on a
    torch without Dynamo (then only compiled_bw's threads trace)."""
    try:
        from torch._dynamo.convert_frame import compile_lock as lock
    except ImportError:
        return _own_trace_lock
    return lock
