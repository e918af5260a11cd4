"""Traceable saved-tensor hooks: `compiled_bw.traceable_saved_tensors_hooks(pack, unpack)`.

Consumes programs whose forward runs inside that context (its contract is
`torch.autograd.graph.saved_tensors_hooks`'s, plus: the unpack is a pure tensor function);
produces eager vs compiled_bw comparisons with `strict=True`: grads, pack-call logs, errors.
Eager semantics checked: the unpack's result feeds the formula (a bf16 round trip changes the
grads, so an unpack that did not run, or ran on the wrong tensor, shows), a new unpack function
or a packed value that changes is a new graph (never a stale one), retain_graph=False frees the
packed objects (a second backward raises eager's error), nested contexts (innermost wins), and
a failing unpack gives eager's error with no .grad changed.  Under compiled_bw the node is
traced (no opaque call): the unpack's ops are in the graph (Note [Traceable saved-tensor hooks]).
"""
import pytest
import torch
from differential import differential, grads

import compiled_bw

pytestmark = pytest.mark.both_backends


def _pack(t):
    return (t.to(torch.bfloat16), t.dtype)


def _unpack(p):
    return p[0].to(p[1])


def _mlp():
    torch.manual_seed(1)
    return [torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4)), []]


def _assert_traced(st):
    hooked = [n for n in st.notes if "saved tensors carry hooks" in n]
    assert not hooked, f"a node with traceable hooks ran as an opaque call: {hooked}"


def test_bf16_compression_traced_into_the_graph():
    def step(st):
        m, log = st
        m.zero_grad()
        x = torch.randn(8, 16)

        def pack(t):
            log.append(("pack", tuple(t.shape)))
            return _pack(t)
        with compiled_bw.traceable_saved_tensors_hooks(pack, _unpack):
            loss = m(x).pow(2).sum()
        loss.backward()
        return [grads(m), list(log)]
    st = differential(_mlp, step, strict=True)
    _assert_traced(st)
    code = compiled_bw.last_graph().code
    assert "_to_copy" in code and "opaque" not in code, code


def test_graph_module_hooks():
    pack = torch.fx.symbolic_trace(lambda t: t.to(torch.bfloat16))
    unpack = torch.fx.symbolic_trace(lambda t: t.to(torch.float32) * 1.0)

    def step(st):
        m, _ = st
        m.zero_grad()
        with compiled_bw.traceable_saved_tensors_hooks(pack, unpack):
            loss = m(torch.randn(8, 16)).sin().sum()
        loss.backward()
        return grads(m)
    _assert_traced(differential(_mlp, step, strict=True))


def test_new_unpack_function_or_packed_value_is_a_new_graph():
    """Step k scales by k + 1 in a closure (a new function each step) or in the packed object
    (a plain value in the key): a graph reused with step 0's scale would give wrong grads."""
    def make(scale):
        return (lambda t: t * (1.0 / scale)), (lambda p: p * scale)

    def step(st):
        m, log = st
        m.zero_grad()
        k = len(log)
        log.append(k)
        pack, unpack = make(float(k + 1))
        with compiled_bw.traceable_saved_tensors_hooks(pack, unpack):
            a = m(torch.randn(8, 16)).pow(2).sum()
        with compiled_bw.traceable_saved_tensors_hooks(lambda t: (t * 0.5, 2.0 + k),
                                                        lambda p: p[0] * p[1]):
            b = m(torch.randn(8, 16)).pow(2).sum()
        (a + b).backward()
        return grads(m)
    differential(_mlp, step, strict=True, captures=3)


class _Scale:
    """A user object in a packed object: its attribute changes between steps."""
    def __init__(self) -> None:
        self.v = 1.0


_SCALE = _Scale()
_VALUE = [1]


def _pack_with_scale(t):
    return (t * 1.0, _SCALE)


def _unpack_with_scale(p):
    return p[0] * p[1].v


def _pack_with_value(t):
    return (t * 1.0, _VALUE[0])


def _unpack_with_value(p):
    return p[0] * len(repr(p[1]))


def test_packed_user_object_mutated_between_steps_is_never_a_stale_constant():
    """The same hooks and the same _Scale object in every step's packed object, with a new
    `.v`: a graph traced with step 0's `.v` baked in and reused would give wrong grads.  Such a
    node runs as one call of the real node (eager's unpack each step); nothing falls back."""
    def step(st):
        m, log = st
        m.zero_grad()
        _SCALE.v = float(len(log) + 1)
        log.append(_SCALE.v)
        with compiled_bw.traceable_saved_tensors_hooks(_pack_with_scale, _unpack_with_scale):
            loss = m(torch.randn(8, 16)).pow(2).sum()
        loss.backward()
        return grads(m)
    differential(_mlp, step, strict=True)


def test_packed_plain_values_keyed_with_their_type():
    """1, 1.0 and True are equal and hash alike in Python, but an unpack may tell them apart
    (here through repr): each must be its own graph, never step 0's reused."""
    def step(st):
        m, log = st
        m.zero_grad()
        _VALUE[0] = (1, 1.0, True)[len(log) % 3]
        log.append(_VALUE[0])
        with compiled_bw.traceable_saved_tensors_hooks(_pack_with_value, _unpack_with_value):
            loss = m(torch.randn(8, 16)).pow(2).sum()
        loss.backward()
        return grads(m)
    differential(_mlp, step, strict=True, captures=3)


def test_retain_graph_false_frees_packed_objects_as_eager():
    def step(st):
        m, _ = st
        m.zero_grad()
        with compiled_bw.traceable_saved_tensors_hooks(_pack, _unpack):
            loss = m(torch.randn(8, 16)).exp().sum()
        loss.backward(retain_graph=True)
        g1 = grads(m)
        loss.backward()
        g2 = grads(m)
        loss.backward()     # eager: backward through the graph a second time
        return [g1, g2]
    # per step one fallback: the third backward, where eager raises; the retained second one
    # walks the same nodes again and is traced too
    differential(_mlp, step, strict=None, allow_errors=True, fallbacks=3, captures=None)


def test_nested_contexts_innermost_wins():
    def step(st):
        m, log = st
        m.zero_grad()
        x = torch.randn(8, 16)
        with torch.autograd.graph.saved_tensors_hooks(
                lambda t: log.append("outer pack") or t, lambda t: log.append("outer unpack") or t):
            h = m[0](x)
            with compiled_bw.traceable_saved_tensors_hooks(_pack, _unpack):
                h = m[1](h)
            out = m[2](h)
        with compiled_bw.traceable_saved_tensors_hooks(_pack, _unpack):
            with torch.autograd.graph.saved_tensors_hooks(
                    lambda t: log.append("inner pack") or t, lambda t: log.append("inner unpack") or t):
                out = out.sin()
        out.sum().backward()
        return [grads(m), list(log)]
    differential(_mlp, step, strict=True, captures=2)


def _raising_unpack(p):
    raise ValueError("unpack failed")


@pytest.mark.parametrize("unpack,error", [(_raising_unpack, ValueError),
                                          (lambda p: p[0].to(p[1])[:1], RuntimeError),
                                          (lambda p: p[0].to(p[1]).double(), RuntimeError),
                                          (lambda p: p[0], RuntimeError)],
                         ids=["raises", "wrong_shape", "wrong_dtype", "packed_dtype"])
def test_bad_unpack_gives_eagers_error_and_no_grad(unpack, error):
    def step(st):
        m, _ = st
        for p in m.parameters():
            p.grad = torch.ones_like(p)
        with compiled_bw.traceable_saved_tensors_hooks(_pack, unpack):
            loss = m(torch.randn(8, 16)).sum()
        try:
            loss.backward()
        except error as e:
            return [str(e), grads(m)]
        return grads(m)
    if unpack is _raising_unpack:
        # the trace calls the unpack and it raises: each step runs eager autograd (recorded),
        # which raises eager's error
        st = differential(_mlp, step, fallbacks=3, captures=0)
        assert all("unpack failed" in r for r in st.fallback_reasons), st.fallback_reasons
    else:
        differential(_mlp, step, strict=True)   # compiled: the graph's node raises eager's error


def test_hooks_not_callable():
    with pytest.raises(TypeError, match="must be callable"):
        with compiled_bw.traceable_saved_tensors_hooks(_pack, 3):
            pass


_FACTOR = 1.0


def _unpack_times_global(p):
    return p[0].to(p[1]) * _FACTOR


def test_unpack_reading_a_global_reassigned_between_steps():
    """A global the unpack reads is baked into a traced graph (Note [What a traced unpack may
    read] in graph/packed.py): each value is its own graph, never step 0's reused."""
    def step(st):
        global _FACTOR
        m, log = st
        m.zero_grad()
        _FACTOR = float(len(log) + 1)
        log.append(_FACTOR)
        with compiled_bw.traceable_saved_tensors_hooks(_pack, _unpack_times_global):
            loss = m(torch.randn(8, 16)).pow(2).sum()
        loss.backward()
        return grads(m)
    st = differential(_mlp, step, strict=True, captures=3)
    _assert_traced(st)


def test_unpack_closure_read_through_a_helper_function():
    """The unpack calls a helper whose closure list changes between steps."""
    scale = [1.0]

    def helper(x):
        return x * scale[0]

    def unpack(p):
        return helper(p[0].to(p[1]))

    def step(st):
        m, log = st
        m.zero_grad()
        scale[0] = float(len(log) + 2)
        log.append(scale[0])
        with compiled_bw.traceable_saved_tensors_hooks(_pack, unpack):
            loss = m(torch.randn(8, 16)).pow(2).sum()
        loss.backward()
        return grads(m)
    st = differential(_mlp, step, strict=True, captures=3)
    _assert_traced(st)


def test_unpack_reading_a_mutable_object_runs_as_a_call():
    """A dict the unpack reads could change unseen by any key: the node calls the real unpack
    every step (one capture, no fallback, eager's grads each step)."""
    cfg = {"scale": 1.0}

    def unpack(p):
        return p[0].to(p[1]) * cfg["scale"]

    def step(st):
        m, log = st
        m.zero_grad()
        cfg["scale"] = float(len(log) + 2)
        log.append(cfg["scale"])
        with compiled_bw.traceable_saved_tensors_hooks(_pack, unpack):
            loss = m(torch.randn(8, 16)).pow(2).sum()
        loss.backward()
        return grads(m)
    differential(_mlp, step, strict=True, captures=1)
