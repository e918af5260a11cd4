"""The C++ walk (walk/fastwalk.py, _fastwalk*.cpp) against the Python walk (walk/walk.py).

- every torch-internal C++ API it relies on still behaves as assumed (named when it moves);
- it returns what the Python walk returns (nodes, order, edges, input metadata, kinds, saved
  tensors and their keys, leaves, hooks) on programs covering every node kind;
- its signature distinguishes everything the Python signature does (OpInfo samples: equal C++
  keys imply equal Python signatures), and is stable across steps and retain_graph re-walks;
- compiled_bw works, with a clear log message, when the extension cannot be built.
The C++ walk is the default, so the whole suite runs with it (conftest.py fails the session if
it could not be loaded, and prints how many steps it walked); test_suites_pass_with_python_walk
runs the core suites with the Python walk (COMPILED_BW_FASTWALK=0).
"""
from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys

import pytest
import torch

import compiled_bw
from compiled_bw.graph import native
from compiled_bw.graph.nodes import OPAQUE
from compiled_bw.graph.saved import gradient_edge
from compiled_bw.walk import fastwalk
from compiled_bw.walk.walk import WalkUnsupported, walk_graph

pytestmark = pytest.mark.slow   # `pytest -m "not slow"` leaves it out

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def ext():
    prev = fastwalk._S.enabled
    if not fastwalk.enable_fastwalk(True):
        err = fastwalk.counters()["error"]
        if shutil.which("c++") is None and shutil.which("g++") is None:
            pytest.skip(f"no C++ compiler: the C++ walk cannot be built ({err})")
        pytest.fail(f"the C++ walk did not build or load with this torch ({torch.__version__}): "
                    f"{err}. walk/cpp/_fastwalk*.cpp use torch-internal headers; see the "
                    "list at the top of walk/cpp/_fastwalk.h for what may have moved.")
    fastwalk._S.enabled = prev
    return fastwalk._S.ext


# ---- the private C++ API, one check per assumption ----------------------------------------

def test_private_cpp_api(ext):
    a = torch.randn(3, 4, requires_grad=True)
    b = torch.randn(4, 2, requires_grad=True)
    mm = (a @ b).grad_fn
    addr = ext.node_address(mm)
    for attr in ("self", "mat2"):
        off = ext.saved_variable_address(getattr(mm, "_raw_saved_" + attr)) - addr
        assert 0 < off < 1 << 16, (
            f"MmBackward0._raw_saved_{attr} is not a SavedVariable inside the node (offset "
            f"{off}): the generated node layout or its Python binding moved")
    _, sizes, tensors = ext.compiled_args_of(mm)
    assert sizes == [4, 2, 2, 1, 3, 4, 4, 1], (
        f"Node::compiled_args of MmBackward0 no longer lifts its sym sizes/strides as size "
        f"inputs (got {sizes}): CompiledNodeArgs::collect(SymInt) moved")
    assert len(tensors) == 2 and tensors[0] is not None, (
        "compiled_args no longer unpacks saved tensors into TensorArgs.inputs")
    x = torch.randn(5, requires_grad=True)
    _, _, ts = ext.compiled_args_of((x * x).grad_fn)
    assert len(ts) == 1, "TensorArgs no longer deduplicates saved tensors by TensorImpl"
    cat = torch.cat([x, torch.zeros(3), x * 1]).grad_fn
    assert ext.compiled_args_of(cat)[1] == [5, 3, 5], (
        "CatBackward0's hidden input sizes are no longer visited by compiled_args")
    assert ext.probe_compiled_args(torch.autograd.graph.get_gradient_edge(x).node)[0], (
        "AccumulateGrad::compiled_args failed standalone")
    # hook_dicts: PyFunctionPreHook / PyFunctionPostHook::dict, what graph/hooks.py's
    # node_hooks reads instead of probing (the dicts torch gives Function._register_hook)
    n = (a * 2).grad_fn
    assert ext.hook_dicts(n) == (None, None)

    def pre(gs):
        return None

    def post(gi, go):
        return None
    n.register_prehook(pre)
    n.register_hook(post)
    d_pre, d_post = ext.hook_dicts(n)
    assert d_pre is not None and list(d_pre.values()) == [pre], (
        "PyFunctionPreHook::dict moved: graph/hooks.py node_hooks reads a node's pre-hooks")
    assert d_post is not None and list(d_post.values()) == [post], (
        "PyFunctionPostHook::dict moved: graph/hooks.py node_hooks reads a node's post-hooks")
    # hook_entries (fastwalk.py Note [Hook entries in C++]): Node::metadata() as
    # PyAnomalyMetadata::dict() is the dict `grad_fn.metadata` shows, where hooks.py records
    # a tensor's hook dict; each hook's identity, a plain function's __code__
    y = a * 3
    y.register_hook(pre)
    cw = ext.walk([(y.sum().grad_fn, 0)], {})
    hooked, entries = ext.hook_entries(cw, fastwalk._HOOK_NAMES, True, None)
    assert len(entries) == 1 and entries[0][1] == (((0, (pre.__code__,)),), (), None, None), (
        f"the C++ hook entry of a tensor hook is {entries}: Node::metadata() is no longer the "
        "PyAnomalyMetadata whose dict() `grad_fn.metadata` shows")
    assert list(hooked[entries[0][0]].tensor[0][0].values()) == [pre]
    # slots: register_hooks(SavedVariableHooks), our hooks recognized on a re-walk
    loss = (a @ b).tanh().sum()
    w = fastwalk.fast_walk([gradient_edge(loss)])
    slots = w.install()
    w2 = fastwalk.fast_walk([gradient_edge(loss)])
    assert w2.signature == w.signature, (
        "re-walk of a slotted graph changed the key: SavedVariable::retrieve_unpack_hook_data "
        "or has_hooks moved")
    slots.release(range(len(w.nodes)), len(w.nodes))
    with pytest.raises(RuntimeError, match="second time"):
        loss.backward()
    # Node::release_variables gives eager's error on a second backward
    loss = (a @ b).tanh().sum()
    w = fastwalk.fast_walk([gradient_edge(loss)])
    w.cw.release_variables(range(len(w.nodes)))
    with pytest.raises(RuntimeError, match="second time"):
        loss.backward()
    # release_node (hooked saved tensors, nodes.py Note [Hooked saved tensors]): frees the
    # SavedVariables with their hooks and packed objects, as eager's engine after a node
    import weakref

    class Packed:
        def __init__(self, t):
            self.t = t
    packed = []
    with torch.autograd.graph.saved_tensors_hooks(
            lambda t: packed.append(Packed(t)) or packed[-1], lambda p: p.t):
        mm = (a @ b).grad_fn
    refs = [weakref.ref(p) for p in packed]
    packed.clear()
    assert ext.saved_hooks_in(mm, ("self", "mat2")), "SavedVariable::has_hooks moved"
    ext.release_node(mm)
    assert all(r() is None for r in refs), "Node::release_variables kept the packed objects"


# ---- same results as the Python walk -------------------------------------------------------

class Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, s):
        ctx.save_for_backward(x)
        ctx.s = s
        return x * s

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * ctx.s + x * 0, None


def _mlp():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                            torch.nn.Linear(16, 4))
    return [m(torch.randn(3, 8)).pow(2).mean()]


def _transformer():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
    return [layer(torch.randn(2, 5, 16)).sum()]


def _custom_and_hooks():
    x = torch.randn(4, 3, requires_grad=True)
    w = torch.randn(3, 3, requires_grad=True)
    y = Scale.apply(x @ w, 2.0)
    y.register_hook(lambda g: g * 2)
    z = y.tanh()
    z.retain_grad()
    z.grad_fn.register_prehook(lambda gs: None)
    w.register_hook(lambda g: g)
    return [z.sum()]


def _hidden_state():
    x = torch.randn(5, requires_grad=True)
    idx = torch.tensor([0, 2, 2])
    c = torch.cat([x, torch.zeros(3), x * 2])            # CatBackward0 with an invalid edge
    s = x.as_strided((2,), (2,), 1)                      # class-level opaque
    i = x[idx]                                           # IndexBackward0: list of saved tensors
    return [c.sum() + s.sum() + (i * i).sum() + (x * 2.5).sum()]


def _two_roots():
    x = torch.randn(3, 3, requires_grad=True)
    y = x.exp()
    return [y.sum(), (y * x).mean()]


PROGRAMS = {"mlp": _mlp, "transformer": _transformer, "custom_and_hooks": _custom_and_hooks,
            "hidden_state": _hidden_state, "two_roots": _two_roots}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_walks_agree(ext, name):
    roots = PROGRAMS[name]()
    edges = [gradient_edge(r) for r in roots]
    p = walk_graph(edges)
    f = fastwalk.fast_walk(edges)
    assert len(f.nodes) == len(p.nodes)
    assert all(a is b for a, b in zip(f.nodes, p.nodes, strict=True)), "discovery order differs"
    assert f.edges == p.edges
    assert list(f.in_meta) == p.in_meta
    assert f.kinds == p.kinds
    assert f.root_edges == p.root_edges
    assert f.saved_node == p.saved_node
    assert f.slot_only == p.slot_only
    assert len(f.saved) == len(p.saved)
    for k, (a, b) in enumerate(zip(f.saved, p.saved, strict=True)):
        assert a.shape == b.shape and a.stride() == b.stride() and a.dtype == b.dtype, k
        assert a.data_ptr() == b.data_ptr(), f"saved {k} {p.saved_node[k]}: different storage"
    assert f.leaves.keys() == p.leaves.keys()
    assert all(f.leaves[i] is p.leaves[i] for i in p.leaves)
    assert f.hooks.keys() == p.hooks.keys()
    assert [h.signature() for h in f.hooks.values()] == [h.signature() for h in p.hooks.values()]


WALK_INTERFACE = ("install", "take_saved", "release_nodes", "accumulate", "leaf_observed",
                  "forward_streams", "run_native", "python_walk")


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_walks_answer_the_interface_alike(ext, name):
    # runtime/ never asks which walk it has (docs/ARCHITECTURE.md "The walk interface"): both
    # walks give the same answers, and the same saved tensors through take_saved
    roots = PROGRAMS[name]()
    edges = [gradient_edge(r) for r in roots]
    p, f = walk_graph(edges), fastwalk.fast_walk(edges)
    for w in (p, f):
        missing = [m for m in WALK_INTERFACE if not callable(getattr(w, m, None))]
        assert not missing, f"{type(w).__name__} lacks {missing}"
    assert p.leaf_observed() == f.leaf_observed()
    assert p.forward_streams() == f.forward_streams() == []
    assert p.python_walk(edges) is p
    assert f.python_walk(edges).signature == p.signature
    assert p.frees_saved_itself is False and f.frees_saved_itself is True
    bp, bf = [], []
    p.take_saved(bp)
    f.take_saved(bf)
    assert [t.data_ptr() for t in bp] == [t.data_ptr() for t in bf]
    assert f.saved == [], "the C++ walk's list is emptied in place (Note [Box ownership])"
    assert p.run_native() is False


def test_walks_agree_on_a_compiled_forward(ext):
    torch._dynamo.reset()
    f = torch.compile(lambda x, w: (x @ w).relu().sum(-1), backend="aot_eager")
    x = torch.randn(4, 3, requires_grad=True)
    w = torch.randn(3, 5, requires_grad=True)
    edges = [gradient_edge((f(x, w) * 2).sum())]
    p, fw = walk_graph(edges), fastwalk.fast_walk(edges)
    assert fw.saved_node == p.saved_node and fw.kinds == p.kinds and fw.edges == p.edges


# ---- the signature -------------------------------------------------------------------------

def _strip_opaque(w) -> tuple:
    """The Python signature without the saved values of nodes run opaquely for hidden state
    (the C++ key leaves their sizes out on purpose: the real node runs, nothing is baked in)."""
    sig = list(w.signature)
    for k, entry in enumerate(sig[:-1]):
        i = entry[0]
        if w.kinds[i].how == OPAQUE:
            sig[k] = entry[:4] + tuple(x for x in entry[4:] if x is None or (
                isinstance(x, tuple) and x and isinstance(x[0], torch.Size)))
    return tuple(sig)


def _graph(op, sample):
    import torch.utils._pytree as pytree
    from opinfo_sweep import _fresh
    inp, args, kwargs, _ = _fresh(sample)
    torch.manual_seed(0)
    out = op(inp, *args, **kwargs)
    outs = [o for o in pytree.tree_leaves(out)
            if isinstance(o, torch.Tensor) and o.requires_grad and o.grad_fn is not None]
    return outs


def _both(outs):
    edges = [gradient_edge(o) for o in outs]
    res = []
    for walker in (walk_graph, fastwalk.fast_walk):
        try:
            res.append(walker(edges))
        except (WalkUnsupported, RuntimeError) as e:
            res.append(f"{type(e).__name__}: {e}")
    return res


def test_signature_distinguishes_what_python_does_opinfo(ext):
    """Across OpInfo samples (float32/float64, up to 4 per op): equal C++ keys imply equal
    Python signatures; the same sample built twice gives equal C++ keys; both walks reject the
    same graphs."""
    from opinfo_sweep import autograd_ops, op_id
    seen: dict = {}       # C++ signature -> (Python signature, where)
    n_graphs = finer = 0
    py_seen: dict = {}
    for op in autograd_ops():
        for dtype in (torch.float32, torch.float64):
            if dtype not in op.supported_backward_dtypes("cpu"):
                continue
            try:
                samples = list(op.sample_inputs("cpu", dtype, requires_grad=True))[:4]
            except Exception:  # noqa: BLE001 -- the op cannot make samples here
                continue
            for k, sample in enumerate(samples):
                where = f"{op_id(op)} {dtype} sample {k}"
                try:
                    outs, outs2 = _graph(op, sample), _graph(op, sample)
                except Exception:  # noqa: BLE001 -- eager rejects the sample
                    continue
                if not outs:
                    continue
                p, f = _both(outs)
                if isinstance(p, str) or isinstance(f, str):
                    assert isinstance(p, str) and isinstance(f, str), (
                        f"{where}: one walk rejects the graph: python {p if isinstance(p, str) else 'ok'}, "
                        f"c++ {f if isinstance(f, str) else 'ok'}")
                    continue
                n_graphs += 1
                f2 = fastwalk.fast_walk([gradient_edge(o) for o in outs2])
                assert f2.signature == f.signature, f"{where}: C++ key not stable across steps"
                ps = _strip_opaque(p)
                old = seen.setdefault(f.signature, (ps, where))
                assert old[0] == ps, (f"equal C++ keys but different Python signatures: "
                                      f"{old[1]} vs {where}")
                other = py_seen.setdefault(ps, f.signature)
                finer += other != f.signature
    assert n_graphs > 1000
    print(f"{n_graphs} graphs, {len(seen)} distinct C++ keys, {len(py_seen)} distinct Python "
          f"signatures, {finer} graphs the C++ key tells apart where Python's does not")


def test_signature_stable_across_steps_and_retained_rewalks(ext):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
    sigs = []
    for _ in range(3):
        loss = layer(torch.randn(2, 5, 16)).sum()
        w = fastwalk.fast_walk([gradient_edge(loss)])
        sigs.append(w.signature)
        w.install()                       # as a capture does
        sigs.append(fastwalk.fast_walk([gradient_edge(loss)]).signature)
    assert all(s == sigs[0] for s in sigs)
    assert len({hash(s) for s in sigs}) == 1


def test_signature_sees_hidden_layout_and_dedup(ext):
    """Finer than the Python signature: saved state Python cannot read is in the key."""
    x = torch.randn(5, requires_grad=True)
    y = torch.randn(5, requires_grad=True)
    same = fastwalk.fast_walk([gradient_edge((x * x).sum())]).signature
    diff = fastwalk.fast_walk([gradient_edge((x * y).sum())]).signature
    assert same != diff


def test_miss_reason_names_the_node(ext):
    from compiled_bw.walk.fastwalk import describe
    a = torch.randn(3, 4, requires_grad=True)
    s0 = fastwalk.fast_walk([gradient_edge((a * 2).sum())]).signature
    assert s0 == fastwalk.fast_walk([gradient_edge((a * 3).sum())]).signature, (
        "a saved 0-dim tensor's value is a graph input, not part of the key")
    s1 = fastwalk.fast_walk([gradient_edge(a.pow(2).sum())]).signature
    s2 = fastwalk.fast_walk([gradient_edge(a.pow(3).sum())]).signature
    assert s1 != s2
    assert "PowBackward0" in describe(s1, s2) and "saved" in describe(s1, s2), describe(s1, s2)
    s3 = fastwalk.fast_walk([gradient_edge(a[:2].pow(2).sum())]).signature
    assert "graph size" in describe(s1, s3) or "node" in describe(s1, s3), describe(s1, s3)


def test_enabled_end_to_end(ext):
    from differential import differential
    prev = fastwalk._S.enabled
    fastwalk._S.enabled = True
    try:
        before = fastwalk._S.fast_walks

        def build():
            torch.manual_seed(0)
            return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))

        def step(m):
            m.zero_grad()
            m(torch.randn(3, 4)).pow(2).sum().backward()
            return [p.grad for p in m.parameters()]
        differential(build, step, steps=3, captures=1)
        assert fastwalk._S.fast_walks >= before + 3
    finally:
        fastwalk._S.enabled = prev


def test_subclass_gives_up_to_the_python_walk(ext):
    """A tensor subclass in the graph: the C++ walk gives up, the Python walk flattens it and
    the backward is compiled (tests/test_subclass.py covers the subclass cases)."""
    from differential import differential
    from torch.testing._internal.two_tensor import TwoTensor
    prev = fastwalk._S.enabled
    fastwalk._S.enabled = True
    try:
        before = fastwalk.counters()["gave_up"].get("tensor subclass in the graph", 0)

        def build():
            a = torch.randn(3, 4)
            return [TwoTensor(a, a * 2).requires_grad_(), torch.randn(4, 2, requires_grad=True)]

        def step(ps):
            x, w = ps
            x.grad = w.grad = None
            (x @ w).tanh().sum().backward()
            return [(type(p.grad).__name__, p.grad.a, p.grad.b) for p in ps]
        differential(build, step, steps=3, captures=1)
        assert fastwalk.counters()["gave_up"]["tensor subclass in the graph"] >= before + 3
    finally:
        fastwalk._S.enabled = prev


def test_checkpointed_graph_walks_in_cpp_once_then_in_python(ext, monkeypatch):
    """Note [Remembered give-up]: a graph the C++ walk gives up on (checkpoint regions) is
    not walked in C++ again every step; a step with the same roots that needs no Python walk
    sends the next one back to C++."""
    import torch.utils.checkpoint as cp
    from differential import differential
    monkeypatch.setattr(fastwalk._S, "enabled", True)
    tries = []
    real = fastwalk.fast_walk

    def counting(root_edges):
        tries.append(1)
        return real(root_edges)
    monkeypatch.setattr(fastwalk, "fast_walk", counting)

    def build():
        return [torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 4)),
                torch.randn(3, 4)]

    def step(st, checkpointed=True):
        m, x = st
        m.zero_grad()
        h = cp.checkpoint(m, x, use_reentrant=False) if checkpointed else m(x)
        h.pow(2).sum().backward()
        return [p.grad for p in m.parameters()]
    differential(build, step, steps=4, captures=1)
    assert len(tries) == 1, f"the C++ walk was tried {len(tries)} times in 4 steps"
    tries.clear()
    with compiled_bw.enable():
        st = build()
        step(st)                        # remembered: Python walk, no C++ try
        step(st, checkpointed=False)    # same roots, no region: Python walk, forgotten
        step(st, checkpointed=False)    # C++
    assert len(tries) == 1 and fastwalk._S.python_roots == {}


# ---- optional ------------------------------------------------------------------------------

def test_unbuildable_extension_falls_back_with_a_log_message(monkeypatch, caplog):
    import torch.utils.cpp_extension as cpp

    def broken(*a, **k):
        raise RuntimeError("Error building extension 'compiled_bw_fastwalk'\nx.cpp:1: error: boom")
    monkeypatch.setattr(cpp, "load", broken)
    monkeypatch.setattr(fastwalk, "_built", lambda d: None)    # not built yet: torch builds it
    fresh = native._State()         # (the walk and the modules below it read it)
    monkeypatch.setattr(fastwalk, "_S", fresh)
    monkeypatch.setattr(native, "_S", fresh)
    fastwalk._S.enabled = True
    with caplog.at_level(logging.WARNING, logger="compiled_bw"):
        assert not fastwalk.in_use()
    assert "C++ walk is unavailable" in caplog.text and "boom" in caplog.text
    w = torch.randn(3, requires_grad=True)
    compiled_bw.reset()
    with compiled_bw.enable():
        (w.exp() * 2).sum().backward()
    assert compiled_bw.stats().captures == 1 and fastwalk._S.py_walks == 0
    assert isinstance(fastwalk.walk([gradient_edge(w.exp().sum())]).signature, tuple)


def test_a_built_walk_loads_without_torchs_loader(monkeypatch):
    """Note [Loading a built walk]: with the build's source stamp matching, the .so is imported
    directly; a stamp of other sources sends it to torch's loader (which rebuilds)."""
    if fastwalk.load() is None:
        pytest.skip("the C++ walk is unavailable here")
    d = fastwalk.build_dir()
    assert fastwalk._built(d) is not None
    monkeypatch.setattr(fastwalk, "source_hash", lambda: "other sources")
    assert fastwalk._built(d) is None


def test_the_source_hash_covers_every_file_the_build_reads(tmp_path, monkeypatch):
    """The extension is built from one unit that includes the job files: an edit to any file
    in walk/cpp (a job file, the unit, the header) must change the source hash, or a process
    would load the stale build (Note [Loading a built walk]); and the unit must include every
    job file, or the build would lack its functions."""
    import shutil
    cpp = os.path.dirname(fastwalk._UNIT)
    copy = tmp_path / "cpp"
    shutil.copytree(cpp, copy)
    moved = lambda p: str(copy / os.path.basename(p))  # noqa: E731
    monkeypatch.setattr(fastwalk, "_SRC", [moved(p) for p in fastwalk._SRC])
    monkeypatch.setattr(fastwalk, "_HEADERS", [moved(p) for p in fastwalk._HEADERS])
    before = fastwalk.source_hash()
    for name in sorted(os.listdir(copy)):
        with open(copy / name, "a") as f:
            f.write("\n// edited\n")
        after = fastwalk.source_hash()
        assert after != before, f"walk/cpp/{name} is not in fastwalk.source_hash(): an edit to it would not rebuild"
        before = after
    with open(fastwalk._UNIT) as f:
        unit = f.read()
    for p in fastwalk._SRC:
        assert f'#include "{os.path.basename(p)}"' in unit, f"{fastwalk._UNIT} does not include {p}"


def test_suites_pass_with_python_walk():
    """The C++ walk is the default; the Python walk (COMPILED_BW_FASTWALK=0, and the fallback
    when the extension cannot be built) runs the core suites too."""
    env = dict(os.environ, COMPILED_BW_FASTWALK="0", PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                        "tests/test_signature.py", "tests/test_core.py", "tests/test_memory.py",
                        "tests/test_hooks_core.py"],
                       cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "C++ walk:" not in r.stdout, r.stdout[-2000:]


def test_threads_walk_and_run_concurrently(ext):
    """Several threads under enable() at once (the C++ walk's per-walk state is thread-local;
    the cache and stats are shared): every thread's grads equal eager's, over cache hits."""
    import threading

    def model(seed):
        torch.manual_seed(seed)
        return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(),
                                   torch.nn.LayerNorm(32), torch.nn.Linear(32, 4)), \
            torch.randn(8, 16)

    def run(m, x, out, steps=20):
        for _ in range(steps):
            m.zero_grad(set_to_none=True)
            m(x).pow(2).sum().backward()
        out.extend(p.grad.clone() for p in m.parameters())

    expected = []
    for seed in range(4):
        m, x = model(seed)
        run(m, x, expected_seed := [])
        expected.append(expected_seed)
    compiled_bw.reset()
    results, errors = [[] for _ in range(4)], []
    models = [model(seed) for seed in range(4)]   # here: the global RNG is not thread-safe

    def worker(seed):
        try:
            m, x = models[seed]
            with compiled_bw.enable(backend="eager", strict=True):
                run(m, x, results[seed])
        except Exception as e:  # noqa: BLE001 -- reported below
            errors.append(e)
    threads = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for want, got in zip(expected, results, strict=True):
        for a, b in zip(want, got, strict=True):
            torch.testing.assert_close(b, a)
    st = compiled_bw.stats()
    # one capture: threads that miss together wait for it (run.py) instead of recapturing
    assert (st.fallbacks, st.captures, st.cache_hits) == (0, 1, 79), st


def test_build_dir_is_keyed_by_what_the_binary_depends_on(monkeypatch):
    # keyed by the torch version alone, two virtual environments with the same torch
    # rebuilt each other's extension (the include paths are part of the build)
    from compiled_bw.walk import fastwalk
    here = fastwalk.build_key()
    assert here.startswith("torch" + torch.__version__.replace("+", "_"))
    monkeypatch.setattr(torch, "__file__", "/elsewhere/venv/site-packages/torch/__init__.py")
    assert fastwalk.build_key() != here
    monkeypatch.undo()
    monkeypatch.setattr(torch.version, "git_version", "0" * 40)
    assert fastwalk.build_key() != here
    monkeypatch.undo()
    # another checkout of the package (its own sources): its own build
    monkeypatch.setattr(fastwalk, "_SRC", ["/elsewhere/checkout/compiled_bw/walk/cpp/x.cpp"])
    assert fastwalk.build_key() != here


def test_run_leaf_runs_an_accumulate_grad_as_the_engine(ext):
    """walk/cpp/_fastwalk_run.cpp run_leaf (delivery points): Node hook lists and call order of
    engine.cpp's call_function (ENGINE.md 4.10); a Python hook's exception passes through."""
    x = torch.randn(3, requires_grad=True)
    node = torch.autograd.graph.get_gradient_edge(x).node
    assert not ext.leaves_observed([node])
    log = []
    x.register_hook(lambda g: log.append("tensor") or (None if g is None else g * 2))
    node.register_prehook(lambda g: log.append("pre"))
    x.register_post_accumulate_grad_hook(lambda p: log.append(("post-acc", p.grad.sum().item())))
    node.register_hook(lambda gi, go: log.append(
        ("post", gi, None if go[0] is None else go[0].sum().item())))
    assert ext.leaves_observed([node])
    ext.run_leaf(node, torch.ones(3))
    assert log == ["tensor", "pre", ("post-acc", 6.0), ("post", (), 6.0)], log
    assert x.grad.sum().item() == 6.0
    log.clear()
    ext.run_leaf(node, None)     # no grad: hooks run, nothing accumulates (ENGINE.md 4.10)
    assert log == ["tensor", "pre", ("post-acc", 6.0), ("post", (), None)], log

    def boom(p):
        raise KeyError("from a hook")
    x.register_post_accumulate_grad_hook(boom)
    with pytest.raises(KeyError, match="from a hook"):
        ext.run_leaf(node, torch.ones(3))


def test_release_nodes_frees_a_custom_functions_saved_tensors(ext):
    """The Python walk's retain_graph=False for custom Functions (walk/fastwalk.py install):
    Node::release_variables on the PyNode, after which ctx.saved_tensors raises eager's error."""
    class Saves(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g

    x = torch.randn(3, requires_grad=True)
    node = Saves.apply(x).grad_fn
    assert node.saved_tensors[0] is x
    ext.release_nodes([node])
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        _ = node.saved_tensors


def test_a_build_killed_half_way_does_not_block_later_processes(ext, tmp_path):
    # Note [Stale build lock] (walk/fastwalk.py): torch's `lock` file left by a dead build
    # made every later process wait forever.  A copy of the built dir plus such a file.
    src = fastwalk.build_dir()
    base = tmp_path / "build"
    dst = base / os.path.basename(src)
    shutil.copytree(src, dst, symlinks=True)
    for stale in ("lock", "compiled_bw.lock"):
        (dst / stale).unlink(missing_ok=True)
    (dst / "lock").write_text("")
    env = {**os.environ, "COMPILED_BW_BUILD_DIR": str(base)}
    code = ("from compiled_bw.walk import fastwalk; "
            "assert fastwalk.load() is not None, fastwalk.counters()")
    try:
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=120, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail("loading the C++ walk waited on a stale build lock")
    assert r.returncode == 0, r.stderr[-2000:]
