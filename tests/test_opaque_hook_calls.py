"""Opaque hook calls on their fast paths (calls/opaque.py Note [One-grad tensor hook calls],
Note [Passed-through grads]) keep every check eager makes: each program hits one of them and
does what would go wrong if that path skipped a check -- a hook returning another dtype or a
non-tensor, a hook registering or removing hooks of its own dict, retains_grad next to a
hook, hooks that change between steps, one tensor returned for two grads."""
import pytest
import torch
from differential import differential


def _x():
    return [torch.randn(4, requires_grad=True), []]


@pytest.mark.parametrize("bad", ["dtype", "not a tensor", "size", "raises", "sparse"])
def test_one_grad_hook_result_checks_are_eagers(bad):
    def step(st):
        x, _log = st
        x.grad = torch.ones(4)
        y = x * 2
        z = y.sin()
        if bad == "dtype":
            y.register_hook(lambda g: g.double())
        elif bad == "not a tensor":
            y.register_hook(lambda g: 3)
        elif bad == "size":
            y.register_hook(lambda g: g.sum())
        elif bad == "sparse":       # same dtype, device and shape: eager's type check (layout)
            y.register_hook(lambda g: g.to_sparse())
        else:
            y.register_hook(lambda g: 1 / 0)
        z.sum().backward()
        return [x.grad]
    differential(_x, step, allow_errors=True)


def test_hook_registering_and_removing_hooks_of_its_own_tensor():
    """Eager calls the hooks a dict held when the node ran (a snapshot): one registered by a
    hook is called from the next backward on, one removed by a hook still runs this time."""
    def step(st):
        x, log = st
        x.grad = None
        y = x * 2
        handles = []

        def first(g):
            log.append("first")
            y.register_hook(lambda g: log.append("added") or g * 7)
            handles[0].remove()
            return g + 1
        y.register_hook(first)
        handles.append(y.register_hook(lambda g: log.append("second") or g * 3))
        y.sin().sum().backward()
        return [x.grad, list(log)]
    differential(_x, step)


def test_retains_grad_next_to_a_tensor_hook():
    def step(st):
        x, _log = st
        x.grad = None
        y = x * 2
        y.retain_grad()
        y.register_hook(lambda g: g * 3)
        y.sin().sum().backward()
        return [x.grad, y.grad]
    differential(_x, step)


def test_tensor_hook_on_a_tensor_used_twice_sees_the_sum():
    def step(st):
        x, log = st
        x.grad = None
        y = x * 2
        y.register_hook(lambda g: log.append(round(g.sum().item(), 4)) or g)
        (y.sin() + y.cos()).sum().backward()
        return [x.grad, list(log)]
    differential(_x, step)


def test_hooks_replaced_between_steps():
    """Same hook code, other closures, other results each step; then another function."""
    def step(st):
        x, log = st
        x.grad = None
        y = x * 2
        k = len(log)
        log.append(k)
        if k < 3:
            y.register_hook(lambda g: g * (k + 2))
        else:
            y.register_hook(lambda g: None)
            y.register_hook(lambda g: g - k)
        y.sin().sum().backward()
        return [x.grad]
    differential(_x, step, steps=5, captures=2)


def test_post_hook_returning_one_tensor_for_two_grads():
    """Note [Passed-through grads]: one tensor returned for two grads reaches two leaves."""
    def build():
        return [torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True)]

    def step(st):
        a, b = st
        a.grad = b.grad = None
        y = a * b
        y.grad_fn.register_hook(lambda gi, go: (gi[0], gi[0]))
        y.sum().backward()
        a.grad.mul_(2)             # must not change b.grad
        return [a.grad, b.grad, a.grad.data_ptr() == b.grad.data_ptr()]
    differential(build, step)


def test_module_full_backward_hook_replacing_grads():
    lin = []

    def build():
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
        m[0].register_full_backward_hook(lambda mod, gi, go: (gi[0] * 2,))
        m[2].register_full_backward_pre_hook(lambda mod, go: (go[0] + 1,))
        lin.append(m)
        return [m, torch.randn(3, 4, requires_grad=True)]

    def step(st):
        m, x = st
        m.zero_grad(set_to_none=True)
        x.grad = None
        m(x).pow(2).sum().backward()
        return [x.grad] + [p.grad for p in m.parameters()]
    differential(build, step)


def test_hooks_see_the_node_that_runs_them():
    """torch._C._current_autograd_node() inside a tensor hook, a node pre-hook and a post-hook
    is the node whose hooks run (eager's NodeGuard)."""
    def name():
        n = torch._C._current_autograd_node()
        return None if n is None else n.name()

    def step(st):
        x, log = st
        x.grad = None
        y = x * 2
        y.register_hook(lambda g: log.append(("tensor", name())))
        z = y.sin()
        z.grad_fn.register_prehook(lambda go: log.append(("pre", name())))
        z.grad_fn.register_hook(lambda gi, go: log.append(("post", name())))
        z.sum().backward()
        return [x.grad, list(log)]
    differential(_x, step)


# ---- node pre/post hooks (Note [One-pass node hook calls]) --------------------------------------

_BAD = {
    "none": lambda gs: None,
    "same": lambda gs: gs,
    "scaled": lambda gs: tuple(None if g is None else g * 3 for g in gs),
    "none value": lambda gs: (None,) + tuple(gs[1:]),
    "count": lambda gs: tuple(gs) + (gs[0],),
    "list": list,
    "dtype": lambda gs: (gs[0].double(),) + tuple(gs[1:]),
    "size": lambda gs: (gs[0].sum(),) + tuple(gs[1:]),
    "sparse": lambda gs: (gs[0].to_sparse(),) + tuple(gs[1:]),
    "not a tensor": lambda gs: (3,) + tuple(gs[1:]),
    "raises": lambda gs: 1 / 0,
}


@pytest.mark.parametrize("where", ["pre", "post"])
@pytest.mark.parametrize("what", sorted(_BAD))
def test_node_hook_results_are_eagers(where, what):
    """A node pre-hook (given the node's grad outputs) or post-hook (given grad_inputs and
    grad_outputs) returning nothing, its input, new values, a wrong count, a list, another
    dtype / size / layout, a non-tensor, or raising: eager's values or error, and no .grad
    changed by a backward that raised."""
    bad = _BAD[what]

    def build():
        return [torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True)]

    def step(st):
        a, b = st
        a.grad = b.grad = None
        y = (a * b).sin()
        z = y * 2
        if where == "pre":
            z.grad_fn.register_prehook(bad)
        else:
            y.grad_fn.register_hook(lambda gi, go: bad(gi))
        z.sum().backward()
        return [a.grad, b.grad]
    differential(build, step, allow_errors=True, captures=None)


def test_node_hooks_added_removed_replaced_between_steps():
    """Which hooks run is read from each step's dicts: one added to a dict the graph calls runs,
    one removed does not, new code recaptures."""
    def build():
        return [torch.randn(4, requires_grad=True), []]

    def step(st):
        x, log = st
        k = len(log)
        x.grad = None
        y = x.sin()
        z = y * 2
        hs = [z.grad_fn.register_prehook(lambda go: log.append("pre1") or (go[0] * 2,))]
        if k % 3 == 1:
            hs.append(z.grad_fn.register_prehook(lambda go: log.append("pre2") or None))
        if k % 3 == 2:
            hs[0].remove()
        if k % 2:
            y.grad_fn.register_hook(lambda gi, go: log.append("post") or (gi[0] + 1,))
        else:
            y.grad_fn.register_hook(lambda gi, go: (log.append("post-b"), None)[1])
        z.sum().backward()
        log.append("step")
        return [x.grad, list(log)]
    differential(build, step, steps=6, captures=None)


def test_module_full_backward_hooks_change_between_steps():
    """Module full backward hooks (a pre-hook on the output side, a post-hook on the input
    side): replacing grads, returning None, removed and re-registered between steps."""
    def build():
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
        return [m, torch.randn(3, 4, requires_grad=True), [0]]

    def step(st):
        m, x, n = st
        k = n[0]
        n[0] += 1
        m.zero_grad(set_to_none=True)
        x.grad = None
        handles = []
        if k % 3 != 2:
            handles.append(m[0].register_full_backward_hook(
                lambda mod, gi, go: (gi[0] * (k + 2),) if k % 2 else None))
        handles.append(m[2].register_full_backward_pre_hook(lambda mod, go: (go[0] + k,)))
        m(x).pow(2).sum().backward()
        for h in handles:
            h.remove()
        return [x.grad] + [p.grad for p in m.parameters()]
    differential(build, step, steps=6, captures=None)


# ---- hooked nodes read in C++, hook calls in C++ (walk/fastwalk.py Note [Hook entries in
# C++], calls/opaque.py Note [Hook calls in C++]) ----------------------------------------------

def test_tensor_hook_and_node_hooks_on_one_node():
    """A tensor hook, a node pre-hook and a post-hook on one node, changing from step to step:
    every kind runs, in eager's order (tensor hooks, then pre-hooks, then the node, then
    post-hooks), with each one's replacement grads."""
    def step(st):
        x, log = st
        k = len(log)
        x.grad = None
        y = x * 2
        z = y.sin()
        y.register_hook(lambda g: log.append(("tensor", k)) or g * 3)
        if k % 2 == 0:
            y.grad_fn.register_prehook(lambda go: log.append(("pre", k)) or (go[0] + 1,))
        if k % 3 != 1:
            y.grad_fn.register_hook(lambda gi, go: log.append(("post", k)) or
                                    tuple(None if g is None else g * 5 for g in gi))
        z.sum().backward()
        log.append("step")
        return [x.grad, list(log)]
    differential(_x, step, steps=6, captures=None)


@pytest.mark.parametrize("which", [0, 1, 2])
def test_tensor_hook_on_one_output_of_a_multi_output_node(which):
    """The hook dict is recorded at its output's slot: only that output's grad goes through it."""
    def step(st):
        x, log = st
        x.grad = None
        parts = (x * 2).split(2)        # three outputs of one SplitBackward0 (sizes 2, 2, 1)
        parts[which].register_hook(lambda g: log.append(tuple(g.shape)) or g * 10)
        sum((p.sin() * (i + 1)).sum() for i, p in enumerate(parts)).backward()
        return [x.grad, list(log)]
    differential(lambda: [torch.randn(5, requires_grad=True), []], step)


def test_hook_dict_of_a_kept_graph_mutated_between_backwards():
    """One graph (retain_graph=True), backward after backward: the tensor's own hook dict is
    changed in place between them -- a hook replaced by another closure of the same code,
    a second hook added, all removed, one again: each backward calls what the dict holds."""
    def build():
        x = torch.randn(4, requires_grad=True)
        y = x * 2
        return [x, y, y.sin().sum(), [], []]

    def step(st):
        x, y, loss, handles, log = st
        k = len(log)
        log.append(k)
        x.grad = None
        for h in handles:
            h.remove()
        handles.clear()
        if k != 3:
            handles.append(y.register_hook(lambda g, k=k: g * (k + 2)))
        if k in (2, 4):
            handles.append(y.register_hook(lambda g: g - 1))
        loss.backward(retain_graph=True)
        return [x.grad]
    differential(build, step, steps=6, captures=None)


@pytest.mark.both_backends     # Inductor indexes an opaque output by its promised strides
def test_tensor_hook_results_of_other_kinds():
    """A hook result that is not a plain tensor of the grad's type and size: a Parameter, a
    tensor that requires grad, a transposed (non-contiguous) tensor, a view of the grad --
    each goes through eager's checks and reaches the next node as eager's engine hands it.
    (Seen through grad() rather than a leaf's .grad, the transposed one's layout is a known
    deviation on its first step: docs/semantics.md Known deviations, Note [Opaque output layout].)"""
    results = [
        lambda g: torch.nn.Parameter(g * 2),
        lambda g: (g * 2).requires_grad_(),
        lambda g: (g * 2).t().contiguous().t(),
        lambda g: g[:, :],
    ]

    def step(st):
        x, log = st
        k = len(log) % len(results)
        log.append(k)
        x.grad = None
        y = x * 2
        y.register_hook(results[k])
        z = y.sin()
        z.register_hook(lambda g: g + 0)
        z.sum().backward()
        return [x.grad, x.grad.requires_grad]
    differential(lambda: [torch.randn(3, 3, requires_grad=True), []], step, steps=8,
                 captures=None)


class _Identity(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return g


def test_post_hook_of_a_pass_through_node_gets_one_tensor_twice():
    """A node whose backward returns its grad (a module full backward hook's
    BackwardHookFunction, an identity Function) hands its post-hooks the same tensor as
    grad_input and grad_output; with Inductor the graph must pass one buffer twice, not two
    copies (backends/inductor.py _eager_strides)."""
    def build():
        return [torch.randn(8, 4, requires_grad=True), []]

    def step(st):
        x, log = st
        x.grad = None
        h = _Identity.apply((x * 2).sin())
        h.grad_fn.register_hook(lambda gin, gout: log.append(
            (gin[0] is gout[0], gin[0].data_ptr() == gout[0].data_ptr())) and None)
        (h * 3).sum().backward()
        out = [x.grad, list(log)]
        log.clear()
        return out
    differential(build, step)
