"""Loud checks of every private torch API compiled_bw relies on (torch 2.13).

Every private symbol is imported in compiled_bw/torchapi/ (autograd.py, dynamo.py,
inductor.py) and listed there with its user (`USED`): test_private_symbol_exists resolves each
required one and names what moved and who uses it; an `OPTIONAL` one (whose absence turns a named
feature off, e.g. the SAC storage markers torch 2.11 lacks) must resolve or have its feature
off with a reason naming the release (test_optional_symbol_exists_or_its_feature_is_off);
test_private_torch_api_only_in_torchapi keeps it so.
The tests above them check behaviour that private API must still have (saved-tensor hooks on
raw SavedVariables, the node table, Inductor's hooks); test_uninstall_gives_torch_back checks
that every patch of torch is undone by compiled_bw.uninstall().
"""
import ast
import contextlib
import logging
import os
import pathlib
import re
import subprocess
import sys
import types

import pytest
import torch

from compiled_bw.graph import saved


def _mm_node():
    a = torch.randn(3, 4, requires_grad=True)
    b = torch.randn(4, 2, requires_grad=True)
    return (a @ b).grad_fn


def test_autograd_engine_entry_point_exists():
    assert callable(getattr(torch.autograd, "_engine_run_backward", None)), (
        "torch.autograd._engine_run_backward moved: compiled_bw/api.py intercepts it")


def test_raw_saved_tensors_accept_hooks():
    node = _mm_node()
    assert type(node).__name__ == "MmBackward0"
    raw = saved.raw_saved(node, "self")
    assert hasattr(raw, "register_hooks"), "SavedTensor.register_hooks moved (graph/saved.py)"
    slot = saved.Slot()
    raw.register_hooks(slot.pack, slot.unpack)
    assert slot.value is not None, "register_hooks no longer calls pack at registration"
    slot.placeholder = torch.zeros(3, 4)
    assert node._saved_self.eq(0).all(), "unpack hook result not returned by _saved_X"
    slot.placeholder = None
    slot.release()
    with pytest.raises(RuntimeError, match="second time"):
        _ = node._saved_self


def test_saved_tensor_unpack_hook_is_readable():
    """saved.foreign_saved_hooks reads SavedTensor.unpack_hook (None without hooks), of built-in
    nodes' _raw_saved_<attr> and custom Functions' _raw_saved_tensors, without unpacking."""
    node = _mm_node()
    assert saved.raw_saved(node, "self").unpack_hook is None, "SavedTensor.unpack_hook moved"
    assert not saved.foreign_saved_hooks(node, ("self", "mat2"))
    slot = saved.Slot()
    saved.raw_saved(node, "self").register_hooks(slot.pack, slot.unpack)
    assert not saved.foreign_saved_hooks(node, ("self", "mat2")), "our Slot is not foreign"
    unpacked = []

    class Keep(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g
    x = torch.randn(2, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: unpacked.append(1) or t):
        y, z = x.exp(), Keep.apply(x)
    assert saved.foreign_saved_hooks(y.grad_fn, ("result",))
    assert saved.foreign_saved_hooks(z.grad_fn, ())
    assert unpacked == [], "reading unpack_hook ran the unpack hook"


def test_input_metadata_and_sequence_nr():
    node = _mm_node()
    (m,) = saved.input_metadata(node)
    for attr in ("shape", "dtype", "device", "is_nested_tensor"):
        assert hasattr(m, attr), f"_InputMetadata.{attr} moved (walk/walk.py)"
    assert tuple(m.shape) == (3, 2)
    assert isinstance(saved.sequence_nr(node), int), "Node._sequence_nr() moved"
    assert isinstance(node.metadata, dict), "Node.metadata moved (graph/saved.py Slots)"


def test_accumulate_grad_and_gradient_edge():
    x = torch.randn(2, requires_grad=True)
    node, nr = saved.gradient_edge(x)
    assert type(node).__name__ == "AccumulateGrad" and nr == 0
    assert node.variable is x, "AccumulateGrad.variable moved"
    assert saved.sequence_nr(node) == 2**64 - 1


def test_node_table_matches_this_torch():
    """The committed node table of the installed release (graph/node_tables/torch_X_Y.py) is
    what this torch's derivatives.yaml gives; fails naming the release and the node classes
    that are missing, extra or different."""
    pytest.importorskip("yaml")
    from compiled_bw.graph import node_table
    rel = ".".join(map(str, node_table.release()))
    assert node_table.MISSING is None, (
        f"torch {rel} has no committed node table ({node_table.MISSING}); committed: "
        f"{[f'{a}.{b}' for a, b in node_table.committed()]}")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import gen_node_table as g; "
            "print(repr(g.build_table()))")
    out = subprocess.run([sys.executable, "-c", code, os.path.join(root, "tools")],
                         capture_output=True, text=True, check=True).stdout
    fresh = ast.literal_eval(out)
    table = node_table.GENERATED
    missing = sorted(set(fresh) - set(table))
    extra = sorted(set(table) - set(fresh))
    changed = sorted(n for n in set(fresh) & set(table) if fresh[n] != table[n])
    assert not (missing or extra or changed), (
        f"torch {torch.__version__}'s derivatives.yaml differs from the committed node table for "
        f"torch {rel} (compiled_bw/graph/node_tables/{node_table.module_name(node_table.release())}"
        f".py): missing {missing}, not in this torch {extra}, different {changed}; run python "
        "tools/gen_node_table.py --write and review the diff")


def test_node_tables_load_by_release(monkeypatch, tmp_path):
    """Every committed table loads and is picked for its own release; a release without one
    gets its own, generated and cached (never a neighbour's); where generating fails, none,
    and a MISSING reason that names the release (Note [A node table for every release])."""
    from compiled_bw.graph import node_table
    have = node_table.committed()
    assert (2, 13) in have and (2, 11) in have, have
    assert node_table.release("2.11.0+cu130") == (2, 11)
    assert node_table.release("2.15.0") == (2, 15)
    for rel in have:
        monkeypatch.setattr(node_table, "release", lambda v=None, r=rel: r)
        gen, used, missing = node_table._load()
        assert used == rel and missing is None and "MmBackward0" in gen
    monkeypatch.setattr(node_table, "release", lambda v=None: (2, 12))
    monkeypatch.setenv("COMPILED_BW_BUILD_DIR", str(tmp_path))
    gen, used, missing = node_table._load()
    assert used == (2, 12) and missing is None and "MmBackward0" in gen, (used, missing)
    assert list(tmp_path.glob("node_table-*.txt")), "the generated table is not cached"
    assert node_table._load()[0] == gen         # read back from the cache

    from compiled_bw.graph import node_table_gen

    def no_yaml():
        raise ImportError("No module named 'yaml'")
    monkeypatch.setattr(node_table_gen, "build_table", no_yaml)
    monkeypatch.setenv("COMPILED_BW_BUILD_DIR", str(tmp_path / "empty"))
    gen, used, missing = node_table._load()
    assert gen == {} and "torch 2.12" in missing and "yaml" in missing, missing


def test_dispatch_tls_restores_autograd_inside_custom_ops():
    from compiled_bw.core import dispatch_tls
    assert len(dispatch_tls.KEYS) >= 4, "DispatchKey names moved (core/dispatch_tls.py)"
    snap = dispatch_tls.snapshot()
    seen = []

    @torch.library.custom_op("compiled_bw_test::probe", mutates_args=())
    def probe(x: torch.Tensor) -> torch.Tensor:
        with dispatch_tls.restored(snap), torch.enable_grad():
            a = torch.ones(2, requires_grad=True)
            seen.append((a * 2).requires_grad)
        return x.clone()
    probe(torch.ones(1))
    assert seen == [True], "autograd still excluded inside a custom op after restore"
    assert dispatch_tls.snapshot() == snap


def test_dispatch_tls_kept_restores_both_sets_even_on_error():
    """core/dispatch_tls.py kept() (torch._C._ForceDispatchKeyGuard entered with the current
    _dispatch_tls_local_include_set / _exclude_set): what its body leaves excluded or included
    is undone on exit, also when the body raises."""
    from compiled_bw.core import dispatch_tls
    from compiled_bw.torchapi import autograd as ta
    k, inc_k = ta.DispatchKey.ADInplaceOrView, ta.DispatchKey.PythonTLSSnapshot
    before = (ta.dispatch_tls_local_include_set(), ta.dispatch_tls_local_exclude_set())
    try:
        with dispatch_tls.kept():
            ta.dispatch_tls_set_dispatch_key_excluded(k, True)
            torch._C._dispatch_tls_set_dispatch_key_included(inc_k, True)
            assert ta.dispatch_tls_is_dispatch_key_excluded(k)
            raise ValueError("body failed")
    except ValueError:
        pass
    assert not ta.dispatch_tls_is_dispatch_key_excluded(k)
    assert not torch._C._dispatch_tls_is_dispatch_key_included(inc_k)
    assert (ta.dispatch_tls_local_include_set(), ta.dispatch_tls_local_exclude_set()) == before
    assert (torch.ones(2, requires_grad=True) * 2).requires_grad


def test_dispatch_tls_restorer_compares_exclude_sets():
    """core/dispatch_tls.py Restorer: DispatchKeySet equality tells an unchanged state apart,
    and the restore works on every call, not only the first."""
    from compiled_bw.core import dispatch_tls
    snap = dispatch_tls.snapshot()
    rest = dispatch_tls.Restorer(snap)
    seen = []

    @torch.library.custom_op("compiled_bw_test::probe2", mutates_args=())
    def probe(x: torch.Tensor) -> torch.Tensor:
        changed = rest.enter()
        try:
            with torch.enable_grad():
                seen.append((torch.ones(2, requires_grad=True) * 2).requires_grad)
        finally:
            dispatch_tls.undo(changed)
        seen.append(bool(changed))
        return x.clone()
    for _ in range(3):
        probe(torch.ones(1))
    assert seen == [True, True] * 3, seen
    assert dispatch_tls.snapshot() == snap
    a = dispatch_tls._exclude_set()
    assert a == dispatch_tls._exclude_set() and not a != dispatch_tls._exclude_set()


def test_subclass_flatten_helpers():
    """graph/subclass.py: torch's flatten helpers and the Python dispatch key test."""
    from torch.testing._internal.two_tensor import TwoTensor

    from compiled_bw.graph import subclass
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    t = TwoTensor(TwoTensor(a, b), TwoTensor(b, a))
    flat = subclass.flatten([t, a])
    assert [x is y for x, y in zip(flat, [a, b, b, a, a], strict=True)] == [True] * 5, (
        "torch._subclasses.fake_tensor.get_plain_tensors no longer flattens depth first")
    (lay,) = subclass.layouts_of([t])
    (back,) = subclass.rebuild((lay,), flat[:4])
    assert type(back) is TwoTensor and back.a.b is b and back.b.a is b
    assert subclass.python_dispatch(t) and not subclass.python_dispatch(a), (
        "torch._C._dispatch_keys(t).has(DispatchKey.Python) no longer tells __torch_dispatch__ "
        "subclasses apart (graph/subclass.py python_dispatch)")


def test_inductor_input_size_asserts_hook():
    pytest.importorskip("torch._inductor.compile_fx")
    from torch._inductor.codegen import wrapper

    from compiled_bw.backends import inductor
    assert hasattr(wrapper, "PythonWrapperCodegen") and hasattr(
        wrapper.PythonWrapperCodegen, "codegen_input_size_asserts"), (
        "Inductor's PythonWrapperCodegen.codegen_input_size_asserts moved: "
        "backends/inductor.py Note [Inductor: no input asserts] skips input asserts through it")
    assert wrapper.PythonWrapperCodegen.codegen_input_size_asserts is \
        inductor._maybe_input_size_asserts


def test_fakes_as_they_are():
    # torchapi/dynamo.py fakes_as_they_are: FakeTensorConverter.set_tensor_memo makes from_tensor
    # of a fake of the mode return that fake, not a new one (make_fx's inputs in the compile
    # worker: no storage-bound guards)
    from compiled_bw.torchapi.dynamo import fakes_as_they_are, symbolic_fakes
    # (torch 2.15's from_tensor already returns a fake of its own mode as it is; 2.11-2.14's
    # make a new one, which is what fakes_as_they_are prevents)
    mode, _, (a, b) = symbolic_fakes([torch.randn(4, 6), torch.randn(4, 6)[1:]], [{0}, {0}])
    fakes_as_they_are([a, b, 3])
    assert mode.from_tensor(a) is a and mode.from_tensor(b) is b


def test_size_hints_and_equality_guards():
    # torchapi/dynamo.py sym_parts, hint_of, guard_equal (trace/dynamic.py Note [View sizes
    # tied to the grad's]): SymInt.node.expr/.shape_env, ShapeEnv.guarding_hint_or_throw and
    # ShapeEnv.evaluate_expr making a replacement of an equality guard
    from compiled_bw.torchapi.dynamo import guard_equal, hint_of, sym_parts, symbolic_fakes
    _, env, (a, b) = symbolic_fakes([torch.randn(4, 6), torch.randn(24)], [{0, 1}, {0}])
    (ea, env_a), (eb, _) = sym_parts(a.shape[0] * a.shape[1]), sym_parts(b.shape[0])
    assert env_a is env and hint_of(env, ea) == 24 and hint_of(env, eb) == 24
    guard_equal(env, eb, ea)
    assert sym_parts(b.shape[0])[0] == ea, "the equality guard made no replacement"
    assert len(env.guards) == 1


@pytest.mark.slow
def test_inductor_artifact_round_trip():
    # backends/inductor_artifact.py: GraphPickler, CompiledFxGraph's (de)serialization and
    # post_compile -- what the background compile worker and this process exchange.
    pytest.importorskip("torch._inductor.compile_fx")
    from torch.fx.experimental.proxy_tensor import make_fx

    from compiled_bw.backends import inductor_artifact
    from compiled_bw.backends.inductor import compile_inductor
    from compiled_bw.core.thread import SitesOnly, current_step

    a, b = torch.randn(4, 3), torch.randn(3)
    gm = make_fx(lambda x, y: [(x * y).tanh().sum(0)], tracing_mode="fake")(a, b)
    try:
        gm2, fakes, sites = inductor_artifact.load_graph(inductor_artifact.dump_graph(gm, []))
    except Exception as e:
        raise AssertionError(f"torch.fx._graph_pickler.GraphPickler moved or changed: {e}") from e
    assert sites == [] and [tuple(f.shape) for f in fakes] == [(4, 3), (3,)]
    with current_step(SitesOnly([])):
        fn = compile_inductor(gm2, fakes)
    no_entry = ("no C entry point in a C++-wrapper graph {}: the generated module no longer has "
                "`call = _wrap_func(inductor_entry)` (torch._inductor.codegen.cpp_wrapper_cpu, "
                "codecache.CppWrapperCodeCache), or post_compile wrapped `call`; runtime/run.py "
                "Note [C++ hit path] is then never taken")
    assert inductor_artifact.native_entry(fn) is not None, no_entry.format("just compiled")
    try:
        data = inductor_artifact.dump_compiled(fn)
        loaded = inductor_artifact.load_compiled(data, fakes)
    except Exception as e:
        raise AssertionError(
            "CompiledFxGraph.prepare_for_serialization / after_deserialization / post_compile "
            f"(torch._inductor.output_code) moved or changed: {e}") from e
    assert inductor_artifact.native_entry(loaded) is not None, no_entry.format("loaded")
    (out,) = loaded([a, b])
    torch.testing.assert_close(out, (a * b).tanh().sum(0))
    cache_dir, config = inductor_artifact.setting(None)
    assert isinstance(cache_dir, str) and isinstance(config, dict), (
        "torch._inductor.runtime.cache_dir_utils.cache_dir or config.save_config_portable moved")
    with inductor_artifact.applied(cache_dir, config):
        pass


def test_no_native_entry_for_a_graph_with_tensor_constants():
    # backends/inductor_artifact.py native_entry: a C++-wrapper graph holding tensor constants
    # (a spliced AOT backward loaded from AOTAutograd's cache) gets them appended to its inputs
    # by the generated `call` (`constants_tensor`); the C++ hit path passes only the walk's
    # tensors, so the entry would read past them (it segfaulted).  Both signs must still hold.
    pytest.importorskip("torch._inductor.compile_fx")
    from torch.fx.experimental.proxy_tensor import make_fx

    from compiled_bw.backends import inductor_artifact
    from compiled_bw.backends.inductor import compile_inductor
    from compiled_bw.core.thread import SitesOnly, current_step

    const = torch.randn(1000)       # Inductor inlines small constants into its kernels
    gm = make_fx(lambda x: [torch.ops.aten.lift_fresh.default(const) * x], tracing_mode="fake")(
        torch.randn(1000))
    assert any(n.op == "get_attr" for n in gm.graph.nodes)
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode() as mode:
        fakes = [mode.from_tensor(torch.randn(1000))]
    with current_step(SitesOnly([])):
        fn = compile_inductor(gm, fakes)
    assert getattr(fn, "constants", None), "CompiledFxGraph.constants moved (native_entry reads it)"
    assert "constants_tensor" in fn.current_callable.__code__.co_varnames, (
        "the C++ wrapper's `call` no longer appends constants as `constants_tensor` "
        "(torch._inductor.codegen.cpp_wrapper_cpu): check what native_entry must pass")
    assert inductor_artifact.native_entry(fn) is None
    x = torch.randn(1000)
    torch.testing.assert_close(fn([x])[0], const * x)


def test_grad_dtype_of_a_leaf_is_readable():
    """graph/saved.py input_meta: `_input_metadata` does not show a leaf's grad_dtype."""
    x = torch.randn(2, requires_grad=True)
    node, _ = saved.gradient_edge(x)
    assert type(node) is torch._C._functions.AccumulateGrad, "AccumulateGrad class moved"
    assert saved.input_meta(node) == (((2,), torch.float32, torch.device("cpu")),)
    x.grad_dtype = None
    assert saved.input_meta(node) == (((2,), torch.float32, torch.device("cpu"), None),)
    x.grad_dtype = torch.float16
    assert saved.input_meta(node)[0][3] == torch.float16


def test_disable_proxy_modes_tracing():
    """graph/defined.py runs a node's formula on fake tensors outside the graph being traced."""
    from torch.fx.experimental.proxy_tensor import disable_proxy_modes_tracing, make_fx

    def f(x):
        with disable_proxy_modes_tracing():
            _ = x * 3                      # not recorded
        return x + 1
    gm = make_fx(f, tracing_mode="fake")(torch.randn(2))
    ops = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert ops == [torch.ops.aten.add.Tensor], f"disable_proxy_modes_tracing recorded: {ops}"


def test_inductor_never_reuse_buffers_and_fallback_lowering():
    """backends/inductor.py Note [Inductor: opaque buffers]: our lowering of compiled_bw::opaque (Inductor's fallback
    handler) and `V.graph.never_reuse_buffers`, consulted by buffer reuse and in-place updates."""
    pytest.importorskip("torch._inductor.compile_fx")
    import inspect

    from torch._inductor import lowering
    from torch._inductor.codegen.wrapper import PythonWrapperCodegen
    from torch._inductor.graph import GraphLowering

    from compiled_bw.backends import inductor
    from compiled_bw.calls.opaque import opaque
    assert lowering.lowerings.get(opaque) is not None, "our opaque lowering is not registered"
    assert "never_reuse_buffers" in inspect.getsource(GraphLowering.__init__), (
        "GraphLowering.never_reuse_buffers moved")
    # 2.15's can_reuse asks can_free, which consults never_reuse_buffers
    reuse = inspect.getsource(PythonWrapperCodegen.can_reuse)
    if "self.can_free(" in reuse:
        reuse += inspect.getsource(PythonWrapperCodegen.can_free)
    assert "never_reuse_buffers" in reuse, (
        f"Inductor's buffer reuse no longer consults never_reuse_buffers (torch {torch.__version__})")
    assert callable(inductor._opaque_fallback)
    for op in inductor.KNOWN_WRONG:     # Note [Inductor: known-wrong lowerings]: our wrappers sit in Inductor's lowering table
        assert lowering.lowerings[op].__qualname__.startswith("_keep_out_of_inductor"), op
    for op in inductor.EAGER_KERNEL:    # Note [Inductor: eager's kernel for its inf and NaN]
        assert op in lowering.fallbacks, (
            f"Inductor no longer registers {op} as a fallback (torch {torch.__version__}): "
            "without its decomposition it has no lowering")


def test_engine_state_queries_replaced():
    # runtime/engine_state.py replaces these torch._C functions while a compiled backward runs
    from compiled_bw.runtime import engine_state
    for name in ("_current_autograd_node", "_will_engine_execute_node",
                 "_current_graph_task_execution_order"):
        assert hasattr(torch._C, name), f"torch._C.{name} moved (runtime/engine_state.py)"
        assert getattr(torch._C, name) is getattr(engine_state, name), (
            f"torch._C.{name} is not compiled_bw's replacement (engine_state.install)")
    x = torch.randn(2, requires_grad=True)
    seen = []
    y = (x * 2).sum()
    y.register_hook(lambda g: seen.append(engine_state._orig_execution_order()))
    with torch.autograd.set_multithreading_enabled(False):
        y.backward()
    assert [type(n).__name__ for n in seen[0]] == ["SumBackward0", "MulBackward0",
                                                   "AccumulateGrad"], (
        "torch._C._current_graph_task_execution_order changed what it lists")


def test_inductor_call_order_hook():
    # backends/inductor.py Note [Inductor: call order]: our calls get WeakDeps through Inductor's ordering of comms
    pytest.importorskip("torch._inductor.compile_fx")
    from torch._inductor import comms, dependencies, ir

    from compiled_bw.backends import inductor
    inductor.install()      # as each compile does (an earlier test may have uninstalled it)
    assert comms.decide_global_ordering_of_comms is inductor._ordered_calls, (
        "torch._inductor.comms.decide_global_ordering_of_comms moved: backends/inductor.py "
        "Note [Inductor: call order] orders opaque calls and delivery points through it")
    assert "is_fake" in dependencies.WeakDep.__dataclass_fields__, "Inductor's WeakDep changed"
    assert hasattr(ir.FallbackKernel, "has_side_effects"), "Inductor's FallbackKernel changed"


def test_delivery_op_is_side_effectful():
    # calls/deliver.py: FX and Inductor keep `compiled_bw::deliver` although nothing uses it
    from torch._library.utils import is_impure

    from compiled_bw.calls.deliver import deliver
    assert is_impure(deliver), (
        "torch.fx.node.has_side_effect no longer marks an op impure (calls/deliver.py)")


def test_legacy_vmap_level_is_readable():
    from torch._vmap_internals import _vmap

    from compiled_bw.runtime.engine_state import legacy_vmap_level
    assert legacy_vmap_level() == 0, "torch._C._vmapmode_increment_nesting moved (engine_state.py)"
    seen = []
    _vmap(lambda v: seen.append(legacy_vmap_level()) or v)(torch.ones(2, 3))
    assert seen == [1]
    assert legacy_vmap_level() == 0


def test_profiler_enabled_query():
    # runtime/run.py Note [Profiler]: a backward under a profiler runs eager autograd
    from torch.profiler import profile

    from compiled_bw.runtime.run import _profiler_enabled
    assert _profiler_enabled() is False, "torch._C._autograd._profiler_enabled moved (run.py)"
    with profile():
        assert _profiler_enabled() is True
    assert _profiler_enabled() is False


def test_storage_use_count():
    # calls/opaque.py Note [Stealing at delivery points]: a storage's holders, read from Python
    from compiled_bw.calls.opaque import _storage_use_count
    t = torch.randn(3)
    assert _storage_use_count(t.untyped_storage()._cdata) == 2, (
        "torch._C._storage_Use_Count moved or counts differently (calls/opaque.py)")
    v = t[1:]
    assert _storage_use_count(t.untyped_storage()._cdata) == 3
    del v


def test_copy_slices_base_is_readable():
    # calls/opaque.py Note [Opaque output layout]: the C++ walk reads CopySlices::base (a
    # TensorGeometry member, torch/csrc/autograd/functions/tensor.h) for the layout of its grad
    from compiled_bw.walk import fastwalk
    if not fastwalk.in_use():
        pytest.skip("the C++ extension is not built here")
    base = torch.randn(3, 4).t().requires_grad_().mul(1)     # strides (1, 3)
    v = base.clone()
    v[1].add_(1)
    assert type(v.grad_fn).__name__ == "CopySlices"
    got = fastwalk.copy_slices_base(v.grad_fn)
    assert got == ([4, 3], [1, 4]), (
        f"CopySlices::base on torch {torch.__version__} reads {got}, not the base's sizes and "
        "strides ([4, 3], [1, 4]): the member moved (walk/cpp/_fastwalk_bindings.cpp "
        "copy_slices_base)")
    assert fastwalk.copy_slices_base(base.grad_fn) is None


def test_dynamo_setattr_handler_is_found_and_put_back():
    # torchapi/dynamo.py Note [requires_grad set on a tensor the region makes]
    from compiled_bw.torchapi import dynamo
    where = dynamo.setattr_handler()
    assert where is not None, (
        f"torch {torch.__version__}: Dynamo's setattr() handler moved (looked for "
        "SetAttrBuiltinVariable._call_setattr, BuiltinVariable.call_setattr in "
        "torch._dynamo.variables.builtin); checkpoint regions that set requires_grad on a "
        "tensor they make (T5) would be declined")
    owner, attr = where
    before = owner.__dict__[attr]
    with dynamo._fresh_requires_grad():
        assert owner.__dict__[attr] is not before
    assert owner.__dict__[attr] is before


# --- compiled_bw/torchapi: every private symbol in one of three modules, every patch undoable ---

def _torchapi_modules():
    from compiled_bw.torchapi import autograd, checkpoint, dynamo, inductor
    return {"autograd": autograd, "checkpoint": checkpoint, "dynamo": dynamo,
            "inductor": inductor}


def _used():
    return sorted((name, sym, user) for name, mod in _torchapi_modules().items()
                  for sym, user in mod.USED.items())


def _optional() -> dict:
    """symbol -> feature its absence turns off (the torchapi modules' OPTIONAL)."""
    return {sym: feat for mod in _torchapi_modules().values()
            for sym, feat in getattr(mod, "OPTIONAL", {}).items()}


def _required():
    return [u for u in _used() if u[1] not in _optional()]


def _resolve(dotted: str):
    import importlib
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        for attr in parts[k:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


@pytest.mark.parametrize(("module", "symbol", "user"), _required(),
                         ids=[s for _, s, _ in _required()])
def test_private_symbol_exists(module, symbol, user):
    try:
        _resolve(symbol)
    except (ImportError, AttributeError) as e:
        pytest.fail(f"torch moved {symbol} ({type(e).__name__}: {e}), used by compiled_bw/{user} "
                    f"through compiled_bw/torchapi/{module}.py")


def test_optional_symbols_are_used_symbols():
    used = {s for _, s, _ in _used()}
    assert set(_optional()) <= used, set(_optional()) - used


@pytest.mark.parametrize("symbol", sorted(_optional()))
def test_optional_symbol_exists_or_its_feature_is_off(symbol):
    """An OPTIONAL symbol present: its feature is on.  Missing (e.g. the SAC storage markers on
    torch 2.11): the feature is off, with a reason naming the release and the symbol."""
    from compiled_bw import torchapi
    feature = _optional()[symbol]
    off = torchapi.features_off()
    try:
        _resolve(symbol)
    except (ImportError, AttributeError):
        why = off.get(feature)
        assert why is not None, (f"torch {torch.__version__} lacks {symbol}, but {feature!r}, "
                                 "which needs it, is not off (torchapi FEATURES_OFF)")
        assert torch.__version__ in why and symbol.rsplit(".", 1)[1] in why, why
    else:
        assert feature not in off, (f"{feature!r} is off although torch {torch.__version__} has "
                                    f"{symbol}: {off[feature]}")


def test_patched_targets_exist():
    for name, mod in _torchapi_modules().items():
        for patch_name, (owner, attr) in getattr(mod, "PATCHED", {}).items():
            has = attr in owner if isinstance(owner, dict) else hasattr(owner, attr)
            assert has, (f"torch moved {getattr(owner, '__name__', owner)}.{attr}, which "
                         f"compiled_bw replaces ({patch_name!r}, compiled_bw/torchapi/{name}.py)")


_PRIVATE = re.compile(r"^torch(\.\w+)*\._[A-Za-z]")


def _private_names(path):
    """(line, dotted name) of every private torch module or attribute `path`'s code names."""
    tree = ast.parse(path.read_text())
    for n in ast.walk(tree):
        names = []
        if isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
            names = [f"{n.module}.{a.name}" for a in n.names]
        elif isinstance(n, ast.Import):
            names = [a.name for a in n.names]
        elif isinstance(n, ast.Attribute):
            parts, x = [], n
            while isinstance(x, ast.Attribute):
                parts.append(x.attr)
                x = x.value
            if isinstance(x, ast.Name):
                names = [".".join([x.id, *reversed(parts)])]
        for name in names:      # (aten operators, `torch.ops.aten._foo`, are not private API)
            if _PRIVATE.match(name) and not name.startswith("torch.ops."):
                yield n.lineno, name


def test_private_torch_api_only_in_torchapi():
    root = pathlib.Path(__file__).resolve().parent.parent / "compiled_bw"
    found = [f"{p.relative_to(root)}:{line}: {name}" for p in sorted(root.rglob("*.py"))
             if "torchapi" not in p.parts for line, name in _private_names(p)]
    assert not found, ("private torch API named outside compiled_bw/torchapi/ (import it there, "
                       "with an entry in USED):\n" + "\n".join(sorted(set(found))))


def test_the_private_api_check_finds_private_names(tmp_path):
    p = tmp_path / "m.py"
    p.write_text("import torch\nfrom torch._C import _foo\nx = torch._C._bar\n"
                 "y = torch.utils._pytree\nz = torch.__version__\nw = torch.nn.Linear\n"
                 "v = torch.ops.aten._unsafe_view.default\n")
    assert [name for _, name in _private_names(p)] == [
        "torch._C._foo", "torch._C._bar", "torch.utils._pytree"] or sorted(
        name for _, name in _private_names(p)) == sorted(
        ["torch._C._foo", "torch._C._bar", "torch._C", "torch.utils._pytree"])


_UNINSTALL = r"""
import torch, torch.autograd.function as F
# Everything compiled_bw may replace, as torch has it before compiled_bw is imported: the
# functions of these modules and classes (the classes must not gain attributes either).
MODULES = (torch._C, torch.autograd)
TYPES = (torch.Tensor, F._HookMixin, F.Function, F.FunctionCtx)
def snap():
    return {(id(o), k): v for o in (*MODULES, *TYPES) for k, v in vars(o).items()
            if callable(v) or isinstance(v, (classmethod, staticmethod))}
from torch._inductor import comms, lowering
from torch._inductor.codegen.wrapper import PythonWrapperCodegen
AVG = torch.ops.aten.avg_pool2d_backward.default
def snap_inductor():
    return (comms.decide_global_ordering_of_comms,
            PythonWrapperCodegen.__dict__["codegen_input_size_asserts"], lowering.lowerings[AVG])
before, before_inductor = snap(), snap_inductor()
import compiled_bw
import compiled_bw.backends.inductor as cbw_inductor
assert all(a is not b for a, b in zip(snap_inductor(), before_inductor))
x = torch.ones(3, requires_grad=True)
with compiled_bw.enable(backend="eager"):
    (x * 2).sum().backward()
assert compiled_bw.stats().captures == 1
assert snap() != before
compiled_bw.uninstall()
after = snap()
changed = [k for k in before if after.get(k) is not before[k]]
added = [k for k in after if k not in before and any(k[0] == id(t) for t in TYPES)]
assert not changed and not added, (changed, added)
assert all(a is b for a, b in zip(snap_inductor(), before_inductor)), "Inductor patches stay"
cbw_inductor.install()                          # compile_inductor() does this first
assert all(a is not b for a, b in zip(snap_inductor(), before_inductor))
with compiled_bw.enable(backend="eager"):       # enable() installs it again
    (x * 2).sum().backward()
assert compiled_bw.stats().captures == 1 and x.grad.eq(4).all(), (compiled_bw.stats(), x.grad)
assert snap() != before
print("ok")
"""


def test_uninstall_gives_torch_back():
    r = subprocess.run([sys.executable, "-c", _UNINSTALL], check=False, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]


def test_custom_op_function_is_recognized():
    """torchapi/autograd.py is_custom_op_function: torch.library's Function for a custom op with
    register_autograd (graph/custom.py Note [Traced without opt-in]) is told apart from a
    user's Function."""
    from functions import Double, scaled_sin

    from compiled_bw.torchapi import autograd as ta
    x = torch.randn(2, requires_grad=True)
    node = scaled_sin(x, 2.0).grad_fn
    assert ta.is_custom_op_function(node._forward_cls), (
        f"{type(node).__name__}: torch._library.autograd.make_autograd_impl's Function changed "
        "(custom ops' backwards would run as opaque calls)")
    assert not ta.is_custom_op_function(Double.apply(x).grad_fn._forward_cls)


@pytest.mark.needs_feature("traced checkpoint recomputation")
def test_checkpoint_frame_state_serves_unpacks():
    """checkpoint/recompute.py reads non-reentrant checkpoint's frame from its unpack hook's
    closure and, while tracing, answers unpacks from the frame's per-group state: the unpack
    hook must still read `GraphExecGroup`, `frame.is_recomputed`, `holder.handles` and
    `frame.recomputed` as torch 2.13 does."""
    import torch.utils.checkpoint as cp

    from compiled_bw.torchapi import checkpoint as ckpt
    lin = torch.nn.Linear(3, 3)
    y = cp.checkpoint(lin, torch.randn(2, 3, requires_grad=True), use_reentrant=False)
    raw = y.grad_fn._raw_saved_mat1
    frame = ckpt.checkpoint_frame(raw.unpack_hook)
    assert isinstance(frame, ckpt.CheckpointFrame), "checkpoint's unpack hook changed"
    assert type(raw.data) is ckpt.Holder
    cv = ckpt.closure_vars(frame.recompute_fn)
    missing = [n for n in ckpt.RECOMPUTE_VARS + ckpt.RNG_VARS if n not in cv]
    assert not missing, f"checkpoint's recompute_fn no longer closes over {missing}"
    # graph/rng.py: the state recompute_fn restores is the CPU state at the forward
    assert torch.equal(ckpt.forward_rng_state(cv), cv["fwd_cpu_state"])
    assert cv["device_type"] == "cpu"
    assert cv["fn"] is lin and frame.metadata_fn is ckpt.default_meta_extractor
    group, handle, ours = object(), object(), torch.full((2, 3), 7.0)
    frame.is_recomputed[group] = True
    frame.recomputed[group] = {handle: ours}
    raw.data.handles[group] = handle
    ckpt.set_graph_exec_group(group)
    try:
        assert ckpt.get_graph_exec_group() is group
        assert y.grad_fn._saved_mat1.eq(7).all(), "checkpoint's unpack no longer reads its state"
    finally:
        ckpt.set_graph_exec_group(None)


@pytest.mark.needs_feature("traced checkpoint recomputation", "traced selective checkpointing")
def test_sac_storage_holds_the_forwards_verdicts_and_replay_answers_them():
    """checkpoint/recompute.py (Note [Selective recomputation]) reads selective checkpointing's
    storage from the recompute context (_CachedTorchDispatchMode.storage: op -> {index:
    _RECOMPUTE | _CONSUMED | _VersionWrapper tree}) and replays its lookup (SacReplay, a
    TorchDispatchMode skipping SAC_IGNORED_OPS) while tracing."""
    import torch.utils.checkpoint as cp
    from torch.fx.experimental.proxy_tensor import make_fx

    from compiled_bw.torchapi import checkpoint as ckpt
    w = torch.randn(3, 3)
    x2 = torch.randn(2, 3, requires_grad=True)
    z = cp.checkpoint(lambda t: torch.sin(torch.mm(t, w)), x2, use_reentrant=False,
                      context_fn=lambda: cp.create_selective_checkpoint_contexts(
                          [torch.ops.aten.mm.default]))
    frame = ckpt.checkpoint_frame(z.grad_fn._raw_saved_self.unpack_hook)
    ctx = ckpt.closure_vars(frame.recompute_fn)["recompute_context"]
    storage, mutable = ckpt.sac_storage(ctx)
    assert mutable is False and ckpt.sac_storage(contextlib.nullcontext()) is None
    saved = storage[torch.ops.aten.mm.default][0]
    assert type(saved) is ckpt.VersionWrapper and saved.val.shape == (2, 3), storage
    assert storage[torch.ops.aten.sin.default][0] is ckpt.RECOMPUTE
    assert torch.ops.aten.detach.default in ckpt.SAC_IGNORED_OPS
    marker = torch.full((2, 3), 5.0)

    def answer(op, idx):
        return marker if op is torch.ops.aten.mm.default else None

    def traced(a, b):
        with ckpt.SacReplay(answer) as mode:
            out = torch.sin(torch.mm(a, b)).detach()
        return out, len(mode.consumed)
    out, n = traced(x2.detach(), w)
    assert n == 1 and torch.equal(out, torch.sin(marker))
    gm = make_fx(lambda a, b: traced(a, b)[0])(x2.detach(), w)
    assert torch.ops.aten.mm.default not in {nd.target for nd in gm.graph.nodes}, gm.code
    z.sum().backward()      # eager's lookup consumes the saved entry
    assert storage[torch.ops.aten.mm.default][0] is ckpt.CONSUMED


def test_region_guards_check_state_and_refuse_side_effects():
    # Dynamo's guard manager on a checkpointed region's call (checkpoint/guarded.py): holds for
    # another instance in the same state, fails when an attribute or grad-relevant metadata
    # changes; a forward with a side effect gets no guards and never runs
    from compiled_bw.torchapi.dynamo import region_guards

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 3)
            self.k = 2
            self.calls = []

        def forward(self, x):
            return self.lin(x) * self.k

    class Effect(M):
        def forward(self, x):
            self.calls.append(1)
            return self.lin(x)
    class Scaled(M):
        def forward(self, x, scale=1.0, bias=None):
            return self.lin(x) * scale + (0 if bias is None else bias)
    m, x = M(), torch.randn(2, 3, requires_grad=True)
    g = region_guards(m, (x,), {})
    assert g is not None and g.check(m, (x,), {}) and g.check(M(), (x,), {})
    m.k = 3
    assert not g.check(m, (x,), {})
    assert not g.check(M(), (torch.randn(2, 4),), {})
    e = Effect()
    assert region_guards(e, (x,), {}) is None and e.calls == []
    # keyword arguments (Note [Checkpoint keyword arguments]): a plain value is guarded, a
    # tensor's metadata is guarded, a keyword missing or added fails
    s, b = Scaled(), torch.randn(3)
    g = region_guards(s, (x,), {"scale": 2.0, "bias": b})
    assert g is not None and g.check(s, (x,), {"scale": 2.0, "bias": torch.randn(3)})
    assert not g.check(s, (x,), {"scale": 3.0, "bias": b})
    assert not g.check(s, (x,), {"scale": 2.0, "bias": torch.randn(2, 3)})
    assert not g.check(s, (x,), {"scale": 2.0})


def test_shape_guard_functions_are_python_int_arithmetic():
    # trace/dynamic.py Note [Guards as Python code] prints these as //, %, max, min: on
    # ints, torch's sympy functions must give what those give
    import sympy

    from compiled_bw.torchapi.dynamo import FloorDiv, PythonMod, SymMax, SymMin, SymMod
    from compiled_bw.trace.dynamic import _py
    a, b = sympy.symbols("a b", integer=True, positive=True)
    names = {a: "a", b: "b"}
    for e in (FloorDiv(a, b), SymMod(a, b), PythonMod(a, b), SymMax(a, b), SymMin(a, b),
              sympy.Eq(FloorDiv(a * 3, b) + SymMod(a, b), 4)):
        code = _py(e, names)
        for x, y in ((7, 2), (9, 3), (1, 5), (12, 7)):
            want = e.xreplace({a: x, b: y})
            got = eval(code, {}, {"a": x, "b": y})
            ok = (want is sympy.true) == got if isinstance(got, bool) else want == got
            assert ok, (e, code, x, y, want, got)


DEBUG_FLAG = types.SimpleNamespace(on=False)


def test_backward_verdict_names_guard_sources():
    """custom.py Note [Traced without opt-in]: Dynamo's trace of a backward, its guards'
    source names (InstructionTranslator.current_tx().output.guards) and side effects."""
    from compiled_bw.torchapi.dynamo import backward_verdict

    class Ctx:
        pass
    ctx = Ctx()
    ctx.saved_tensors = (torch.randn(3),)
    ctx.k = 2
    seen = []

    def pure(c, g):
        return g * c.saved_tensors[0] * c.k

    def flag(c, g):
        return g * 2 if DEBUG_FLAG.on else g

    def prints(c, g):
        print("x")
        return g

    assert backward_verdict(pure, (ctx, torch.randn(3)), lambda n: seen.append(n) or True) is None
    assert "L['args'][0].k" in seen and any(n.startswith("L['args'][1]") for n in seen), seen
    why = backward_verdict(flag, (ctx, torch.randn(3)), lambda n: "DEBUG_FLAG" not in n)
    assert why is not None and "DEBUG_FLAG" in why, why
    assert backward_verdict(prints, (ctx, torch.randn(3)), lambda n: True).startswith("Dynamo")


def test_set_version_counters_sets_them():
    # graph/mutated.py Note [Graph inputs the backward mutates]: the run sets the version
    # counters of the inputs its graph wrote to, tensors and versions given as tuples
    from compiled_bw.torchapi import autograd as torch_autograd
    a, b = torch.zeros(2), torch.zeros(3)
    a.add_(1)
    torch_autograd.set_version_counters((a, b), (7, 0))
    assert (a._version, b._version) == (7, 0), (
        f"torch {torch.__version__}: torch._C._autograd._unsafe_set_version_counter no longer "
        "sets the counters it is given (runtime/run.py _mutated_versions)")


def test_node_creation_hooks_are_counted_where_torch_has_them():
    """torch.autograd.graph.node_creation_hook (torch 2.14+) pushes and pops its hook through
    torch._C._autograd._push/_pop_node_creation_hook, which compiled_bw counts per thread
    (graph/hooks.py Note [Node creation hooks]): a release with the context manager and not
    those (or pushing elsewhere) would run backwards compiled while a creation hook is active."""
    from compiled_bw.core.thread import THREAD
    from compiled_bw.torchapi import autograd as torch_autograd
    has = hasattr(torch.autograd.graph, "node_creation_hook")
    assert has == torch_autograd.NODE_CREATION_HOOKS, (
        f"torch {torch.__version__}: torch.autograd.graph.node_creation_hook "
        f"{'exists' if has else 'is missing'} but torch._C._autograd._push_node_creation_hook "
        f"{'does not' if has else 'does'}: compiled_bw/torchapi/autograd.py NODE_CREATION_HOOKS")
    if has:
        with torch.autograd.graph.node_creation_hook(lambda n: None):
            assert THREAD.creation_hooks == 1, (
                f"torch {torch.__version__}'s node_creation_hook no longer pushes through "
                "torch._C._autograd._push_node_creation_hook (compiled_bw counts that)")
        assert THREAD.creation_hooks == 0


def test_fake_tensor_meta_failure_log():
    # torchapi/dynamo.py Note [Meta failures are our fallbacks]: FakeTensorMode's module logger
    # `log` and the message it logs a failing meta kernel's exception with
    import inspect

    from torch._subclasses import fake_tensor

    from compiled_bw.torchapi.dynamo import META_FAILURE_LOG
    assert isinstance(getattr(fake_tensor, "log", None), logging.Logger), (
        "torch._subclasses.fake_tensor.log moved: compiled_bw's filter of its meta-failure "
        "records (Note [Meta failures are our fallbacks]) has nothing to attach to")
    assert META_FAILURE_LOG in inspect.getsource(fake_tensor), (
        f"FakeTensorMode no longer logs {META_FAILURE_LOG!r}: update META_FAILURE_LOG "
        "(torchapi/dynamo.py Note [Meta failures are our fallbacks])")


def test_storage_id_tells_views_apart_from_new_tensors_on_fake_tensors_too():
    # trace/holders.py Note [Eager's in-place sums and copied leaf grads]: storages' identity
    from torch._subclasses.fake_tensor import FakeTensorMode

    from compiled_bw.torchapi.autograd import storage_id
    for mode in (contextlib.nullcontext(), FakeTensorMode()):
        with mode:
            t = torch.randn(3, 2)
            assert storage_id(t.t()) == storage_id(t), (
                "UntypedStorage._cdata no longer names the storage a view shares "
                f"({type(t).__name__}, torch {torch.__version__}): torchapi/autograd.py storage_id")
            assert storage_id(t * 2) != storage_id(t)
