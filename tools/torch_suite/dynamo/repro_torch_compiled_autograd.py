"""A backward run with torch's own compiled autograd active (torch._dynamo.compiled_autograd
._enable(...), what torch._dynamo.config.compiled_autograd=True enters around a compiled frame)
inside compiled_bw.enable() raises where eager autograd (with the same compiled autograd)
succeeds.  PyTorch test/dynamo/test_hooks.py: test_functools_arg_vary, test_hook_with_closure,
test_hook_with_nested_closure, test_input_hooks_same, test_intermediate_hook_with_closure_eager,
test_intermediate_hook_with_closure_aot, test_no_recompile_on_hook_identity_change,
test_post_acc_grad_hook, test_recompile.

compiled_bw has no check for torch's compiled autograd (api.py _engine_run_backward):
  case 1 (eager forward, hook on an intermediate): compiled_bw captures and runs its graph, then
    delivers through the real engine (runtime/run.py _deliver: _ENGINE.run_backward on a
    _DeliverBackward node).  torch's compiled autograd intercepts that engine call and has Dynamo
    trace _DeliverBackward.backward -> compiled_bw/runtime/run.py run() ->
    core/dispatch_tls.py snapshot(): "Unsupported: Failed to convert args/kwargs to proxy"
    (UserDefinedObjectVariable(DispatchKey)).
  case 2 (aot_eager forward compiled while compiled autograd is on, hook on an intermediate):
    the capture falls back ("splicing the AOT backward ... failed at node 'primals_N' ...
    Expected positional argument"; without compiled autograd it captures), but the saved
    tensors keep compiled_bw's Slot pack/unpack hooks from the walk (walk/saved_slots.py);
    compiled autograd traces Slot.unpack (graph/saved.py: `t._version != self.version`):
    "UserError: ... data-dependent expression Ne(u0, 0)".

Run: . /tmp/v2.15.0/bin/activate; PYTHONPATH=/work/main COMPILED_BW_BUILD_DIR=/tmp/cbw_build_dyn \
     python repro_torch_compiled_autograd.py
"""
import contextlib

import torch
import torch._dynamo
from torch._dynamo import compiled_autograd

import compiled_bw


def eager_forward(x):
    y = x.mul(2)
    y.register_hook(lambda g: g * 3)
    return y.mul(3)


OBJ = torch.tensor(88.0)


def aot_forward(x):
    y = x.sin()
    y.register_hook(lambda g: g + OBJ)
    return y.sin()


CASES = {
    "1 eager forward": lambda: eager_forward,
    "2 aot_eager forward": lambda: torch.compile(aot_forward, backend="aot_eager", fullgraph=True),
}


def run(make, cbw):
    torch._dynamo.reset()
    x = torch.ones(4, requires_grad=True)
    st = compiled_bw.stats()
    c0, f0 = st.captures, len(st.fallback_reasons)
    ctx = compiled_bw.enable(backend="eager") if cbw else contextlib.nullcontext()
    try:
        with ctx, compiled_autograd._enable(torch.compile(backend="eager", fullgraph=True)):
            f = make()
            f(x).sum().backward()
        res = f"grad={x.grad.tolist()}"
    except Exception as e:  # noqa: BLE001 -- the error is the finding
        res = f"raised {type(e).__name__}: {str(e).splitlines()[0][:110]}"
    st = compiled_bw.stats()
    return res, st.captures - c0, [r[:110] for r in st.fallback_reasons[f0:]]


for name, make in CASES.items():
    print(f"case {name}")
    print("  eager autograd + torch compiled autograd:", run(make, cbw=False)[0])
    res, caps, fbs = run(make, cbw=True)
    print(f"  compiled_bw.enable() + torch compiled autograd: {res}")
    print(f"    (compiled_bw captures={caps}, fallbacks={fbs})")
