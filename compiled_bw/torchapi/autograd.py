"""The autograd engine's, dispatcher's and functorch's private API, and what we patch there.

Consumes torch; produces the private symbols below under stable names, and the autograd
functions compiled_bw replaces (`PATCHED`: the backward entry point, hook registration,
Function.apply, engine-state queries), which it replaces through `torchapi.patch()` only.
"""
from __future__ import annotations

import contextlib
import logging
import re

import torch
import torch._library.autograd as _library_autograd
import torch.nn.modules._functions as _nn_functions
from torch.autograd import function as function_mod
from torch.utils._python_dispatch import TorchDispatchMode

from .patching import original as _original
from .patching import patch as _patch

C = torch._C


def release(version: str = torch.__version__) -> tuple[int, int]:
    """(major, minor) of a torch version string ("2.11.0+cu130" -> (2, 11))."""
    m = re.match(r"(\d+)\.(\d+)", version)
    if m is None:
        raise ValueError(f"unrecognized torch version {version!r}")
    return int(m.group(1)), int(m.group(2))


RELEASE = release()     # the installed torch's

# --- engine state (runtime/engine_state.py, runtime/run.py) ---
current_autograd_node = C._current_autograd_node
will_engine_execute_node = C._will_engine_execute_node
current_graph_task_execution_order = C._current_graph_task_execution_order
current_graph_task_id = C._current_graph_task_id
is_checkpoint_valid = torch.autograd._is_checkpoint_valid
engine_run_backward = torch.autograd._engine_run_backward
ENGINE = torch.autograd.Variable._execution_engine
set_grad_enabled = C._set_grad_enabled
AccumulateGrad = C._functions.AccumulateGrad
# torch/autograd/graph.py's logger: at DEBUG, eager's `_engine_run_backward` gives every node
# of the graph a prehook that logs "Executing: <node> with grad_outputs: [...]" (TORCH_LOGS=autograd)
_graph_log = torch.autograd.graph.log


def node_logging_on() -> bool:
    """Whether eager autograd would log each node it runs (api.py Note [Eager's node logging])."""
    return _graph_log.isEnabledFor(logging.DEBUG)


# --- functorch and the legacy vmap (runtime/run.py, api.py) ---
functorch_transforms_active = C._are_functorch_transforms_active
functorch_wrapped = C._functorch.is_functorch_wrapped_tensor
profiler_enabled = C._autograd._profiler_enabled
torch_function_mode_enabled = C._is_torch_function_mode_enabled
vmapmode_increment_nesting = C._vmapmode_increment_nesting
vmapmode_decrement_nesting = C._vmapmode_decrement_nesting

# --- the dispatcher (core/dispatch_tls.py, graph/subclass.py) ---
DispatchKey = C.DispatchKey
dispatch_keys = C._dispatch_keys
dispatch_tls_is_dispatch_key_excluded = C._dispatch_tls_is_dispatch_key_excluded
dispatch_tls_set_dispatch_key_excluded = C._dispatch_tls_set_dispatch_key_excluded
dispatch_tls_local_exclude_set = C._dispatch_tls_local_exclude_set
dispatch_tls_local_include_set = C._dispatch_tls_local_include_set
ForceDispatchKeyGuard = C._ForceDispatchKeyGuard
foreach_copy_ = torch._foreach_copy_
storage_use_count = C._storage_Use_Count


def storage_id(t) -> int:
    """Which storage t's data lives in: equal for views of one tensor, fake tensors too
    (trace/holders.py)."""
    return t.untyped_storage()._cdata

set_version_counters = C._autograd._unsafe_set_version_counter   # (tensors, versions)

# --- Function / hook internals (graph/custom.py, graph/hooks.py) ---
BackwardCFunction = function_mod.BackwardCFunction
Function = function_mod.Function
FunctionCtx = function_mod.FunctionCtx
HookMixin = function_mod._HookMixin
is_setup_context_defined = function_mod._is_setup_context_defined
BackwardHookFunction = _nn_functions.BackwardHookFunction


def is_custom_op_function(cls) -> bool:
    """Whether an autograd.Function class is the one torch.library makes for a custom op with
    `register_autograd` (torch._library.autograd.make_autograd_impl's `Generated`, not the
    tensor-list variant): its backward calls the registered backward function."""
    bw = cls.__dict__.get("backward")
    fn = getattr(bw, "__func__", None)
    return (fn is not None and getattr(fn, "__module__", None) == _library_autograd.__name__
            and fn.__qualname__ == "make_autograd_impl.<locals>.backward")

USED = {
    "torch._C._dynamo.guards._torchinductor_pyobject_tensor_data_ptr":
        "runtime/warm.py (importing a stored Inductor C++-wrapper module)",
    "torch._C._current_autograd_node": "runtime/engine_state.py",
    "torch._C._will_engine_execute_node": "runtime/engine_state.py",
    "torch._C._current_graph_task_execution_order": "runtime/engine_state.py",
    "torch._C._current_graph_task_id": "runtime/run.py (reentrant backward check)",
    "torch.autograd._is_checkpoint_valid": "runtime/engine_state.py",
    "torch.autograd._engine_run_backward": "api.py (the backward entry point)",
    "torch.autograd.Variable._execution_engine": "runtime/run.py (the Deliver task)",
    "torch.autograd.graph.log": "api.py (Note [Eager's node logging])",
    "torch._C._set_grad_enabled": "runtime/run.py",
    "torch._C._functions.AccumulateGrad": "graph/saved.py",
    "torch._C._are_functorch_transforms_active": "runtime/run.py, api.py",
    "torch._C._functorch.is_functorch_wrapped_tensor": "runtime/run.py (_precheck)",
    "torch._C._autograd._profiler_enabled": "runtime/run.py (Note [Profiler])",
    "torch._C._is_torch_function_mode_enabled": "api.py",
    "torch._C._vmapmode_increment_nesting": "runtime/engine_state.py (legacy vmap level)",
    "torch._C._vmapmode_decrement_nesting": "runtime/engine_state.py (legacy vmap level)",
    "torch._C.DispatchKey": "core/dispatch_tls.py, graph/subclass.py",
    "torch._C._dispatch_keys": "graph/subclass.py",
    "torch._C._dispatch_tls_is_dispatch_key_excluded": "core/dispatch_tls.py",
    "torch._C._dispatch_tls_set_dispatch_key_excluded": "core/dispatch_tls.py",
    "torch._C._dispatch_tls_local_exclude_set": "core/dispatch_tls.py (Restorer, kept)",
    "torch._C._dispatch_tls_local_include_set": "core/dispatch_tls.py (kept)",
    "torch._C._ForceDispatchKeyGuard": "core/dispatch_tls.py (kept)",
    "torch._foreach_copy_": "runtime/cudagraphs.py",
    "torch._C._storage_Use_Count": "calls/opaque.py (Note [Stealing at delivery points])",
    "torch._C._autograd._unsafe_set_version_counter":
        "runtime/run.py (graph/mutated.py Note [Graph inputs the backward mutates])",
    "torch.autograd.function.BackwardCFunction": "graph/custom.py",
    "torch.autograd.function.FunctionCtx.set_materialize_grads": "graph/custom.py",
    "torch.autograd.function._HookMixin._register_hook": "graph/hooks.py",
    "torch.autograd.function._is_setup_context_defined": "graph/custom.py",
    "torch.nn.modules._functions.BackwardHookFunction": "graph/custom.py",
    "torch._library.autograd.make_autograd_impl": "graph/custom.py (custom ops' Functions)",
    "torch.utils._python_dispatch.TorchDispatchMode":
        "torchapi/autograd.py cumprod_branches_without_grad_mode",
}


# What compiled_bw replaces in torch's autograd (name -> owner, attribute), and who does.
PATCHED = {
    "current_autograd_node": (C, "_current_autograd_node"),                   # runtime/engine_state.py
    "will_engine_execute_node": (C, "_will_engine_execute_node"),             # runtime/engine_state.py
    "current_graph_task_execution_order": (C, "_current_graph_task_execution_order"),  # engine_state
    "is_checkpoint_valid": (torch.autograd, "_is_checkpoint_valid"),          # runtime/engine_state.py
    "engine_run_backward": (torch.autograd, "_engine_run_backward"),          # api.py
    "backward": (torch.autograd, "backward"),                                 # api.py
    "register_hook": (torch.Tensor, "register_hook"),                         # graph/hooks.py
    "retain_grad": (torch.Tensor, "retain_grad"),                             # graph/hooks.py
    "node_register_hook": (HookMixin, "_register_hook"),                      # graph/hooks.py
    "function_apply": (Function, "apply"),                                    # graph/custom.py
    "set_materialize_grads": (FunctionCtx, "set_materialize_grads"),          # graph/custom.py
}
# FunctionCtx.set_output_grad_dtype (torch 2.14+): the grad dtypes a custom Function declares,
# kept in C++ (the node's input metadata) where Python cannot read them: recorded by
# graph/custom.py's wrapper (Note [Declared grad dtypes] in graph/saved.py).
DECLARED_GRAD_DTYPES = hasattr(FunctionCtx, "set_output_grad_dtype")
if DECLARED_GRAD_DTYPES:
    PATCHED["set_output_grad_dtype"] = (FunctionCtx, "set_output_grad_dtype")  # graph/custom.py
# FunctionCtx.input_grad_buffers (torch 2.15): the engine's grad buffers of a custom backward's
# inputs, which only the engine can give (graph/custom.py reads_grad_buffers).
INPUT_GRAD_BUFFERS = hasattr(FunctionCtx, "input_grad_buffers")
# torch.autograd.graph.node_creation_hook (torch 2.14+; not in 2.11-2.13): the thread's stack of
# hooks called on every node created, kept in C++ where Python cannot read it.  Its pushes and
# pops are counted (graph/hooks.py Note [Node creation hooks]).
NODE_CREATION_HOOKS = hasattr(C._autograd, "_push_node_creation_hook")
if NODE_CREATION_HOOKS:
    PATCHED["push_node_creation_hook"] = (C._autograd, "_push_node_creation_hook")  # hooks.py
    PATCHED["pop_node_creation_hook"] = (C._autograd, "_pop_node_creation_hook")    # hooks.py


def patch(name: str, replacement, wrap=lambda f: f) -> None:
    _patch(PATCHED, name, replacement, wrap)


def original(name: str):
    return _original(PATCHED, name)


def current(name: str):
    """What `PATCHED[name]` is now: ours, torch's, or what someone installed over either."""
    owner, attr = PATCHED[name]
    return getattr(owner, attr)


_NODE_NAME_STYLE: list = []


def unpack_error_strips_backward() -> bool:
    """Whether eager's saved-tensor-modified error names the saved tensor's grad_fn without its
    "Backward<N>" suffix ("which is output 0 of Mul,": torch 2.13) or whole ("of MulBackward0,":
    torch 2.11).  Learned once from eager itself: one tiny backward that raises it, run by
    the C++ engine directly (never through compiled_bw's interception, whatever is installed)."""
    if not _NODE_NAME_STYLE:
        with torch.enable_grad():
            x = torch.ones(1, requires_grad=True)
            y = x * 2
            z = y.sin()
        with torch.no_grad():
            y.add_(1)
        try:
            ENGINE.run_backward((z,), (torch.ones(1),), False, False, (), True, True)
            msg = ""
        except RuntimeError as e:
            msg = str(e)
        _NODE_NAME_STYLE.append("of MulBackward0," not in msg)
    return _NODE_NAME_STYLE[0]


_CUMPROD_BRANCH: list = []


def cumprod_branches_without_grad_mode() -> bool:
    """Whether cumprod_backward takes a data-dependent branch with grad mode off that a formula
    traced on fake tensors skips (torch 2.11: eager divides a reversed cumsum by the input where
    no element is 0; 2.13: one formula for both; trace/dynamic.py GRAD_MODE_BRANCH).  Learned
    once from eager itself: cumprod's backward over float32 [1e30, 1e30, 1e-30], whose product
    overflows, run by the C++ engine plainly (inf everywhere on that branch) and under a no-op
    dispatch mode, under which every tensor counts as subclass-like (finite where it branches)."""
    if not _CUMPROD_BRANCH:
        grads = []
        for mode in (contextlib.nullcontext(), _NoOpMode()):
            with torch.enable_grad():
                x = torch.tensor([1e30, 1e30, 1e-30], requires_grad=True)
                y = x.cumprod(0)
            with mode:
                grads.append(ENGINE.run_backward((y,), (torch.ones(3),), False, False, (x,),
                                                 False, False)[0])
        _CUMPROD_BRANCH.append(not torch.equal(grads[0], grads[1]))
    return _CUMPROD_BRANCH[0]


class _NoOpMode(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def inductor_module_env() -> dict:
    """The environment an Inductor C++-wrapper module reads when it is imported (Inductor's
    CppPythonBindingsCodeCache._load_library_inner sets it before importing one)."""
    return {"_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR":
            str(torch._C._dynamo.guards._torchinductor_pyobject_tensor_data_ptr)}
