"""The compile worker: a child process that compiles captured graphs with Inductor.

Run as `python -m compiled_bw.backends.compile_worker` by runtime/background.py.  Consumes, on
stdin, jobs (job id, Inductor cache dir, Inductor config, deterministic and precision modes,
torch threads, whether it is a dynamic graph compiled size-obliviously, modules to import
first, graph bytes from inductor_artifact.dump_graph); produces, on its stdout, (job id,
status, body, seconds):
  ok     body = the compiled graph's bytes (inductor_artifact.load_compiled loads them); for
         a dynamic graph (bytes, its ShapeEnv's guards, replacements and ranges after the
         compile: _shape_env_state)
  eager  nothing to compile (a graph without calls): the parent keeps its eager-backend fn
  error  body = the error's last line
Exits when stdin closes (the parent exited).  Note [Background compile] says why a process.
"""
from __future__ import annotations

import contextlib
import importlib
import os
import pickle
import struct
import sys
import time
import traceback

import torch

_HEADER = struct.Struct("<Q")

# Op namespaces the worker has (torch's C++ ops, ours).  A graph that calls an op of another
# namespace (a torch.library custom op, a triton_op) is compiled in the worker only where the
# worker can import the module that defines it (Note [Ops the worker imports]); else in the
# parent (runtime/run.py Note [Compile on repeat]).
WORKER_NAMESPACES = frozenset({"aten", "prims", "compiled_bw", "_c10d_functional",
                               "c10d_functional", "_c10d_functional_autograd"})


# Higher-order ops whose one op argument is what they run (an effect token threaded through
# it, a functionalized mutation): the worker has them if it has that op
_OP_WRAPPERS = frozenset({"with_effects", "auto_functionalized", "auto_functionalized_v2"})


def worker_imports(gm) -> tuple[list, list]:
    """([(module, its sys.path entry)] the worker imports first, names of the ops gm calls that
    it still cannot have) for compiling gm (WORKER_NAMESPACES, Note [Ops the worker
    imports])."""
    from ..torchapi.dynamo import defining_module
    modules: list = []
    foreign: list = []
    for n in gm.graph.nodes:
        op = n.target if n.op == "call_function" else None
        ns = getattr(op, "namespace", None)
        if ns == "higher_order" and getattr(op, "__name__", None) in _OP_WRAPPERS:
            op = next((a for a in n.args if hasattr(a, "namespace")), op)
            ns = getattr(op, "namespace", None)
        if ns is None or ns in WORKER_NAMESPACES:
            continue
        module = defining_module(op)
        root = _import_root(module)
        if root is not None:
            if (module, root) not in modules:
                modules.append((module, root))
        elif str(op) not in foreign:
            foreign.append(str(op))
    return modules, foreign


def foreign_ops(gm) -> list:
    """Names of the ops gm calls that the worker cannot have (worker_imports)."""
    return worker_imports(gm)[1]


# Note [Ops the worker imports]
# A custom op exists in a process once the module that defines it has run
# (`torch.library.custom_op` at import: Hugging Face's MoE fallback `transformers::
# grouped_mm_fallback_backward`, in transformers.integrations.moe).  Where the op is defined
# at the top level of a module the worker can import without running a user's script -- a
# submodule of a package, or a module installed in site-packages; not an op made inside a
# function -- the worker imports that module before loading the graph, and the
# graph compiles in the background like any other; the op's own kernels run in this process
# when the compiled graph calls it.  A module of the user's script (`__main__`, a top-level
# script imported by name) is not imported: importing it would run the script again; such a
# graph compiles in this process (runtime/run.py Note [Compile on repeat]).  The worker starts
# with this process's sys.path (background.py); the directory a module was found under goes
# with the job, for a path added later (a notebook's sys.path.append).
def _import_root(module: str | None) -> str | None:
    """The sys.path entry the worker imports `module` from, or None where it must not."""
    if not module or module == "__main__" or module.split(".")[0] == "torch":
        return None
    spec = getattr(sys.modules.get(module), "__spec__", None)
    origin = getattr(spec, "origin", None)
    if not origin or not os.path.isfile(origin):
        return None
    if "." not in module and not any(os.sep + d + os.sep in origin
                                     for d in ("site-packages", "dist-packages")):
        return None     # a top-level module outside an installed tree: perhaps a script
    parts = module.count(".") + 1 + (os.path.basename(origin).startswith("__init__."))
    root = origin
    for _ in range(parts):
        root = os.path.dirname(root)
    return root


def _import(modules: list) -> None:
    for module, root in modules:
        if root not in sys.path:
            sys.path.append(root)
        importlib.import_module(module)


def send(stream, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def recv(stream):
    """The next message, or None at end of stream."""
    head = stream.read(_HEADER.size)
    if len(head) < _HEADER.size:
        return None
    (n,) = _HEADER.unpack(head)
    data = stream.read(n)
    return None if len(data) < n else pickle.loads(data)


def deterministic() -> tuple:
    """torch's deterministic-algorithms mode, which Inductor reads while it lowers (an
    index_put with accumulate keeps the aten kernel, deterministic, where it would emit atomic
    adds; uninitialized memory is filled): part of the cache key (runtime/cache.py OptionsKey)
    and of a job, so the worker compiles under the parent's mode."""
    return (torch.are_deterministic_algorithms_enabled(),
            torch.is_deterministic_algorithms_warn_only_enabled(),
            bool(torch.utils.deterministic.fill_uninitialized_memory))


def precision() -> tuple | None:
    """The float32 matmul and convolution precision (TF32) settings, which Inductor's GPU code
    bakes in while it compiles (its Triton dots' input_precision, its matmul and convolution
    templates): part of the cache key and of a job, as deterministic() is.  None while CUDA is
    not initialized (no graph has a CUDA tensor; Inductor's CPU backward code reads none of
    them).  The fp32_precision names only: reading the legacy allow_tf32 raises once a program
    mixed the two APIs."""
    return _read_precision() if torch.cuda.is_initialized() else None


def _read_precision() -> tuple:
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    return (matmul.fp32_precision, matmul.allow_fp16_reduced_precision_reduction,
            matmul.allow_bf16_reduced_precision_reduction, cudnn.fp32_precision,
            cudnn.conv.fp32_precision, torch.get_float32_matmul_precision())


def _set_precision(p: tuple) -> None:
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    torch.set_float32_matmul_precision(p[5])
    matmul.fp32_precision = p[0]
    matmul.allow_fp16_reduced_precision_reduction = p[1]
    matmul.allow_bf16_reduced_precision_reduction = p[2]
    cudnn.fp32_precision = p[3]
    cudnn.conv.fp32_precision = p[4]


def modes() -> tuple:
    """What a job compiles under: (deterministic(), precision()) of the parent."""
    return deterministic(), precision()


@contextlib.contextmanager
def compile_modes(mode: tuple):
    """Compile under `mode` (a modes() of the parent)."""
    det, prec = mode
    before, before_prec = deterministic(), _read_precision()
    torch.use_deterministic_algorithms(det[0], warn_only=det[1])
    torch.utils.deterministic.fill_uninitialized_memory = det[2]
    if prec is not None:
        _set_precision(prec)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])
        torch.utils.deterministic.fill_uninitialized_memory = before[2]
        if prec is not None:
            _set_precision(before_prec)


def _compile(job: tuple) -> tuple:
    from ..core.thread import SitesOnly, current_step
    from ..torchapi.dynamo import fakes_as_they_are, size_oblivious
    from ..torchapi.inductor import CompiledFxGraph
    from .inductor import compile_inductor
    from .inductor_artifact import applied, dump_compiled, load_graph
    _, cache_dir, config, mode, threads, oblivious, modules, data = job
    _import(modules)        # Note [Ops the worker imports]
    # Inductor's C++ codegen parallelizes loops for torch.get_num_threads() threads: compile
    # for the parent's count, not this process's
    torch.set_num_threads(threads)
    # a dynamic graph compiles as in the parent (trace/dynamic.py Note [Sizes of one])
    def load_and_compile(obliviously: bool) -> tuple:
        with size_oblivious() if obliviously else contextlib.nullcontext():
            gm, fakes, sites = load_graph(data)
            if oblivious:
                fakes_as_they_are(fakes)
            with current_step(SitesOnly(sites)):
                return compile_inductor(gm, fakes), fakes
    with applied(cache_dir, config), compile_modes(mode):
        try:
            fn, fakes = load_and_compile(oblivious)
        except Exception:
            if not oblivious:
                raise
            # runtime/dynamic.py Note [Size-oblivious compile that fails]: once more (a fresh
            # graph and ShapeEnv) as a static graph's compile reasons, its guards sent back too
            fn, fakes = load_and_compile(False)
        env = _shape_env_state(fakes) if oblivious else None
    if isinstance(fn, CompiledFxGraph):
        return "ok", (dump_compiled(fn), env) if oblivious else dump_compiled(fn)
    return "eager", None


def _shape_env_state(fakes: list):
    """A dynamic graph's ShapeEnv after Inductor compiled it: (guards, replacements, ranges),
    sympy expressions the parent adds to the graph's Guards (runtime/dynamic.py Note [Dynamic
    graphs compile in the background]); None for a static graph."""
    env = next((t.fake_mode.shape_env for t in fakes if isinstance(t, torch.Tensor)
                and getattr(t, "fake_mode", None) is not None), None)
    if env is None:
        return None
    if any(env.deferred_runtime_asserts.values()):
        raise RuntimeError("Inductor made data-dependent sizes while compiling a dynamic graph")
    state = ([g.expr for g in env.guards], dict(env.replacements),
             {s: (r.lower, r.upper) for s, r in env.var_to_range.items()})
    pickle.dumps(state)     # (fails here, reported as an error, not in send())
    return state


def main() -> None:
    out = os.fdopen(os.dup(1), "wb")    # the protocol's; Inductor's prints go to stderr
    os.dup2(2, 1)
    inp = sys.stdin.buffer
    try:
        os.nice(10)         # the training process comes first on a small machine
    except OSError:
        pass
    import compiled_bw  # noqa: F401 -- registers compiled_bw::opaque before any graph loads

    from ..torchapi import inductor  # noqa: F401 -- imported by every compile: now
    from .inductor_artifact import warm_up
    warm_up()
    while (job := recv(inp)) is not None:
        t0 = time.perf_counter()
        try:
            status, body = _compile(job)
        except Exception as e:  # noqa: BLE001 -- reported to the parent, which keeps eager
            status, body = "error", traceback.format_exception_only(type(e), e)[-1].strip()
        send(out, (job[0], status, body, time.perf_counter() - t0))


if __name__ == "__main__":
    main()
