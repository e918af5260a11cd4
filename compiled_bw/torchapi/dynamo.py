"""AOTAutograd's, Dynamo's, fake tensors', FX's, pytree's and Python dispatch's private API.

Consumes torch; produces the private symbols below under stable names.  Dynamo itself is
imported on first use only (`extract_bw_module`, `compile_lock`): importing it costs ~1 s.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import sys
import threading

import torch
import torch._meta_registrations as meta_registrations
import torch.utils._pytree as pytree
from torch._guards import TracingContext, detect_fake_mode, tracing
from torch._ops import HigherOrderOperator, OpOverload, OpOverloadPacket
from torch._prims.rng_prims import run_with_rng_state
from torch._prims_common import suggest_memory_format
from torch._subclasses import fake_tensor
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode, get_plain_tensors
from torch._subclasses.functional_tensor import FunctionalTensorMode
from torch.fx.experimental.proxy_tensor import ProxyTorchDispatchMode
from torch.fx.experimental.symbolic_shapes import (
    DimDynamic,
    ShapeEnv,
    StatelessSymbolicContext,
)
from torch.fx.graph import _BoxedCodeGen as BoxedCodeGen
from torch.utils._python_dispatch import TorchDispatchMode, is_traceable_wrapper_subclass
from torch.utils._python_dispatch import (
    _get_current_dispatch_mode as current_dispatch_mode,
)
from torch.utils._sympy.functions import FloorDiv, PythonMod
from torch.utils._sympy.functions import Max as SymMax
from torch.utils._sympy.functions import Min as SymMin
from torch.utils._sympy.functions import Mod as SymMod

from .autograd import RELEASE
from .checkpoint import closure_vars

# the dispatch modes of torch's own tracing (Dynamo, AOTAutograd's joint graph, make_fx): a
# backward under one of them is not the user's (api.py Note [Dispatch modes of the user's])
TRACE_MODES = (FakeTensorMode, ProxyTorchDispatchMode, FunctionalTensorMode)

USED = {
    "torch.utils._python_dispatch.TorchDispatchMode": (
        "SqueezesDecided (trace/trace.py), GroupedMmOnFakes (graph/fake_ops.py), "
        "DrawsFrom (graph/rng.py)"),
    "torch._prims_common.suggest_memory_format": "trace/upsample.py",
    "torch._meta_registrations.div_rtn": "trace/trace.py (pool_sizes_without_parity_guards, "
        "torch <= 2.12)",
    "torch._higher_order_ops.effects._get_effect": "passes/dce.py, passes/reorder_for_memory.py",
    "torch._C._dynamo.eval_frame.set_code_exec_strategy": "graph/custom.py",
    "torch._C._dynamo.eval_frame._FrameExecStrategy": "graph/custom.py",
    "torch._C._dynamo.eval_frame._FrameAction": "graph/custom.py",
    "torch.utils._pytree.tree_flatten": "graph/subclass.py, graph/packed.py, "
        "checkpoint/recompute.py, backends/inductor.py",
    "torch.utils._pytree.tree_unflatten": "graph/packed.py, checkpoint/recompute.py",
    "torch.utils._pytree.tree_leaves": "backends/fresh_returns.py",
    "torch.utils._pytree.tree_map_only": "backends/fresh_returns.py",
    "torch._guards.detect_fake_mode": "backends/inductor.py",
    "torch._guards.tracing": "backends/inductor.py",
    "torch._guards.TracingContext": "backends/inductor.py",
    "torch._ops.OpOverload": "passes/reorder_for_memory.py, calls/opaque.py, graph/packed.py, backends/inductor.py, "
                             "calls/deliver.py, trace/differentiable.py, backends/fresh_returns.py, graph/mutated.py",
    "torch._ops.OpOverloadPacket": "graph/packed.py",
    "torch._ops.HigherOrderOperator": "graph/mutated.py",
    "torch._prims.rng_prims.run_with_rng_state": "graph/aot.py (Note [AOT RNG replays])",
    "torch._subclasses.fake_tensor.FakeTensor": "trace/trace.py, graph/subclass.py",
    "torch._subclasses.fake_tensor.FakeTensorMode": "backends/inductor_artifact.py",
    "torch._subclasses.fake_tensor.get_plain_tensors": "graph/subclass.py",
    "torch._subclasses.fake_tensor.DataDependentOutputException": "trace/trace.py",
    "torch._subclasses.fake_tensor.DynamicOutputShapeException": "trace/trace.py",
    "torch._subclasses.fake_tensor.UnsupportedOperatorException": "trace/trace.py",
    "torch.fx.graph._BoxedCodeGen": "backends/eager.py",
    "torch.utils._python_dispatch._get_current_dispatch_mode": "api.py",
    "torch._subclasses.functional_tensor.FunctionalTensorMode": "api.py (TRACE_MODES)",
    "torch.fx.experimental.proxy_tensor.ProxyTorchDispatchMode": "api.py (TRACE_MODES)",
    "torch.utils._python_dispatch.is_traceable_wrapper_subclass": "graph/subclass.py",
    "torch._dynamo.compiled_autograd.extract_bw_module": "graph/aot.py",
    "torch._dynamo.compiled_autograd.compiled_autograd_enabled": "runtime/run.py (_precheck: "
        "torch's compiled autograd active)",
    "torch._inductor.compile_fx.compile_fx_inner": "graph/aot.py (own_bw_compiler: Note [A "
        "backend's own backward compiler])",
    "torch._library.custom_ops.OPDEFS": "backends/compile_worker.py (worker_imports)",
    "torch.fx.graph_module.reduce_graph_module": "graph/aot.py (Note [AOT backward modules "
        "from the cache])",
    "torch.fx.graph_module._forward_from_src": "graph/aot.py (Note [AOT backward modules "
        "from the cache])",
    "torch.fx.graph_module._deserialize_graph_module": "graph/aot.py (Note [AOT backward "
        "modules from the cache])",
    "torch._functorch._aot_autograd.runtime_wrappers": "graph/aot.py (which release defines "
        "CompiledFunction._bw_prologue_fn: aot_splice_off)",
    "torch._dynamo.convert_frame.compile_lock": "runtime/background.py",
    "torch._dynamo.source.ConstantSource": "trace/dynamic.py",
    "torch._dynamo.source.TensorPropertySource": "checkpoint/guarded.py (Note [Guarded "
        "recomputation over varying sizes]: a region's symbolic graph inputs are sizes)",
    "torch._dynamo.output_graph.OutputGraph.graphargs": "checkpoint/guarded.py (the same)",
    # the sympy functions of ShapeEnv guards, printed as Python by trace/dynamic.py _py
    "torch.utils._sympy.functions.FloorDiv": "trace/dynamic.py",
    "torch.utils._sympy.functions.Mod": "trace/dynamic.py",
    "torch.utils._sympy.functions.PythonMod": "trace/dynamic.py",
    "torch.utils._sympy.functions.Max": "trace/dynamic.py",
    "torch.utils._sympy.functions.Min": "trace/dynamic.py",
    "torch._C._dynamo.eval_frame._debug_get_cache_entry_list": "checkpoint/guarded.py",
    "torch._dynamo.eval_frame._stance": "checkpoint/guarded.py, graph/custom.py",
    "torch._dynamo.symbolic_convert.InstructionTranslator.current_tx":
        "checkpoint/guarded.py, graph/custom.py (guard source names)",
    "torch._dynamo.side_effects.SideEffects.is_modified": "checkpoint/guarded.py, graph/custom.py",
    "torch._dynamo.variables.base.AttributeMutationNew": "checkpoint/guarded.py, graph/custom.py",
    "torch._dynamo.variables.base.ValueMutationNew": "checkpoint/guarded.py, graph/custom.py",
    "torch.fx.experimental._config.backed_size_oblivious": "runtime/dynamic.py",
    "torch._subclasses.fake_tensor.FakeTensorConverter.set_tensor_memo":
        "backends/compile_worker.py",
    "torch._dynamo.variables.builtin": "checkpoint/guarded.py (its setattr() handler, "
        "setattr_handler(): Note [requires_grad set on a tensor the region makes])",
    "torch._dynamo.variables.tensor.TensorVariable": "checkpoint/guarded.py (same Note)",
    "torch._dynamo.variables.constant.ConstantVariable": "checkpoint/guarded.py (same Note)",
}


# Note [Dynamo skips our wrappers]
#    Our replacement of `Function.apply` (graph/custom.py) is a Python function outside
#    torch: where a torch.compile'd function graph-breaks and then calls a Function (a module's
#    full backward hook calls BackwardHookFunction.apply), Dynamo compiled our wrapper's frame
#    as a frame of its own, inlined torch's Function.apply into it, and with
#    `nested_graph_breaks` on failed to resume inside it ("AutogradFunctionVariable() is not a
#    constant"; torch's own Function.apply is never compiled as a frame: it is torch's code).
#    So Dynamo skips our wrappers' own frames, as it skips torch's, and still compiles the
#    frames they call (the user's forward): torch.compile does what it does without us.
#    Set through torch._C (importing Dynamo itself costs ~1 s); on a release without it the
#    wrapper stays compiled as before.
def has_side_effects(target) -> bool:
    """`with_effects` itself, or an op registered effectful (torch._higher_order_ops.effects):
    passes/dce.py Note [Side effects stay]."""
    try:
        from torch._higher_order_ops import effects
    except ImportError:
        return False
    if target is getattr(torch.ops.higher_order, "with_effects", None):
        return True
    try:
        return effects._get_effect(target) is not None
    except Exception:  # noqa: BLE001 -- a target the registry cannot look up has none
        return False


def torch_compiled_autograd_on() -> bool:
    """Whether torch's own compiled autograd takes the backwards run now (inside its
    `compiled_autograd._enable`, which `torch._dynamo.config.compiled_autograd` enters): its
    module's `compiled_autograd_enabled`.  Read without importing Dynamo: where that module
    was never imported, it cannot be on."""
    ca = sys.modules.get("torch._dynamo.compiled_autograd")
    return ca is not None and bool(getattr(ca, "compiled_autograd_enabled", False))


def skip_frame(fn) -> bool:
    """Note [Dynamo skips our wrappers]: Dynamo never compiles `fn`'s own frame."""
    try:
        from torch._C._dynamo import eval_frame as ef
        ef.set_code_exec_strategy(fn.__code__, ef._FrameExecStrategy(ef._FrameAction.SKIP,
                                                                     ef._FrameAction.DEFAULT))
    except (ImportError, AttributeError, TypeError):
        return False
    return True


def size_oblivious():
    """A context in which backed size symbols made in it are not specialized to 0/1 and
    size-oblivious reasoning applies to them (torch.fx.experimental._config
    backed_size_oblivious; trace/dynamic.py Note [Sizes of one]): the whole symbolic trace
    and its Inductor compile run in it."""
    from torch.fx.experimental import _config
    return _config.patch(backed_size_oblivious=True)


def symbolic_fakes(reals: list, dynamic_dims: list, shared: frozenset = frozenset()):
    """Fake tensors for `reals` in a fresh FakeTensorMode with a ShapeEnv: dims listed in
    dynamic_dims[k] (a set) get a size symbol (inside size_oblivious() not specialized to
    0/1), the others stay static.  A dim whose size is in `shared` shares one symbol with every
    other such size of that value (duck sizing; runtime/dynamic.py Note [One symbol for sizes
    that changed together]); any other gets its own.  Returns (mode, env, fakes)."""
    env = ShapeEnv()
    mode = FakeTensorMode(shape_env=env)
    # FakeTensor's dispatch cache: one trace's ops on symbolic sizes rarely repeat a key, and
    # making each entry (checking its outputs' symbolic metadata) cost a third of the trace
    # of the benchmark's transformer (3.5 -> 2.4 s of thread CPU without it)
    mode.cache_enabled = False
    fakes = []
    for t, dyn in zip(reals, dynamic_dims, strict=True):
        dims = [(DimDynamic.DUCK if t.shape[d] in shared else DimDynamic.DYNAMIC)
                if d in dyn else DimDynamic.STATIC for d in range(t.dim())]
        ctx = StatelessSymbolicContext(dynamic_sizes=dims)
        fakes.append(mode.from_tensor(t, symbolic_context=ctx))
    return mode, env, fakes


# Note [Squeezes in a symbolic trace]
# Under size-oblivious reasoning (Note [Sizes of one]) a squeeze of a dim whose size is a
# symbol takes "not 1" without a guard: the traced op keeps the dim.  The graph then replays
# aten.squeeze at run time, which drops the dim wherever its size is 1, and the ops after it
# (traced with the dim kept) get another shape: UnsqueezeBackward0's `grad.squeeze(dim)` of an
# unbatched conv's or vstack's batch dim of 1 (a symbol under dynamic=True on the eager
# backend) raised "shape '[3, 4]' is invalid for input of size 4".  Broadcasting is right
# either way (the note's argument); a squeeze is not.  So in a symbolic trace every squeeze
# decides each candidate dim with an ordinary guard first (`size == 1` evaluated at the hint):
# a size of 1 is specialized there, any other size is guarded not to be 1, and the graph's
# Guards recapture where a later step differs (tests/test_dynamic_shapes.py
# test_a_squeeze_of_a_symbolic_size_of_one).
_SQUEEZES = frozenset(
    getattr(getattr(torch.ops.aten, op), overload)
    for op in ("squeeze", "squeeze_", "squeeze_copy")
    for overload in ("default", "dim", "dims")
    if hasattr(getattr(torch.ops.aten, op, None), overload))


class SqueezesDecided(TorchDispatchMode):
    """Inside a symbolic trace: every squeeze's `size == 1` decided with a guard before the op
    runs (Note [Squeezes in a symbolic trace])."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _SQUEEZES and args[0].dim():
            x, n = args[0], args[0].dim()
            dims = range(n) if len(args) < 2 else \
                [args[1]] if isinstance(args[1], int) else args[1]
            for d in dims:
                bool(x.shape[d % n] == 1)   # a guard either way (a SymInt's bool)
        return func(*args, **kwargs)


_FFT_R2C_META: list = []


def fft_r2c_meta_strides_wrong() -> bool:
    """Whether this release's meta kernel of aten._fft_r2c lays its result out otherwise than
    its CPU kernel (torch 2.11: over a dim that is not the last one, the kernel puts that dim
    innermost, the meta kernel is contiguous; 2.12-2.15 agree).  Inductor takes an extern
    call's layout from its fake result: reading the real one with it gave wrong values
    (trace/dynamic.py RELEASE_META).  Learned once: one call over dim 0 of a (4, 6) tensor, on
    real and on fake tensors."""
    if not _FFT_R2C_META:
        x = torch.arange(24.0).view(4, 6)     # (no draw from the user's generator)
        real = torch.ops.aten._fft_r2c.default(x, [0], 0, True)
        with FakeTensorMode() as mode:
            fake = torch.ops.aten._fft_r2c.default(mode.from_tensor(x), [0], 0, True)
        _FFT_R2C_META.append(real.stride() != fake.stride())
    return _FFT_R2C_META[0]


def fakes_as_they_are(fakes: list) -> None:
    """Fake tensors that their FakeTensorMode's from_tensor returns as they are (its
    converter's memo).  make_fx (Inductor's retrace of a graph) fakeifies its inputs again;
    for fakes that GraphPickler loaded (the compile worker's), which share storages of a
    symbolic size, that checks each one's extent against its storage: shape guards over the
    storage sizes' symbols, which no input of the graph binds (runtime/dynamic.py Note [Dynamic
    graphs compile in the background])."""
    for t in fakes:
        if isinstance(t, FakeTensor):
            t.fake_mode.fake_tensor_converter.set_tensor_memo(t, t)


def sym_parts(x):
    """(expression with the replacements found so far, ShapeEnv) of a SymInt."""
    return x.node.expr, x.node.shape_env


def hint_of(env, expr) -> int | None:
    """The value of a size expression at the sizes the trace started from (no guard).
    ShapeEnv.guarding_hint_or_throw is newer than torch 2.11, whose ShapeEnv.size_hint does the
    same (without it every hint was None there: sizes that changed together got no shared
    symbol, 6 captures of a conv stem where 2.13 makes 2)."""
    hint = getattr(env, "guarding_hint_or_throw", None) or env.size_hint
    try:
        v = hint(expr)
        return None if v is None else int(v)
    except Exception:  # noqa: BLE001 -- no hint (an unbacked symbol): nothing to tie
        return None


def guard_equal(env, a, b) -> None:
    """A shape guard a == b (a replacement where a or b is a symbol), taken when true at the
    hint (the caller checks that)."""
    import sympy
    env.evaluate_expr(sympy.Eq(a, b))


def symint(env, value: int, name: str, shared: bool = False):
    """A backed SymInt input of its own symbol (hint `value`), or, `shared`, the symbol every
    shared size of that value has (duck sizing: symbolic_fakes); a size: size-like, as a
    tensor's size symbols are inside size_oblivious()."""
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental import _config
    src = ConstantSource(name)
    sym = env.create_symbol(value, src,
                            dynamic_dim=DimDynamic.DUCK if shared else DimDynamic.DYNAMIC,
                            do_not_specialize_zero_one=_config.backed_size_oblivious)
    if _config.backed_size_oblivious and not isinstance(sym, int) and sym.is_Symbol:
        env.size_like.add(sym)
    return env.create_symintnode(sym, hint=value, source=src)



def extract_bw_module(compiled_function):
    """The AOT backward GraphModule of a torch.compile'd forward's CompiledFunction (or None).
    One that AOTAutograd's cache loaded is rebuilt by `load_reduced_graph_module` (Note [AOT
    backward modules from the cache])."""
    from torch._dynamo.compiled_autograd import extract_bw_module as extract
    serialized = getattr(getattr(compiled_function._lazy_backward_info, "bw_module_fn", None),
                         "__self__", None)
    if getattr(serialized, "fn", None) is torch.fx.graph_module.reduce_graph_module:
        with fake_tensor.unset_fake_temporarily(), \
                contextlib.suppress(Exception):     # (then torch's own way, with its error)
            return load_reduced_graph_module(*serialized.args)
    return extract(compiled_function)


# Note [AOT backward modules from the cache]
# AOTAutograd's cache keeps a compiled forward's backward GraphModule as its pickled form
# (SerializedGraphModule: GraphModule.__reduce__, the module's Python code), and FX rebuilds it
# by running that code under its symbolic Tracer.  A call of an op without tensor arguments
# whose size list mixes ints and a size symbol -- `aten.full.default([8, 4, primals_1, 64],
# ...)`, the zeros AOTAutograd makes for a no-grad output of a dynamic shape -- fails there:
# the op's argument parser finds a Proxy where an int belongs and raises "Expected a value of
# type 'List[int]'" (the Proxy's __torch_function__ is never asked).  Every dynamic-shape
# backward loaded from a warm cache then ran as one opaque call.  `load_reduced_graph_module`
# runs the same code with `torch.ops` seen through `_OpsSeen`, which records any op call whose
# arguments hold a Proxy as the node FX's own trace makes for it, and calls it otherwise.

class _OpsSeen:
    """`torch` (or any part of `torch.ops`) as the code of a reduced GraphModule sees it:
    attributes pass through; the ops under `torch.ops` record a call_function node when an
    argument holds a Proxy (Note [AOT backward modules from the cache])."""
    __slots__ = ("_of", "_ops")

    def __init__(self, of, ops: bool) -> None:
        self._of = of
        self._ops = ops

    def __getattr__(self, name):
        attr = getattr(self._of, name)
        if self._ops or name == "ops":
            return _OpsSeen(attr, True)
        return attr

    def __call__(self, *args, **kwargs):
        proxy = next((a for a in pytree.tree_leaves((args, kwargs))
                      if isinstance(a, torch.fx.Proxy)), None)
        if proxy is None:
            return self._of(*args, **kwargs)
        return proxy.tracer.create_proxy("call_function", self._of, args, kwargs)


def defining_module(op) -> str | None:
    """The module whose import defines a custom op (`torch.library.custom_op` /
    `triton_op`: the module of the decorated function, where that function is the module's
    own, not one made inside a function), or None (another kind of op).
    triton_op's CustomOpDef holds torch's own wrapper (torch._library.triton's backend_fn),
    whose closure holds the decorated function."""
    from torch._library.custom_ops import OPDEFS
    schema = getattr(op, "_schema", None)
    fn = getattr(OPDEFS.get(schema.name) if schema is not None else None, "_init_fn", None)
    for _ in range(4):
        module = getattr(fn, "__module__", None)
        if module is None:
            return None
        if module != "torch" and not module.startswith("torch."):
            # (defined inside a function: importing the module does not define the op)
            return None if "<locals>" in getattr(fn, "__qualname__", "<locals>") else module
        inner = []
        for cell in getattr(fn, "__closure__", None) or ():
            try:
                v = cell.cell_contents
            except ValueError:      # an empty cell
                continue
            if inspect.isfunction(v):
                inner.append(v)
        if len(inner) != 1:
            return None
        fn = inner[0]
    return None


def load_reduced_graph_module(body: dict, import_block: str):
    """torch.fx.graph_module.reduce_graph_module(body, import_block) with op calls on size
    symbols recorded (Note [AOT backward modules from the cache])."""
    from torch.fx.graph_module import _deserialize_graph_module, _forward_from_src
    scope: dict = {}
    exec(compile(import_block, "<import_block>", "exec"), scope)     # FX's own imports
    scope["torch"] = _OpsSeen(torch, False)
    forward = _forward_from_src(body.get("_code") or body["code"], scope)
    return _deserialize_graph_module(forward, dict(body))


# Note [A backend's own backward compiler]
# AOTAutograd compiles a torch.compile'd forward's backward, on its first backward, with the
# `bw_compiler` of the backend that compiled the forward, and runs what that returns.  Splicing
# the backward graph into ours instead is what that backend would have run only where its
# bw_compiler runs the graph as it is: Inductor's own (`compile_fx`'s, with its own
# `compile_fx_inner`: the kernels differ, the grads are the graph's) and aot_eager's nop.  A
# user's bw_compiler (`aot_autograd(bw_compiler=...)`, `aot_function(f, fw, bw)`,
# `compile_fx(inner_compile=...)`) may read, rewrite or count the graph: such a backward is
# not spliced but runs as one opaque call of the real node, which calls the user's compiler as
# eager does.  The compiler is read from the closure of CompiledFunction._backward_impl
# (`backward_compiler`, torch >= 2.13; `aot_config` on 2.11) and unwrapped from Dynamo's
# `_wrapped_bw_compiler` and Inductor's SerializableAOTDispatchCompiler.
_NOP_BW_COMPILERS = ("torch._functorch.compilers.nop", "torch._dynamo.backends.debugging.boxed_nop")


def _cell(fn, name: str):
    found = closure_vars(getattr(fn, "__func__", fn))
    if name not in found:
        raise LookupError(f"{getattr(fn, '__qualname__', fn)} closes over no {name!r}")
    return found[name]


def aot_bw_compiler(cf):
    """The bw_compiler the backend that compiled this CompiledFunction's forward gave
    AOTAutograd, unwrapped (Note [A backend's own backward compiler]); None where AOTAutograd's
    cache gave the compiled backward (eager calls no compiler either); raises LookupError where
    this torch keeps it elsewhere."""
    impl = cf._backward_impl
    try:
        fn = _cell(impl, "backward_compiler").bw_compiler
    except LookupError:
        fn = _cell(impl, "aot_config").bw_compiler         # torch 2.11
    for _ in range(8):
        if getattr(fn, "_is_wrapped_bw_compiler", False):      # Dynamo's AotAutograd
            fn = _cell(fn, "bw_compiler_fn")
        elif type(fn).__name__ == "SerializableAOTDispatchCompiler":
            fn = fn.compiler_fn
        else:
            return fn
    return fn


def _qualname(fn) -> str:
    if isinstance(fn, functools.partial):
        return f"functools.partial({_qualname(fn.func)})"
    return f"{getattr(fn, '__module__', None)}.{getattr(fn, '__qualname__', type(fn).__qualname__)}"


def own_bw_compiler(cf) -> str | None:
    """None where the backward of this CompiledFunction would be compiled by a compiler that
    runs its graph as it is (Inductor's, aot_eager's nop); else the name of the backend's own
    bw_compiler, which only a run of the real node calls (Note [A backend's own backward
    compiler])."""
    fn = aot_bw_compiler(cf)
    if fn is None:      # AOTAutograd's cache loaded the compiled backward: no compiler is called
        return None
    name = _qualname(fn)
    if name in _NOP_BW_COMPILERS:
        return None
    if name.startswith("torch._inductor.compile_fx.") and name.endswith(".bw_compiler"):
        from torch._inductor.compile_fx import compile_fx_inner
        given = inner = _cell(getattr(fn, "__wrapped__", fn), "inner_compile")
        for _ in range(8):
            if inner is compile_fx_inner:
                return None
            inner = getattr(inner, "func", None) or getattr(inner, "__wrapped__", None)
        return f"{name} with inner_compile {_qualname(getattr(given, 'func', given))}"
    return name


# Note [AOT backward splicing per release]: graph/aot.py splices a torch.compile'd forward's
# AOT backward through the CompiledFunction class's _bw_prologue_fn / _bw_epilogue_fn (torch
# 2.13).  torch 2.11's CompiledFunction has neither (its backward prologue is inline code):
# there the feature is off and the AOT backward runs as one opaque call, with aot.py's reason
# naming the release.  The class is made per compiled forward, so whether this torch defines
# them is read from the source of the module that makes it, without compiling anything.
AOT_SPLICE_FEATURE = "AOT backward splicing"
AOT_SPLICE_ATTRS = ("_bw_prologue_fn", "_bw_epilogue_fn")


def aot_splice_off() -> str | None:
    """Why AOT backward splicing is off on this torch, or None (Note [AOT backward splicing
    per release])."""
    import importlib.util
    spec = importlib.util.find_spec("torch._functorch._aot_autograd.runtime_wrappers")
    with open(spec.origin, encoding="utf-8") as f:    # read, not imported (it costs ~1 s)
        src = f.read()
    missing = [a for a in AOT_SPLICE_ATTRS if f"{a} =" not in src]
    if not missing:
        return None
    return (f"{AOT_SPLICE_FEATURE} is off on torch {torch.__version__}: AOTAutograd's "
            f"CompiledFunction has no {', '.join(missing)}")


_own_trace_lock = threading.RLock()


def compile_lock():
    """Dynamo's compile lock, which torch.compile holds for a whole compile; our own lock on a
    torch without Dynamo (then only compiled_bw's threads trace)."""
    try:
        from torch._dynamo.convert_frame import compile_lock as lock
    except ImportError:
        return _own_trace_lock
    return lock


# ---- Dynamo's guards on a checkpointed region (checkpoint/guarded.py) ----------------------------

class _Captured(Exception):
    """Raised by the compiled graph Dynamo's bytecode calls: the region never runs."""


def _region_call(fn, args, kwargs):
    return fn(*args, **kwargs)


_region_count = [0]


def _clean(tx) -> bool:
    """Whether Dynamo's trace recorded no effect outside the call: no mutation of an object
    that existed before it (attributes, lists, dicts, globals), no tensor hooks, no
    save_for_backward, no Python random draws.  Objects the call creates may change."""
    from torch._dynamo.variables.base import AttributeMutationNew, ValueMutationNew
    out = tx.output
    se = out.side_effects
    if se.tensor_hooks or se.save_for_backward or out.random_calls:
        return False
    return not any(se.is_modified(v) and not isinstance(v.mutation_type, (
        AttributeMutationNew, ValueMutationNew)) for v in se.id_to_variable.values())


# Note [A traced backward draws no torch random number]
# A random op (torch.rand_like, dropout, Tensor.uniform_, ...) in a backward traced without
# opt-in would be an op of our graph: on Inductor it draws from Inductor's own seeds, not the
# global generator eager's backward draws from (other values, another generator state after
# the step), and Inductor's lowering of a bare aten.rand fails outright.  Such a backward is
# refused (an opaque call: the real backward draws, every step, as in eager).  The check is on
# Dynamo's torch-level graph: an op whose aten namesake is tagged nondeterministic_seeded, or
# a dropout of any kind (conservative: a refusal is always correct).
_RANDOM_NAMES = ("dropout", "rrelu")


def _draws_random(graph) -> bool:
    for n in graph.nodes:
        if n.op not in ("call_function", "call_method"):
            continue
        t = n.target
        if isinstance(t, torch._ops.OpOverload):
            if torch.Tag.nondeterministic_seeded in t.tags:
                return True
            continue
        name = t if isinstance(t, str) else getattr(t, "__name__", "")
        if not isinstance(name, str) or not name:
            continue
        if any(r in name for r in _RANDOM_NAMES):
            return True
        packet = getattr(torch.ops.aten, name, None)
        if isinstance(packet, torch._ops.OpOverloadPacket) and any(
                torch.Tag.nondeterministic_seeded in getattr(packet, o).tags
                for o in packet.overloads()):
            return True
    return False


def _dynamo_usable() -> bool:
    """A Dynamo that would compile: not disabled, the default stance, a supported Python."""
    import torch._dynamo as dynamo
    from torch._dynamo.eval_frame import _stance
    return not dynamo.config.disable and _stance.stance == "default" and \
        dynamo.is_dynamo_supported()


def _trace_once(template, call_args: tuple, judge, grad_mode, dynamic: bool = False):
    """Dynamo on a fresh copy of `template` (its own code object, so its own cache entry)
    called with `call_args` under `grad_mode`: fullgraph, static shapes (dynamic: tensor
    sizes symbolic, guarded by range and relation), numbers specialized (each a value guard,
    none a graph input).  `judge(tx, example_inputs)` runs in the backend,
    whose graph raises _Captured before any of the traced code would run.  Returns (the copy,
    None) when the backend was reached, (None, Dynamo's exception) when it refused (a graph
    break, something unsupported), (None, None) when the call ran without a graph."""
    import types

    import torch._dynamo as dynamo
    from torch._dynamo.symbolic_convert import InstructionTranslator

    def backend(gm, example_inputs):
        judge(InstructionTranslator.current_tx(), example_inputs)

        def never(*_a):
            raise _Captured
        return never
    _region_count[0] += 1
    code = template.__code__.replace(co_name=f"{template.__name__}_{_region_count[0]}")
    f = types.FunctionType(code, template.__globals__, code.co_name)
    try:
        with grad_mode, dynamo.config.patch(
                specialize_int=True, specialize_float=True, assume_static_by_default=not dynamic,
                automatic_dynamic_shapes=False, allow_rnn=True):
            dynamo.optimize(backend, nopython=True, dynamic=dynamic)(f)(*call_args)
    except _Captured:
        return f, None
    except Exception as e:  # noqa: BLE001 -- graph break, unsupported: the caller says why
        return None, e
    return None, None


def _all_tensors(example_inputs) -> bool:
    # a number Dynamo left unspecialized would be a graph input with no value guard
    return all(isinstance(x, torch.Tensor) for x in example_inputs)


def _tensors_and_sizes(tx) -> bool:
    """With symbolic sizes: every graph input is a tensor or a tensor's size (stride, offset),
    never a Python number Dynamo left unspecialized (it would have no value guard)."""
    from torch._dynamo.source import TensorPropertySource
    return all(isinstance(ga.example, torch.Tensor) or isinstance(ga.source, TensorPropertySource)
               for ga in tx.output.graphargs)


# Note [requires_grad set on a tensor the region makes]
# Dynamo refuses `t.requires_grad = flag` (a graph break: AOTAutograd could not run such a
# graph), and T5's first decoder block does it in its checkpointed region (a zeros position
# bias it makes, then marks requires_grad when checkpointing).  We never run Dynamo's graph:
# we take its guards and its verdict on side effects.  So while a region is judged, setattr
# of requires_grad on a tensor the call made (no source: never an input, a parameter or any
# object from outside the call) to a constant Dynamo has guarded is applied to the fake
# value the trace continues with (so later ops and a read of `.requires_grad` see it, as
# eager's would) instead of breaking the graph.  A value that is not a constant, or a flag
# that eager itself refuses (False on a non-leaf: the fake raises as eager does) still ends
# the trace: the region is declined.  Any other setattr is Dynamo's own.  The handler is
# swapped only under Dynamo's compile lock, for the duration of our own trace.

def setattr_handler():
    """(class, attribute name) of Dynamo's setattr() on a traced object: SetAttrBuiltinVariable.
    _call_setattr (torch 2.13+), BuiltinVariable.call_setattr (2.11, 2.12); None if neither
    is there (tests/test_private_api.py fails naming the release)."""
    from torch._dynamo.variables import builtin
    for cls, attr in (("SetAttrBuiltinVariable", "_call_setattr"),
                      ("BuiltinVariable", "call_setattr")):
        owner = getattr(builtin, cls, None)
        if owner is not None and attr in owner.__dict__:
            return owner, attr
    return None


@contextlib.contextmanager
def _fresh_requires_grad():
    """Note [requires_grad set on a tensor the region makes]."""
    where = setattr_handler()
    if where is None:
        yield
        return
    from torch._dynamo.variables.constant import ConstantVariable
    from torch._dynamo.variables.tensor import TensorVariable
    owner, attr = where
    dynamos = owner.__dict__[attr]

    def handler(self, tx, obj, name_var, val, *rest):
        if isinstance(obj, TensorVariable) and obj.source is None \
                and name_var.is_python_constant() \
                and name_var.as_python_constant() == "requires_grad" \
                and val.is_python_constant() and isinstance(val.as_python_constant(), bool):
            flag = val.as_python_constant()
            obj.as_proxy().node.meta["example_value"].requires_grad_(flag)
            obj.requires_grad = flag
            return ConstantVariable.create(None)
        return dynamos(self, tx, obj, name_var, val, *rest)

    with compile_lock():
        setattr(owner, attr, handler)
        try:
            yield
        finally:
            setattr(owner, attr, dynamos)


def region_guards(fn, args: tuple, kwargs: dict, dynamic: bool = False):
    """Dynamo's verdict on `fn(*args, **kwargs)` under enable_grad: its guard manager
    (`.check(fn, args, kwargs)` says whether a later call would trace the same graph) if
    Dynamo traces it whole (_trace_once; dynamic: with symbolic sizes) with no effect outside
    the call (_clean), else None.  Nothing of fn runs, and a Dynamo that would not compile is
    not called."""
    from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list

    if not _dynamo_usable():
        return None
    verdict = []
    with _fresh_requires_grad():
        f, _ = _trace_once(_region_call, (fn, args, kwargs),
                           lambda tx, ex: verdict.append(
                               (_tensors_and_sizes(tx) if dynamic else _all_tensors(ex))
                               and _clean(tx)),
                           torch.enable_grad(), dynamic)
    if f is None:           # refused, or ran without the graph (no tensor op): nothing to guard
        return None
    entries = _debug_get_cache_entry_list(f.__code__)
    if verdict != [True] or len(entries) != 1:
        return None
    return _Guards(entries[0].guard_manager, f)


class _Guards:
    """A region's guard manager (and its code object, which owns the cache entry)."""
    __slots__ = ("keep", "manager")

    def __init__(self, manager, keep) -> None:
        self.manager, self.keep = manager, keep

    def check(self, fn, args: tuple, kwargs: dict) -> bool:
        with torch.enable_grad():
            return bool(self.manager.check({"fn": fn, "args": args, "kwargs": kwargs}))


# ---- Dynamo's verdict on a custom Function's backward (graph/custom.py) -----------------------

def _backward_call(fn, args, sentinel):
    out = fn(*args)
    sentinel + 1                # an op in every graph: the backend is always called
    return out


def backward_verdict(fn, args: tuple, covered) -> str | None:
    """Dynamo's verdict on `fn(*args)` under no_grad (graph/custom.py Note [Traced without
    opt-in]): None if it traces whole (_trace_once) with no effect outside the call (_clean)
    and every guard it installed names a source `covered(name)` accepts; else why not, in
    words.  Nothing of fn runs: the compiled graph raises before any of it (or any replayed
    side effect) would."""
    if not _dynamo_usable():
        return "Dynamo is disabled"
    verdict = []

    def judge(tx, example_inputs) -> None:
        if not _all_tensors(example_inputs):
            verdict.append("a number Dynamo left unspecialized")
        elif not _clean(tx):
            verdict.append("it has a side effect Dynamo records (a mutation of an object "
                           "from outside the call, a tensor hook, a random draw)")
        elif _draws_random(tx.output.graph):
            verdict.append("it draws torch random numbers (Note [A traced backward draws no "
                           "torch random number])")
        else:
            names = sorted({g.name for g in tx.output.guards if not covered(g.name)})
            verdict.append(f"it reads {', '.join(names)}, which the cache key does not "
                           "follow" if names else None)
    f, err = _trace_once(_backward_call, (fn, args, torch.zeros(())), judge, torch.no_grad())
    if err is not None:
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        return f"Dynamo: {type(err).__name__}: {first[:200]}"
    if f is None:
        return "Dynamo ran it without a graph"
    return verdict[0] if verdict else "Dynamo compiled no graph"


def _floor_div(x, y):
    return x // y


# Note [Meta failures are our fallbacks]
# FakeTensorMode logs every exception a meta kernel raises ("failed while attempting to run
# meta for <op>", at ERROR level with the traceback) before it re-raises it.  Where compiled_bw
# traces or compiles a graph, that exception is a failed capture or compile it handles -- the
# backward runs eager autograd, raising eager's own error where there is one, or the graph
# stays on the eager backend, the reason in stats() -- and eager autograd, which runs no meta
# kernel, logs nothing: neither may we.  The filter drops those records only, and only while
# `ours()` says compiled_bw's own fake work runs on this thread (core/fake_work.py); everything
# else FakeTensor logs passes.
META_FAILURE_LOG = "failed while attempting to run meta for"


class _OurMetaFailures(logging.Filter):
    def __init__(self, ours) -> None:
        super().__init__()
        self.ours = ours

    def filter(self, record: logging.LogRecord) -> bool:
        return not (isinstance(record.msg, str) and record.msg.startswith(META_FAILURE_LOG)
                    and self.ours())


def filter_meta_failures(ours) -> None:
    """Drop FakeTensor's meta-failure records while `ours()` (once per process)."""
    logger = fake_tensor.log
    if not any(isinstance(f, _OurMetaFailures) for f in logger.filters):
        logger.addFilter(_OurMetaFailures(ours))


@contextlib.contextmanager
def pool_sizes_without_parity_guards():
    """Our traces (trace/trace.py) on torch <= 2.12: the meta functions' pooling output size
    (`_meta_registrations.div_rtn`, for max/avg pooling and their backwards) tests the
    remainder's sign, with symbolic sizes a guard on each feature map's parity (every other
    height or width another capture); torch 2.13 made it `x // y`, the same value (Python's
    `//` floors), with no guard.  Ours uses 2.13's for the trace.  Newer releases: nothing."""
    if RELEASE >= (2, 13):
        yield
        return
    before = meta_registrations.div_rtn
    meta_registrations.div_rtn = _floor_div
    try:
        yield
    finally:
        meta_registrations.div_rtn = before
