"""AccumulateGrad's buffer stealing (accumulate_grad.h, PyTorch's test_no_grad_copy): a leaf
whose `.grad` is undefined takes the incoming grad itself (`.grad` shares its buffer, no copy)
when nothing else references it and its layout obeys the contract; else it copies.  Observed
through data_ptr(): each program records only the pointer (an int) of the buffer a custom
backward or hook made, never the tensor (a reference would defeat the steal in eager too).

compiled_bw keeps eager's answer where leaf grads are delivered by AccumulateGrad called
directly or by the engine (Note [Direct delivery], _Deliver), and at a delivery point (a graph
with user code inside) for a custom backward's or hook's own result (runtime/run.py Note
[Stealing at delivery points]), for one tensor returned for two leaves and for a grad a
custom backward passes through unchanged (calls/opaque.py Note [One grad for several
leaves]).
"""
import pytest
import torch
from differential import differential
from torch.autograd import Function


class _TwoOut(Function):
    """PyTorch's test_no_grad_copy MyFunc: returns its one grad buffer to both inputs."""
    ptr = None

    @staticmethod
    def forward(ctx, a, b):
        return a + b

    @staticmethod
    def backward(ctx, g):
        _TwoOut.ptr = g.data_ptr()
        return g, g


class _NonContiguous(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.size = x.size()
        return torch.tensor([1.0])

    @staticmethod
    def backward(ctx, g):
        return torch.ones(1).expand(ctx.size)


class _Fresh(Function):
    """Its backward makes a new buffer that only the engine references afterwards."""
    ptr = None

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        r = g * 2
        _Fresh.ptr = r.data_ptr()
        return r


def _ab():
    return [torch.randn(5, 6, requires_grad=True), torch.randn(5, 6, requires_grad=True)]


def test_non_contiguous_grad_is_copied():
    def step(st):
        a, b = st
        a.grad = b.grad = None
        _NonContiguous.apply(_TwoOut.apply(a, b)).backward()
        return a.grad.data_ptr() == _TwoOut.ptr, b.grad.data_ptr() == _TwoOut.ptr, a.grad
    differential(_ab, step)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_one_of_two_leaves_steals_the_buffer(backend):
    """PyTorch's test_no_grad_copy: the leaf delivered last takes the one buffer."""
    def step(st):
        a, b = st
        a.grad = b.grad = None
        _TwoOut.apply(a, b)[1][0].backward()
        pa, pb = a.grad.data_ptr(), b.grad.data_ptr()
        return pa == pb, pa == _TwoOut.ptr, pb == _TwoOut.ptr, a.grad, b.grad
    differential(_ab, step, backend=backend, options={"background_compile": False})


class _Shared(Function):
    """Returns one tensor for both inputs: a new one (`fresh`), or its grad, which it may also
    keep (`kept`: eager then copies for both leaves)."""
    ptr = None
    mode = "fresh"
    kept = None

    @staticmethod
    def forward(ctx, a, b):
        return a * b

    @staticmethod
    def backward(ctx, g):
        r = g * 2 if _Shared.mode == "fresh" else g
        _Shared.ptr = r.data_ptr()
        if _Shared.mode == "kept":
            _Shared.kept.append(r)
        return r, r


class _Pass(Function):
    """Passes its grad through; `keep` also keeps it (eager then copies)."""
    ptr = None
    keep: list | None = None

    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    def backward(ctx, g):
        _Pass.ptr = g.data_ptr()
        if _Pass.keep is not None:
            _Pass.keep.append(g)
        return g


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("mode", ["fresh", "passed", "kept"])
def test_one_tensor_for_two_leaves(backend, mode):
    """Eager puts the one tensor in both leaves' buffers: the first AccumulateGrad copies, the
    last takes it unless user code keeps it too (use_count)."""
    def step(st):
        a, b = st
        a.grad = b.grad = None
        _Shared.mode, _Shared.kept = mode, []
        (_Shared.apply(a, b) * 3).sum().backward()
        pa, pb = a.grad.data_ptr(), b.grad.data_ptr()
        return pa == _Shared.ptr, pb == _Shared.ptr, a.grad, b.grad
    differential(_ab, step, backend=backend, options={"background_compile": False})


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("keep", [False, True])
def test_passed_through_grad_is_stolen_unless_kept(backend, keep):
    """A custom backward that returns its grad (made by the graph, used nowhere else): eager's
    AccumulateGrad takes it; if the backward also kept it, eager copies.  If this fails for
    keep=False only, the reference count calls/opaque.py _OWNED_REFS expects has moved."""
    def step(st):
        a, _ = st
        a.grad = None
        _Pass.keep = [] if keep else None
        (_Pass.apply(a) * 2).sum().backward()
        return a.grad.data_ptr() == _Pass.ptr, a.grad
    differential(_ab, step, backend=backend, options={"background_compile": False})


def test_passed_through_grad_used_again_is_not_stolen():
    """The grad a custom backward passes through to a leaf also feeds another node (AddBackward0
    hands one grad to both its inputs; the custom node runs first): the leaf must not take
    that buffer, or a hook that scales `.grad` in place would change what the other node
    computes from it."""
    def step(st):
        a, b = st
        a.grad = b.grad = None
        _Pass.keep = None
        h = a.register_post_accumulate_grad_hook(lambda p: [p.grad.mul_(10)] and None)
        ((b * 2 + _Pass.apply(a)) ** 2).sum().backward()
        h.remove()
        return a.grad, b.grad, a.grad.data_ptr() == _Pass.ptr
    differential(_ab, step)


# A fresh process in which Dynamo never runs.
OPTED_OUT = r'''
import sys, torch, compiled_bw
class PassOptedOut(torch.autograd.Function):
    compiled_bw_traceable = False
    ptr, keep = None, None
    @staticmethod
    def forward(ctx, x):
        return x * 1
    @staticmethod
    def backward(ctx, g):
        PassOptedOut.ptr = g.data_ptr()
        if PassOptedOut.keep is not None:
            PassOptedOut.keep.append(g)
        return g
a = torch.randn(5, 6, requires_grad=True)
def step(keep):
    a.grad = None
    PassOptedOut.keep = [] if keep else None
    (PassOptedOut.apply(a) * 2).sum().backward()
    return a.grad.data_ptr() == PassOptedOut.ptr
eager = [step(False), step(True)]
with compiled_bw.enable(backend=sys.argv[1], background_compile=False):
    ours = [step(False), step(True)]
    ours = [step(False), step(True)] if ours == eager else ours    # the hits

print(eager, ours)
sys.exit(0 if eager == ours else 1)
'''


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_kept_grad_of_an_opted_out_function_is_copied_in_a_fresh_process(backend):
    """In a process where Dynamo never ran (the Function opted out, so nothing judged its
    backward), a grad the backward passed through is stolen and one it also kept is copied,
    as eager does.  The reference count that tells them apart was one lower there than where
    Dynamo had run (calls/opaque.py Note [Counting references inline])."""
    import os
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", OPTED_OUT, backend], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
                       timeout=300, check=False)
    assert r.returncode == 0, r.stdout + r.stderr


class _KeepTwo(Function):
    """Keeps its grad and returns it for both inputs (eager: both leaves copy)."""
    compiled_bw_traceable = False
    kept: list | None = None

    @staticmethod
    def forward(ctx, a, b):
        return a + b

    @staticmethod
    def backward(ctx, g):
        _KeepTwo.kept.append(g)
        return g, g


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_a_grad_kept_downstream_of_a_shared_one_is_not_stolen(backend):
    """_KeepTwo returns its grad for two inputs (the graph copies it for one of them, a buffer
    nobody holds yet); _Pass then keeps that copy and passes it to leaf `a`: eager's
    AccumulateGrad copies it, since the backward holds it too (calls/opaque.py Note [User
    code may keep what it is given]).  Found by a random-program differential."""
    def step(st):
        a, b = st
        a.grad = b.grad = None
        _KeepTwo.kept = _Pass.keep = []     # (one list: the order they kept in)
        (_KeepTwo.apply(_Pass.apply(a), b) * torch.arange(30.0).view(5, 6)).sum().backward()
        kept = _KeepTwo.kept
        return ([a.grad.data_ptr() == k.data_ptr() for k in kept],
                [b.grad.data_ptr() == k.data_ptr() for k in kept], a.grad, b.grad)
    differential(_ab, step, backend=backend, options={"background_compile": False})


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_a_hook_writing_into_a_shared_grad_reaches_the_other_leaf(backend):
    """Eager's engine puts _Shared's one tensor ("fresh") into both leaves' buffers; `a`'s tensor
    hook writes into it (the hook contract forbids it, eager runs it), so `b`, delivered
    after, gets the changed tensor and takes it (calls/opaque.py Note [One grad for several
    leaves]).  Ours gave `a` a copy made in advance: `b.grad` was 1 lower everywhere.  Found by
    a random-program differential."""
    def step(st):
        a, b = st
        a.grad = b.grad = None
        _Shared.mode = "fresh"
        h = a.register_hook(lambda g: g.add_(1))
        _Shared.apply(a, b).sin().sum().backward()
        h.remove()
        return a.grad, b.grad, [a.grad.data_ptr() == _Shared.ptr,
                                b.grad.data_ptr() == _Shared.ptr]
    differential(_ab, step, backend=backend, options={"background_compile": False})


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("keeper", [0, 1])
def test_a_hook_keeping_a_shared_grad_stops_the_other_leaf_taking_it(backend, keeper):
    """_Shared's one tensor ("fresh") reaches both leaves; one leaf's hook keeps it: eager's
    AccumulateGrads both copy (the kept reference shows in the use count), so neither `.grad`
    shares the kept tensor's buffer."""
    def step(st):
        kept = []
        a, b = st
        a.grad = b.grad = None
        _Shared.mode = "fresh"
        h = st[keeper].register_hook(kept.append)
        _Shared.apply(a, b).sin().sum().backward()
        h.remove()
        return a.grad, b.grad, [a.grad.data_ptr() == kept[0].data_ptr(),
                                b.grad.data_ptr() == kept[0].data_ptr(),
                                kept[0].data_ptr() == _Shared.ptr]
    differential(_ab, step, backend=backend, options={"background_compile": False})


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_a_leaf_hook_writing_into_a_grad_two_paths_got_reaches_the_other_path(backend):
    """_TwoOut hands its grad to leaf `b` (whose hook writes into it, against the hook
    contract) and to the tanh on the other path: eager's buffers hold that one tensor, and
    `b`'s AccumulateGrad runs first, so the tanh's backward reads the written values
    (calls/opaque.py Note [Passed-through grads])."""
    def step(st):
        a, b = st
        a.grad = b.grad = None
        h = b.register_hook(lambda g: g.add_(1))
        ((a + _TwoOut.apply(b, a.tanh())) * torch.arange(30.0).view(5, 6)).sum().backward()
        h.remove()
        return a.grad, b.grad
    differential(_ab, step, backend=backend, options={"background_compile": False})
