"""Moving an Inductor compile between processes.

Consumes, in the parent, a captured GraphModule and its opaque sites; produces bytes the
compile worker (backends/compile_worker.py) turns back into them.  The worker returns
Inductor's compiled graph as bytes; `load_compiled` turns those into the boxed callable,
loading the generated module and its .so from the Inductor cache dir both processes share.
What Inductor's own out-of-process compile (compile_fx_ext.py) does, for our graphs.
Also `native_entry`: the C entry point of a compiled graph (runtime/run.py Note [C++ hit path]).
"""
from __future__ import annotations

import contextlib
import copy
import os

import torch
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from ..torchapi.dynamo import FakeTensorMode
from ..torchapi.inductor import (
    BoxedBool,
    CompiledFxGraph,
    CompiledFxGraphConstants,
    GraphPickler,
    Options,
    clear_caches,
    codecache,
    cpu_vec_isa,
)
from ..torchapi.inductor import cache_dir as default_cache_dir
from ..torchapi.inductor import config as inductor_config

# GraphPickler refuses ops outside aten/prims by default ("non-standard op"); ours,
# compiled_bw::opaque, is registered by importing compiled_bw, which the worker does.
_OPTIONS = Options(ops_filter=None)


def fake_mode() -> FakeTensorMode:
    return FakeTensorMode(allow_fallback_kernels=True, shape_env=ShapeEnv(), static_shapes=True)


def dump_graph(gm: torch.fx.GraphModule, sites: list) -> bytes:
    """The captured graph (with its nodes' fake `val`s) and its OpaqueSites, as bytes."""
    return GraphPickler.dumps((gm, list(sites)), _OPTIONS)


def load_graph(data: bytes) -> tuple:
    """-> (gm, fake example inputs, sites).  The inputs are the placeholders' fake vals: the
    capture traced them from the Box, so they carry its shapes, strides and dtypes."""
    gm, sites = GraphPickler.loads(data, fake_mode())
    gm = torch.fx.GraphModule(gm, gm.graph)     # GraphPickler's module has no forward yet
    fakes = [n.meta["val"] for n in gm.graph.find_nodes(op="placeholder")]
    return gm, fakes, sites


def dump_compiled(fn: CompiledFxGraph) -> bytes:
    fn.prepare_for_serialization()      # drops the loaded callables; keeps source and paths
    # The Triton bundle (GPU graphs) holds the kernels' autotuners, which refuse pickling once
    # their launchers exist ("pickle should not be called with after make_launchers()").  The
    # parent does not need it: loading the generated module loads the kernels from the caches
    # both processes share.
    fn._triton_bundle = None
    return GraphPickler.dumps(fn, _OPTIONS)


def dump_live(fn) -> bytes | None:
    """dump_compiled of a compiled graph still in use (a foreground compile's), or None when fn
    is no CompiledFxGraph: a shallow copy is serialized (prepare_for_serialization only
    assigns the copy's attributes), so fn keeps its loaded code."""
    if not isinstance(fn, CompiledFxGraph):
        return None
    return dump_compiled(copy.copy(fn))


def load_compiled(data: bytes, example_inputs: list) -> CompiledFxGraph:
    """What an FX-graph-cache hit does: load the generated module, then post_compile."""
    fn = GraphPickler.loads(data, fake_mode())
    assert isinstance(fn, CompiledFxGraph), type(fn)
    constants = CompiledFxGraphConstants()
    fn.after_deserialization(constants)
    fn.post_compile(example_inputs, constants,
                    {"cudagraphs": BoxedBool(False), "is_backward": False,
                     "boxed_forward_device_index": None})
    return fn


def setting(cache_dir: str | None) -> tuple:
    """What a compile in another process must share with this one: the Inductor cache dir
    (where the compiled module and .so land) and Inductor's config."""
    return cache_dir or default_cache_dir(), inductor_config.save_config_portable()


@contextlib.contextmanager
def applied(cache_dir: str, config: dict):
    """In the compile worker: compile with the parent's setting (see setting())."""
    if os.environ.get("TORCHINDUCTOR_CACHE_DIR") != cache_dir:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache_dir
        clear_caches()      # Inductor memoizes paths under the cache dir
    with inductor_config.patch(config):
        yield


def warm_up() -> None:
    """Inductor's once-per-process costs of loading a compiled graph (probing the CPU's vector
    ISA with gcc, hashing torch's sources): ~2 s, paid here on a worker thread instead of in
    the first load.  None of it traces with FX."""
    cpu_vec_isa.pick_vec_isa()
    codecache.torch_key()


def native_entry(fn):
    """`inductor_entry` of a graph compiled with the C++ wrapper, else None (backends/inductor.py
    Note [Inductor: C entry point]): only when fn's callable is the generated module's `call`
    itself, and the graph holds no tensor constants (e.g. a spliced AOT backward loaded from
    AOTAutograd's cache): `call` appends those to the inputs it passes (`constants_tensor`),
    the C++ hit path would not (the entry then reads past its inputs)."""
    if not isinstance(fn, CompiledFxGraph) or getattr(fn, "constants", None):
        return None
    call = fn.current_callable
    module = getattr(call, "__globals__", None)
    if not module or module.get("call") is not call or "_wrap_func" not in module:
        return None
    if "constants_tensor" in getattr(getattr(call, "__code__", None), "co_varnames", ("constants_tensor",)):
        return None
    return module.get("inductor_entry")
