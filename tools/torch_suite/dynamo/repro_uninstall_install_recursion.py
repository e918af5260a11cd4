"""Side finding (while writing repro_register_hook_dynamo.py; no PyTorch test hits it):
compiled_bw.uninstall(), a torch.compile'd function that calls x.register_hook run once,
compiled_bw.install(), then the same again (after torch._dynamo.reset()): RecursionError in
compiled_bw/graph/hooks.py register_hook (frames entered by Dynamo, each at its first line).
It needs the first compile of the process to run uninstalled: uninstall(); install() with no
compile in between works, and so does installed -> uninstalled -> installed.  tests/test_dynamo_unchanged.py uses
this uninstall -> torch.compile -> install order (its programs register module hooks, not
tensor hooks).

Run: . /tmp/v2.15.0/bin/activate; PYTHONPATH=/work/main COMPILED_BW_BUILD_DIR=/tmp/cbw_build_dyn \
     python repro_uninstall_install_recursion.py
"""
import torch
import torch._dynamo

import compiled_bw


def hook(g):
    return g * 2


def fn(x):
    x.register_hook(hook)
    return x * 1


def go(tag):
    torch._dynamo.reset()
    v = torch.ones(3, requires_grad=True)
    try:
        torch.compile(fn, backend="eager")(v).sum().backward()
        print(f"{tag}: grad={v.grad.tolist()}")
    except RecursionError as e:
        print(f"{tag}: RecursionError: {e}")


compiled_bw.uninstall()          # before any torch.compile run with compiled_bw installed

go("uninstalled")
compiled_bw.install()
go("installed again")          # eager torch gives grad=[2.0, 2.0, 2.0] here
