"""Formulas of torch's autograd that branch on "subclass-like" tensors, found on the installed
torch: every one must be known to compiled_bw, which traces formulas on fake tensors (the
subclass branch) while eager runs plain tensors (the other one).

Consumes the installed torch's OpInfo database; produces nothing.  The detector runs each op's
backward twice on real CPU tensors, plainly and with only the backward under a no-op
TorchDispatchMode: `at::isTensorSubclassLike` is true whenever a dispatch mode is on
(ATen/TensorSubclassLikeUtils.h), so an op whose grads then differ bit for bit (or which raises
on one side only) has such a branch; so has one whose grads' dtypes or strides (but for size-1
dims) differ.  Each one found must be in KNOWN, which names where compiled_bw takes eager's branch
(graph/nodes.py Notes [Checks fake tensors skip] and [Grads in the layout of a saved input],
trace/dynamic.py Note [Formulas of the plain-tensor branch] and GRAD_MODE_BRANCH).  A new torch
release that adds one fails here, naming the op; the differential tests of each entry are in
test_bad_input.py, test_wrong_values.py and test_create_graph.py.
"""
from __future__ import annotations

import warnings

import pytest
import torch
from differential import differential
from torch.testing._internal.common_methods_invocations import op_db
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from compiled_bw.graph.nodes import EAGER_LAYOUT, SKIPPED_CHECKS
from compiled_bw.torchapi import autograd as torch_autograd
from compiled_bw.torchapi import dynamo as torch_dynamo
from compiled_bw.trace.dynamic import GRAD_MODE_BRANCH, PLAIN_BRANCH, RELEASE_META

# OpInfo name -> (the node whose formula branches, where compiled_bw handles it); with
# create_graph=True ("cg") the grad-mode-on branch of the formula
KNOWN = {
    "linalg.eig": ("LinalgEigBackward0", SKIPPED_CHECKS),
    "linalg.eigh": ("LinalgEighBackward0", SKIPPED_CHECKS),
    "max": ("MaxBackward1", PLAIN_BRANCH),
    "min": ("MinBackward1", PLAIN_BRANCH),
    "median": ("MedianBackward0", PLAIN_BRANCH),
    "nanmedian": ("NanmedianBackward0", PLAIN_BRANCH),
    "prod": ("ProdBackward0", PLAIN_BRANCH),
    "masked_fill": ("MaskedFillBackward1", PLAIN_BRANCH),
    # with grad mode off too on torch 2.11 (torchapi/autograd.py
    # cumprod_branches_without_grad_mode)
    "cumprod": ("CumprodBackward0", GRAD_MODE_BRANCH),
    "masked.cumprod": ("CumprodBackward0", GRAD_MODE_BRANCH),
    "linalg.vander": ("CumprodBackward0", GRAD_MODE_BRANCH),
    "cg:linalg.det": ("LinalgDetBackward0", GRAD_MODE_BRANCH),
    # the same values in another layout
    "ormqr": ("OrmqrBackward0", EAGER_LAYOUT),
}


class _NoOp(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def _bits(t: torch.Tensor) -> torch.Tensor:
    if t.layout != torch.strided:
        t = t.to_dense()
    if t.is_complex():
        t = torch.view_as_real(t)
    return t.contiguous().to(torch.float64).view(torch.int64)


def _grads(op, sample, under_mode: bool, sign: float, create_graph: bool):
    torch.manual_seed(0)
    out = op(sample.input, *sample.args, **sample.kwargs)
    outs = [o for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor) and o.requires_grad]
    if not outs:
        return None
    ins = [t for t in tree_flatten((sample.input, sample.args, sample.kwargs))[0]
           if isinstance(t, torch.Tensor) and t.requires_grad]
    g = torch.Generator().manual_seed(1)
    gos = [(sign * torch.randn(o.shape, generator=g, dtype=torch.float64)).to(o.dtype)
           for o in outs]
    try:
        with _NoOp() if under_mode else torch.enable_grad():
            res = torch.autograd.grad(outs, ins, gos, allow_unused=True, create_graph=create_graph)
    except Exception as e:  # noqa: BLE001 -- an error on one side only is a branch
        return f"{type(e).__name__}"
    return [(_bits(r.detach()), _layout(r)) for r in res if r is not None]


def _layout(t: torch.Tensor):
    """t's dtype and strides but for size-1 dims (graph/nodes.py Note [Grads in the layout of a
    saved input]: a branch may build the grad in another layout)."""
    if t.layout != torch.strided:
        return t.dtype, t.layout
    return t.dtype, tuple(st for st, n in zip(t.stride(), t.shape, strict=True) if n != 1)


def _differs(op, sample, create_graph: bool) -> bool:
    for sign in (1.0, -1.0):       # -1: the sign of a zero the branches compute differently
        plain = _grads(op, sample, False, sign, create_graph)
        if plain is None:
            return False
        moded = _grads(op, sample, True, sign, create_graph)
        if isinstance(plain, str) or isinstance(moded, str):
            return isinstance(plain, str) != isinstance(moded, str)
        again = _grads(op, sample, False, sign, create_graph)
        if len(plain) != len(moded) or len(plain) != len(again) or not all(
                torch.equal(a, b) and la == lb
                for (a, la), (b, lb) in zip(plain, again, strict=True)):
            return False        # not deterministic: not comparable bit for bit
        if any(a.shape != b.shape or not torch.equal(a, b) or la != lb
               for (a, la), (b, lb) in zip(plain, moded, strict=True)):
            return True
    return False


def _op_samples(preferred: tuple):
    """(op, its first 4 CPU samples) for every OpInfo op with autograd, in the first dtype of
    `preferred` it supports a backward in."""
    for op in op_db:
        if not op.supports_autograd:
            continue
        dtypes = op.supported_backward_dtypes("cpu")
        dtype = next((d for d in preferred if d in dtypes), None)
        if dtype is None:
            continue
        try:
            samples = list(op.sample_inputs("cpu", dtype, requires_grad=True))[:4]
        except Exception:  # noqa: BLE001 -- an OpInfo that cannot make samples here
            continue
        yield op, samples


def _branching_ops(create_graph: bool) -> set:
    found = set()
    for op, samples in _op_samples((torch.float64, torch.complex128)):
        for sample in samples:
            try:
                if _differs(op, sample, create_graph):
                    found.add(("cg:" if create_graph else "") + op.name)
                    break
            except Exception:  # noqa: BLE001 -- comparing odd outputs; not a branch found
                continue
    return found


@pytest.mark.parametrize("create_graph", [False, True], ids=["first_order", "create_graph"])
def test_every_subclass_branch_of_a_formula_is_known(create_graph):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = _branching_ops(create_graph)
    # the detector works on this release (isTensorSubclassLike still sees dispatch modes)
    eig = ("cg:" if create_graph else "") + "linalg.eig"
    assert eig in found, f"the detector found no known branch: {sorted(found)}"
    # (a first-order entry covers create_graph too: there its node runs as itself)
    new = sorted(f for f in found if f not in KNOWN and f.removeprefix("cg:") not in KNOWN)
    assert not new, (f"autograd formulas of {new} branch on subclass-like tensors on torch "
                     f"{torch.__version__}: compiled_bw traces the other branch than eager runs. "
                     "Add each node to SKIPPED_CHECKS, PLAIN_BRANCH, GRAD_MODE_BRANCH or EAGER_LAYOUT and "
                     "to KNOWN")
    for name, (node, table) in KNOWN.items():
        assert node in table, f"{name}: {node} is not in the table that handles it"
    if not create_graph:    # what the trace learns at run time agrees
        assert ("cumprod" in found) == torch_autograd.cumprod_branches_without_grad_mode()


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_cumprod_that_overflows(backend):
    """cumprod's grad where the product overflows: inf everywhere on torch 2.11, whose
    cumprod_backward divides a reversed cumsum by the input where no element is 0 (there the
    node runs as itself); the traced formula's elsewhere, as eager's."""
    def step(x):
        x.grad = None
        (x * 1).cumprod(0).sum().backward()
        return [x.grad]
    differential(lambda: torch.tensor([1e30, 1e30, 1e-30], requires_grad=True), step,
                 backend=backend)


@pytest.mark.parametrize(("op", "backend"), [("irfft", "eager"), ("irfft", "inductor"),
                                             ("hfft", "inductor")])
def test_fft_grads_where_a_release_lays_out_its_meta_result_otherwise(op, backend):
    """irfft's and hfft's backward calls _fft_r2c over the transformed dim; torch 2.11's meta
    kernel of it is contiguous where the kernel puts that dim innermost, and Inductor read the
    real result with the fake one's strides: grads up to 4.8 off (trace/dynamic.py
    RELEASE_META; there the node runs as itself).  Over dim 1 of three, and the last dim."""
    fn = getattr(torch.fft, op)

    def step(x):
        x.grad = None
        (fn(x * 1, n=10, dim=1, norm="ortho") * torch.arange(10.0)[:, None]).sum().backward()
        (fn(x * 1, n=6, dim=-1) ** 2).sum().backward()
        return [x.grad]
    # a real input: its grad is the real part of the complex one, read through view_as_real
    differential(lambda: torch.randn(5, 6, 7, requires_grad=True), step, backend=backend,
                 captures=2)
    assert torch_dynamo.fft_r2c_meta_strides_wrong() == torch.__version__.startswith("2.11."), (
        f"torch {torch.__version__}: the _fft_r2c meta-strides probe changed its answer")



# ---- meta kernels that lay out a result otherwise than their kernel ---------------------------

# aten op -> (the node whose formula calls it, where compiled_bw handles it)
KNOWN_META = {"aten._fft_r2c.default": ("FftC2RBackward0", RELEASE_META)}


def _meta(t: torch.Tensor):
    return (tuple(t.shape), t.stride(), t.storage_offset(), t.dtype)


class _Record(TorchDispatchMode):
    """Every aten call that returns a strided tensor with elements, with its arguments' and
    result's metadata at the time of the call (a later in-place op may change them)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tensors = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
        before = [_meta(a) if a.layout == torch.strided else None for a in tensors]
        out = func(*args, **kwargs)
        if isinstance(out, torch.Tensor) and out.layout == torch.strided and out.numel():
            self.calls.append((func, args, kwargs, before, _meta(out)))
        return out


def _shape_and_layout(shape, stride) -> tuple:
    return tuple(shape), tuple(st for n, st in zip(shape, stride, strict=True) if n != 1)


def _meta_layouts_that_differ() -> set:
    """The aten ops that every OpInfo op's backward calls (the branch fake tensors take: under
    a dispatch mode) whose fake result's layout differs from the real one's (strides of
    size-1 dims aside)."""
    found = set()
    for op, samples in _op_samples((torch.float32, torch.complex64)):
        for sample in samples:
            rec = _Record()
            try:
                out = op(sample.input, *sample.args, **sample.kwargs)
                outs = [o for o in tree_flatten(out)[0]
                        if isinstance(o, torch.Tensor) and o.requires_grad]
                ins = [t for t in tree_flatten((sample.input, sample.args, sample.kwargs))[0]
                       if isinstance(t, torch.Tensor) and t.requires_grad]
                if not outs or not ins:
                    continue
                gos = [torch.randn_like(o) for o in outs]
                with rec:
                    torch.autograd.grad(outs, ins, gos, allow_unused=True)
            except Exception:  # noqa: BLE001 -- eager rejects the sample
                continue
            for func, args, kwargs, before, res in rec.calls:
                tensors = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
                if [_meta(a) if a.layout == torch.strided else None for a in tensors] != before \
                        or None in before:
                    continue
                try:
                    with torch_dynamo.FakeTensorMode() as mode:
                        fargs, fkwargs = tree_map(
                            lambda a, mode=mode: mode.from_tensor(a)
                            if isinstance(a, torch.Tensor) else a, (args, kwargs))
                        fake = func(*fargs, **fkwargs)
                except Exception:  # noqa: BLE001 -- no meta kernel, data-dependent: not compared
                    continue
                if isinstance(fake, torch.Tensor) and (
                        _shape_and_layout(fake.shape, fake.stride())
                        != _shape_and_layout(res[0], res[1])):
                    found.add(str(func))
    return found


def test_every_meta_kernel_that_lays_out_otherwise_is_known():
    """Inductor takes an extern call's layout from its fake result: where a release's meta
    kernel lays out a result otherwise than the kernel, the compiled graph reads the real
    result wrongly (torch 2.11's _fft_r2c).  Every aten call of every OpInfo op's backward is
    replayed on fake tensors; each op whose layout differs must be in KNOWN_META, and its
    node's probe must say so (trace/dynamic.py RELEASE_META)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = _meta_layouts_that_differ()
    new = sorted(found - set(KNOWN_META))
    assert not new, (f"on torch {torch.__version__} the meta kernels of {new} lay out a backward "
                     "formula's result otherwise than their kernels: add the nodes whose "
                     "formulas call them to trace/dynamic.py RELEASE_META with a probe, and to "
                     "KNOWN_META")
    for name, (node, table) in KNOWN_META.items():
        assert node in table, f"{name}: {node} is not in the table that handles it"
        assert (name in found) == table[node](), (
            f"{name}: the sweep and {node}'s probe disagree on torch {torch.__version__}")


def test_the_release_probes_draw_no_random_numbers(monkeypatch):
    """The probes learn_branches runs before the first trace must not draw from the global
    generator: a draw there shifts every random number the user's program draws after its
    first capture (dropout masks, data), which eager's run does not."""
    from compiled_bw.trace.dynamic import learn_branches
    monkeypatch.setattr(torch_autograd, "_CUMPROD_BRANCH", [])
    monkeypatch.setattr(torch_dynamo, "_FFT_R2C_META", [])
    before = torch.get_rng_state()
    learn_branches()
    assert torch.equal(torch.get_rng_state(), before), "a release probe drew random numbers"
