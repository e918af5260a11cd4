"""Repro scripts: one captured graph, written so that a fresh process can show what went wrong.

Consumes a captured GraphModule (Compiled.gm), the backend it was compiled with and why it is
written (a verify mismatch: runtime/verify.py; a failed backend compile: api.py); produces a
standalone Python script in COMPILED_BW_REPRO_DIR (default <tmp>/compiled_bw_repros) and returns
its path.  `check` is what the script calls.

Note [Repro scripts]
The script holds the graph's code (GraphModule.print_readable: aten ops, the formulas of the
autograd nodes it was traced from), the metadata (shape, strides, dtype, device) of each input,
and the backend by name (a registered one) or by the file and name of the function the user
passed.  `python repro_N.py` makes random inputs of that metadata (a fixed seed; integer inputs
zero, bool inputs False: indices and masks stay in range; with COMPILED_BW_REPRO_INPUTS=full,
verify's repros use the step's real inputs instead, saved beside the script as repro_N.pt),
runs the graph's code as it is -- the
reference: the nodes' formulas, op by op -- and compiles it with the backend and runs that, then
compares each output as verify does (runtime/compare.py TOL) and exits 1 naming the first
difference, 2 if the backend's compile raises, 0 if both agree.  Not written: graphs holding
calls back into user code (compiled_bw::opaque / deliver: they need the live autograd graph);
write() then returns None and says why in the log.  A graph's constants (get_attr: a tensor a
traced region made from Python values) are saved beside the script (repro_N.constants.pt) and
set on the script's module before it runs.  A dynamic graph's
script runs it at the sizes it was captured with (each symbolic size's hint; its size inputs
are ints of those values), on random inputs (the step's real ones, with
COMPILED_BW_REPRO_INPUTS=full, may have other sizes: not saved).  Random inputs show a wrong kernel; a difference that needs the step's real values
does not reproduce.
"""
from __future__ import annotations

import itertools
import os
import re
import sys
import tempfile

import torch

from .. import config
from ..core.paths import write_atomic
from ..torchapi.dynamo import hint_of, sym_parts
from .compare import differs

_COUNTER = itertools.count()


def repro_dir() -> str:
    return os.environ.get("COMPILED_BW_REPRO_DIR") or os.path.join(tempfile.gettempdir(),
                                                                    "compiled_bw_repros")


def _why_not(gm) -> str | None:
    for n in gm.graph.nodes:
        if n.op == "call_function" and getattr(n.target, "namespace", "") == "compiled_bw" and \
                n.target._name.split("::")[-1].split(".")[0] not in ("exact_strides",):
            return f"it calls back into the autograd graph ({n.target})"
    return None


def _concrete(v) -> int | None:
    """A size as an int: itself, or a symbolic size's value at the sizes the graph was captured
    with (its hint); None if it has none."""
    if isinstance(v, int):
        return v
    expr, env = sym_parts(v)
    return hint_of(env, expr)


def _specs(gm) -> tuple:
    """(per input: (shape, strides, dtype, device) of a tensor, or ("int", value) of a size
    input; None if some input has none), whether some size was symbolic)."""
    specs, symbolic = [], False
    for n in gm.graph.find_nodes(op="placeholder"):
        v = n.meta.get("val")
        if isinstance(v, (int, torch.SymInt)):
            symbolic = True
            value = _concrete(v)
            if value is None:
                return None, True
            specs.append(("int", value))
            continue
        if not isinstance(v, torch.Tensor):
            return None, symbolic
        dims = [_concrete(d) for d in (*v.shape, *v.stride())]
        symbolic = symbolic or any(not isinstance(d, int) for d in (*v.shape, *v.stride()))
        if any(d is None for d in dims):
            return None, True
        specs.append((tuple(dims[:v.dim()]), tuple(dims[v.dim():]), str(v.dtype).split(".")[-1],
                      str(v.device)))
    return specs, symbolic


def _backend_ref(backend) -> tuple:
    """(name, file, qualname): a registered backend by name, else the user's function by file."""
    if isinstance(backend, str):
        return backend, None, None
    mod = sys.modules.get(getattr(backend, "__module__", ""), None)
    path = getattr(mod, "__file__", None)
    return None, path, getattr(backend, "__qualname__", None)


def full() -> bool:
    """COMPILED_BW_REPRO_INPUTS=full: verify's repros carry the step's real inputs."""
    return os.environ.get("COMPILED_BW_REPRO_INPUTS", "") == "full"


def write(gm, backend, why: str, inputs: list | None = None) -> str | None:
    """The path of the script written for `gm` (Note [Repro scripts]); None when it cannot be.
    inputs: the step's real graph inputs, saved beside the script (`repro_N.pt`) and used
    instead of random ones."""
    why_not = _why_not(gm)
    specs, symbolic = _specs(gm) if why_not is None else (None, False)
    if why_not is None and specs is None:
        why_not = "some input's size has no value (a symbolic size without a hint)"
    name, path, qualname = _backend_ref(backend)
    if why_not is None and name is None and (path is None or qualname is None
                                             or "<" in qualname):
        why_not = "its backend is a function defined where a script cannot import it"
    if why_not is not None:
        config.emit("fallbacks", "no repro written for a graph: %s", why_not)
        return None
    code = gm.print_readable(False)
    code = re.sub(r"^class [^(]*\(", "class Repro(", code, count=1)
    d = repro_dir()
    os.makedirs(d, exist_ok=True)
    out = os.path.join(d, f"repro_{os.getpid()}_{next(_COUNTER)}.py")
    text = f'''"""compiled_bw repro ({torch.__version__}): {why.replace('"""', "'")}

Run: python {os.path.basename(out)}   (exit 1: the backend's outputs differ from the graph's
own ops; 2: the backend's compile raised; 0: they agree)."""
import torch
import compiled_bw  # noqa: F401  (its ops)
from compiled_bw.runtime.repro import check
from torch import device, inf, nan  # noqa: F401  (names the graph's code may use)


{code}

SPECS = {specs!r}  # per input: shape, strides, dtype, device; or ("int", a size)
BACKEND = {name!r}  # a registered backend, or the function below
BACKEND_FILE, BACKEND_NAME = {path!r}, {qualname!r}

if __name__ == "__main__":
    raise SystemExit(check(Repro, SPECS, BACKEND, BACKEND_FILE, BACKEND_NAME, __file__))
'''
    if inputs is not None and not symbolic:     # (a dynamic graph's: the capture's sizes)
        torch.save([t.detach().cpu() for t in inputs], out[:-3] + ".pt")
    consts = {n.target: _attr(gm, n.target) for n in gm.graph.find_nodes(op="get_attr")}
    if consts:
        torch.save({k: v.detach() for k, v in consts.items()}, out[:-3] + ".constants.pt")
    write_atomic(out, text.encode())
    return out


def _attr(obj, dotted: str):
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def _set_constants(mod, constants: dict) -> None:
    """The graph's get_attr tensors, set where its code reads them (`self.<target>`)."""
    for dotted, value in constants.items():
        *path, last = dotted.split(".")
        owner = mod
        for part in path:
            if not hasattr(owner, part):
                owner.add_module(part, torch.nn.Module())
            owner = getattr(owner, part)
        setattr(owner, last, value)


def after_compile_failure(gm, backend, error: str) -> str:
    """" (repro: PATH)" for a failed backend compile when COMPILED_BW_REPRO_DIR is set, else ""."""
    if not os.environ.get("COMPILED_BW_REPRO_DIR"):
        return ""
    path = write(gm, backend, f"the backend's compile failed: {error}")
    return f" (repro: {path})" if path else ""


def _inputs(specs: list) -> list:
    g = torch.Generator().manual_seed(0)
    out = []
    for spec in specs:
        if spec[0] == "int":            # a size input of a dynamic graph
            out.append(spec[1])
            continue
        shape, stride, dtype, dev = spec
        dt = getattr(torch, dtype)
        t = torch.empty_strided(shape, stride, dtype=dt, device=dev)
        if dt.is_floating_point or dt.is_complex:
            n = t.untyped_storage().nbytes() // t.element_size()
            base = torch.randn(n, generator=g, dtype=torch.float64).to(dt)
            t = base.to(dev).as_strided(shape, stride)
        else:
            t.zero_()
        out.append(t)
    return out


def _load_backend(name, path, qualname):
    if name is not None:
        from ..backends import lookup_backend
        return lookup_backend(name)
    import importlib.util
    spec = importlib.util.spec_from_file_location("_compiled_bw_repro_backend", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    fn = mod
    for part in qualname.split("."):
        fn = getattr(fn, part)
    from ..backends import lookup_backend
    return lookup_backend(fn)


def check(module_cls, specs, name, path=None, qualname=None, script=None) -> int:
    """What a repro script runs (Note [Repro scripts]): 0 same, 1 different, 2 compile raised.
    The inputs: the real ones saved beside `script` (repro_N.pt) if there, else random ones."""
    saved = None if script is None else os.path.splitext(script)[0] + ".pt"
    real = torch.load(saved) if saved is not None and os.path.exists(saved) else None

    def make_inputs() -> list:
        """Fresh inputs for each run (the compiled call may free them): copies of the real ones,
        with their strides, or random ones of the recorded metadata."""
        if real is None:
            return _inputs(specs)
        return [torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=dev).copy_(t)
                for t, (*_, dev) in zip(real, specs, strict=True)]
    mod = module_cls()
    consts = None if script is None else os.path.splitext(script)[0] + ".constants.pt"
    if consts is not None and os.path.exists(consts):
        _set_constants(mod, torch.load(consts))
    ref = list(mod(*make_inputs()))
    gm = torch.fx.symbolic_trace(mod)
    example = make_inputs()
    try:
        fn = _load_backend(name, path, qualname)(gm, example)
    except Exception as e:  # noqa: BLE001 -- the failure is what the repro shows
        print(f"the backend's compile raised {type(e).__name__}: {e}")
        return 2
    ours = list(fn(make_inputs()))
    for i, (r, o) in enumerate(zip(ref, ours, strict=True)):
        diff = differs(r, o, f"output {i}", "the graph's own ops")
        if diff is not None:
            print(f"compiled by the backend, {diff}")
            return 1
    print(f"the backend's {len(ours)} outputs agree with the graph's own ops")
    return 0
