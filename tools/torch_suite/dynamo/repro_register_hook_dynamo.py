"""Importing compiled_bw changes what torch.compile does with `x.register_hook(...)` in a compiled
forward (PyTorch test/dynamo/test_hooks.py: test_tensor_register_multiple_hooks,
test_tensor_register_multiple_hooks_handles_in_list -- wrong grads; 10 tests asserting
CompileCounter.frame_count -- extra frames).

compiled_bw/graph/hooks.py install() replaces torch.Tensor.register_hook with a Python wrapper
(register_hook).  Dynamo no longer applies its own register_hook handling ([On
tensor.register_hook] in torch/_dynamo/variables/tensor.py) but inlines the wrapper and torch's
Python Tensor.register_hook under it, which graph-breaks on `self._backward_hooks =
OrderedDict()` / `RemovableHandle.next_id += 1`:
  - default config: 1 frame becomes 4 (grads equal);
  - torch._dynamo.config.nested_graph_breaks=True (torch's Dynamo TestCase sets it): of three
    hooks registered on the leaf only the last one survives the forward: grad [3, 6, 9] instead
    of [6, 12, 18] (hooks global_hook_0 and global_hook_1 are never called).
Nothing here needs compiled_bw.enable(): the import alone does it (enable() gives the same).

Run: . /tmp/v2.15.0/bin/activate; PYTHONPATH=/work/main COMPILED_BW_BUILD_DIR=/tmp/cbw_build_dyn \
     python repro_register_hook_dynamo.py
"""
import json
import subprocess
import sys

import torch
import torch._dynamo
import torch._dynamo.testing

MODE = sys.argv[1] if len(sys.argv) > 1 else None   # torch | imported | enabled (child runs)
if MODE in ("imported", "enabled"):
    import compiled_bw

calls = []


def global_hook_0(grad):
    calls.append(0)
    return grad * 4


def global_hook_1(grad):
    calls.append(1)
    return grad / 2


def global_hook_2(grad):
    calls.append(2)
    return grad * 3


def fn(x):
    x.register_hook(global_hook_0)
    x.register_hook(global_hook_1)
    x.register_hook(global_hook_2)
    return x, x * x


def run(nested):
    torch._dynamo.reset()
    calls.clear()
    cnts = torch._dynamo.testing.CompileCounter()
    with torch._dynamo.config.patch(nested_graph_breaks=nested):
        f = torch.compile(fn, backend=cnts)
        v = torch.tensor([0.0, 0.0, 0.0], requires_grad=True)
        if MODE == "enabled":
            with compiled_bw.enable(backend="eager"):
                v = f(v)[0]
                v.backward(torch.tensor([1.0, 2.0, 3.0]))
        else:
            v = f(v)[0]
            v.backward(torch.tensor([1.0, 2.0, 3.0]))
    return [v.grad.tolist(), cnts.frame_count, list(calls)]


if MODE is not None:
    print("RESULT", json.dumps({str(n): run(n) for n in (False, True)}))
else:
    # each mode in a process of its own: the reference must not have compiled_bw imported
    # (compiled_bw.uninstall()/install() around a torch.compile run is not usable here: see
    # repro_uninstall_install_recursion.py)
    res = {}
    for mode in ("torch", "imported", "enabled"):
        out = subprocess.run([sys.executable, __file__, mode], check=False, capture_output=True,
                             text=True)
        line = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
        res[mode] = json.loads(line[0][7:]) if line else {"error": out.stderr[-2000:]}
    for nested in ("False", "True"):
        print(f"nested_graph_breaks={nested}")
        for mode, what in (("torch", "eager torch (no compiled_bw)"),
                           ("imported", "compiled_bw imported"),
                           ("enabled", "compiled_bw.enable()")):
            g, frames, called = res[mode][nested]
            print(f"  {what:30s}: grad={g} frames={frames} hooks called={called}")
        same_g = res["torch"][nested][0] == res["imported"][nested][0] == res["enabled"][nested][0]
        same_f = res["torch"][nested][1] == res["imported"][nested][1] == res["enabled"][nested][1]
        print(f"  same grads: {same_g}  same frame_count: {same_f}")
