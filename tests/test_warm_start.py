"""Warm start (runtime/warm.py Note [Warm start]): a second process loads the graphs a first one
stored under COMPILED_BW_CACHE_DIR instead of capturing them, and still gives eager's grads;
entries it cannot trust are ignored.  Each case runs real processes, as users' restarts do."""
import glob
import hashlib
import json
import os
import pickle
import subprocess
import sys

import pytest

from compiled_bw.runtime import warm

# One training step of a small MLP, under compiled_bw, compared with eager autograd in the same
# process (values, dtype, strides, None-ness); prints the stats that say how the graph came.
STEP = r'''
import json, sys, torch, compiled_bw
backend, hook = sys.argv[1], sys.argv[2] == "hook"
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3))
if hook:
    m[0].weight.register_hook(lambda g: g * 2)
x = torch.randn(4, 5)
traces, real_trace = [], torch.fx.symbolic_trace
torch.fx.symbolic_trace = lambda *a, **k: traces.append(1) or real_trace(*a, **k)
def step():
    m.zero_grad(set_to_none=True)
    m(x).square().sum().backward()
    return [p.grad for p in m.parameters()]
ref = [g.clone() for g in step()]
bad = []
with compiled_bw.enable(backend=backend):
    for i in range(3):
        got = step()
        for r, g in zip(ref, got):
            if g is None or g.dtype != r.dtype or g.stride() != r.stride() or \
                    not torch.allclose(g, r, rtol=1e-5, atol=1e-6):
                bad.append(i)
        compiled_bw.wait_for_compiles()
s = compiled_bw.stats()
fx_traces = len(traces)
graph = compiled_bw.last_graph()
print(json.dumps({"bad": bad, "captures": s.captures, "warm_loads": s.warm_loads,
                  "fx_traces": fx_traces, "graph": "tanh_backward" in graph.code,
                  "native": s.native_runs,
                  "inductor_compiles": s.inductor_compiles, "fallbacks": s.fallbacks,
                  "reasons": s.fallback_reasons, "notes": s.notes}))
'''


def _run(cache, backend="eager", hook=False, inductor_dir=None, wait=True, background=True):
    env = {**os.environ, "COMPILED_BW_CACHE_DIR": str(cache),
           "PYTHONPATH": os.pathsep.join(sys.path)}
    if not background:
        env["COMPILED_BW_BACKGROUND_COMPILE"] = "0"
    if inductor_dir is not None:
        env["TORCHINDUCTOR_CACHE_DIR"] = str(inductor_dir)
    p = subprocess.Popen([sys.executable, "-c", STEP, backend, "hook" if hook else "-"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if not wait:
        return p
    return _result(p)


def _result(p) -> dict:
    out, err = p.communicate(timeout=600)
    assert p.returncode == 0, out + err
    r = json.loads(out.strip().splitlines()[-1])
    assert r["bad"] == [], r
    return r


def _rewrite(path: str, change) -> None:
    """Rewrite a stored graph's contents with change(data), checksum recomputed: a file that
    loads, holding something else (runtime/warm.py's format, read as a test must)."""
    with open(path, "rb") as f:
        outer = pickle.load(f)
    data = pickle.loads(outer["payload"])
    change(data)
    outer["payload"] = pickle.dumps(data)
    outer["sha256"] = hashlib.sha256(outer["payload"]).hexdigest()
    with open(path, "wb") as f:
        pickle.dump(outer, f)


def _files(cache) -> list:
    return glob.glob(os.path.join(str(cache), "*", "*.graph"))


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_second_process_loads_instead_of_capturing(tmp_path, backend):
    first = _run(tmp_path / "c", backend, inductor_dir=tmp_path / "i")
    assert first["captures"] == 1 and first["warm_loads"] == 0, first
    assert len(_files(tmp_path / "c")) == 1
    second = _run(tmp_path / "c", backend, inductor_dir=tmp_path / "i")
    assert second["captures"] == 0 and second["warm_loads"] == 1, second
    assert second["fallbacks"] == 0, second
    # Note [Lazy stored graphs]: no FX trace until the graph is asked for, and then it is there
    assert second["fx_traces"] == 0 and second["graph"] and first["graph"], second
    if backend == "inductor":
        assert first["inductor_compiles"] == 1 and second["inductor_compiles"] == 0, second
        # Note [Native first runs]: compiled code from the first backward on (3 of 3 steps)
        assert first["native"] == 2 and second["native"] == 3, (first, second)


# A model run at batch sizes from argv: the first is the stored graph's, the rest are new.
SIZES = r'''
import json, sys, torch, compiled_bw
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3))
xs = [torch.randn(n, 5) for n in map(int, sys.argv[1:])]
refs = [torch.autograd.grad(m(x).square().sum(), list(m.parameters())) for x in xs]
bad = []
with compiled_bw.enable(backend="eager"):
    for x, ref in zip(xs, refs):
        m.zero_grad(set_to_none=True)
        m(x).square().sum().backward()
        bad += [len(x) for r, p in zip(ref, m.parameters()) if not torch.allclose(r, p.grad)]
s = compiled_bw.stats()
print(json.dumps({"bad": bad, "captures": s.captures, "warm_loads": s.warm_loads,
                  "dynamic_captures": s.dynamic_captures, "dynamic_hits": s.dynamic_hits}))
'''


@pytest.mark.slow
def test_a_loaded_graphs_next_size_goes_dynamic_as_in_the_first_process(tmp_path):
    """Note [Stored walk signature]: the process that stored a graph at batch 4 captures one
    dynamic graph when the batch changes; a process that loads it (no second walk at its
    first miss) does the same at its next size, and grads are eager's throughout."""
    env = {**os.environ, "COMPILED_BW_CACHE_DIR": str(tmp_path),
           "PYTHONPATH": os.pathsep.join(sys.path)}

    def run(*sizes):
        r = subprocess.run([sys.executable, "-c", SIZES, *map(str, sizes)], capture_output=True,
                           text=True, env=env, timeout=600, check=False)
        assert r.returncode == 0, r.stdout + r.stderr
        out = json.loads(r.stdout.strip().splitlines()[-1])
        assert out["bad"] == [], out
        return out

    first = run(4, 6, 9)
    assert (first["captures"], first["dynamic_captures"], first["dynamic_hits"]) == (2, 1, 1), \
        first
    second = run(4, 6, 9)
    assert second["warm_loads"] == 1, second
    assert (second["captures"], second["dynamic_captures"], second["dynamic_hits"]) == \
        (1, 1, 1), second


@pytest.mark.slow
def test_a_foreground_inductor_compile_is_stored_and_loaded(tmp_path):
    """Inductor compiling in the foreground (background_compile=False): the graph is stored
    with its compiled code, and a second process runs that code from its first backward."""
    first = _run(tmp_path / "c", "inductor", inductor_dir=tmp_path / "i", background=False)
    assert first["captures"] == 1 and first["inductor_compiles"] == 1, first
    second = _run(tmp_path / "c", "inductor", inductor_dir=tmp_path / "i", background=False)
    assert second["captures"] == 0 and second["warm_loads"] == 1, second
    assert second["inductor_compiles"] == 0 and second["native"] == 3, second


def test_warm_start_is_off_without_the_variable(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "COMPILED_BW_CACHE_DIR"}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    env["HOME"] = str(tmp_path)     # nothing lands under a default folder either
    r = subprocess.run([sys.executable, "-c", STEP, "eager", "-"], capture_output=True,
                       text=True, env=env, timeout=600, check=False)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.splitlines()[-1])["warm_loads"] == 0
    assert not glob.glob(str(tmp_path / "**" / "*.graph"), recursive=True)


@pytest.mark.slow
def test_a_corrupted_entry_is_ignored_with_a_note(tmp_path):
    _run(tmp_path)
    (path,) = _files(tmp_path)
    with open(path, "r+b") as f:
        f.seek(40)
        f.write(b"\x00garbage\x00" * 8)
    second = _run(tmp_path)
    assert second["captures"] == 1 and second["warm_loads"] == 0, second
    assert any(n.startswith("warm start: ignored the stored graph") for n in second["notes"])


@pytest.mark.slow
def test_another_releases_entry_is_not_read(tmp_path):
    _run(tmp_path)
    (path,) = _files(tmp_path)
    folder = os.path.dirname(path)
    os.rename(folder, folder.replace("torch", "torch0.0.1-", 1))  # as another release wrote it
    second = _run(tmp_path)
    assert second["captures"] == 1 and second["warm_loads"] == 0, second
    assert len(_files(tmp_path)) == 2


def test_graphs_with_hooks_are_stored_and_call_this_processes_hooks(tmp_path):
    """Note [Keys that name user code]: a graph whose hook is a lambda made in each process
    is stored, and a second process loads it and calls its own lambda."""
    first = _run(tmp_path, hook=True)
    assert first["captures"] == 1 and len(_files(tmp_path)) == 1, first
    second = _run(tmp_path, hook=True)
    assert second["captures"] == 0 and second["warm_loads"] == 1, second


# User code in the graph: a custom Function Dynamo finds safe (traced in), one it refuses (an
# opaque call: its backward appends to a global list), module full backward hooks and a tensor hook with
# a closure.  argv: backend, which backward _Scaled has ("a" or "b": one qualified name, other
# code, as after an edit), SCALE (a global its backward reads).  Hook calls are logged (and
# compared with eager's in this process); the Dynamo verdicts asked and read from disk are
# printed (graph/custom.py Note [Stored verdicts]).
USER_CODE = r'''
import json, sys, torch, compiled_bw
from compiled_bw.graph import custom
backend, variant, SCALE = sys.argv[1], sys.argv[2], float(sys.argv[3])

class _Scaled(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x
    if variant == "a":
        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x * SCALE
    else:
        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x * SCALE + 1

CALLS = []

class _Refused(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()
    @staticmethod
    def backward(ctx, g):
        CALLS.append(1)
        return g * 1.0

torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3))
log = []
for i, lin in enumerate((m[0], m[2])):
    lin.register_full_backward_hook(lambda mod, gi, go, i=i: log.append(("module", i)))
x = torch.randn(4, 5)
def step():
    m.zero_grad(set_to_none=True)
    log.clear()
    h = m[1](m[0](x))
    h.register_hook(lambda g: log.append(("tensor", tuple(g.shape))) or g * 2)
    m[2](_Refused.apply(_Scaled.apply(h))).square().sum().backward()
    return [p.grad for p in m.parameters()], list(log)
ref, ref_log = step()
bad = []
with compiled_bw.enable(backend=backend):
    for i in range(3):
        got, got_log = step()
        bad += [i for r, g in zip(ref, got) if g is None or g.stride() != r.stride()
                or not torch.allclose(g, r, rtol=1e-5, atol=1e-6)]
        bad += [(i, got_log)] if got_log != ref_log else []
        compiled_bw.wait_for_compiles()
s = compiled_bw.stats()
print(json.dumps({"bad": bad, "captures": s.captures, "warm_loads": s.warm_loads,
                  "verdicts": custom.COUNTS["dynamo_verdicts"],
                  "stored_verdicts": custom.COUNTS["stored_verdicts"],
                  "refused": sorted(k[0].__name__ for k, v in custom._VERDICTS.items()
                                    if v is not None),
                  "fallbacks": s.fallbacks, "reasons": s.fallback_reasons, "notes": s.notes}))
'''


@pytest.mark.slow
def test_two_processes_write_one_cache_at_once(tmp_path):
    procs = [_run(tmp_path, wait=False) for _ in range(2)]
    # each captures its graph (and stores it), or, started later than the other had stored
    # it, loads it: either way with eager's grads (_result)
    results = [_result(p) for p in procs]
    assert all(r["captures"] + r["warm_loads"] == 1 for r in results), results
    assert sum(r["captures"] for r in results) >= 1, results
    assert len(_files(tmp_path)) == 1
    assert not glob.glob(str(tmp_path / "*" / "*.tmp"))
    third = _run(tmp_path)
    assert third["warm_loads"] == 1 and third["captures"] == 0, third


@pytest.mark.slow
def test_inductor_cache_dir_cleaned_between_runs(tmp_path):
    """The stored compiled graph carries its generated code: it loads without a compile."""
    import shutil
    _run(tmp_path / "c", "inductor", inductor_dir=tmp_path / "i")
    shutil.rmtree(tmp_path / "i")
    second = _run(tmp_path / "c", "inductor", inductor_dir=tmp_path / "i")
    assert second["warm_loads"] == 1 and second["captures"] == 0, second
    assert second["inductor_compiles"] == 0 and second["fallbacks"] == 0, second


@pytest.mark.slow
def test_a_compiled_graph_that_does_not_load_is_captured_again(tmp_path):
    _run(tmp_path / "c", "inductor", inductor_dir=tmp_path / "i")
    (path,) = _files(tmp_path / "c")
    size, digest = pickle.loads(pickle.load(open(path, "rb"))["payload"])["compiled"]
    (body,) = glob.glob(path[:-len(".graph")] + ".*.compiled")    # Note [Sidecar files]
    assert os.path.getsize(body) == size and digest[:16] in body
    with open(body, "wb") as f:         # damaged: its checksum no longer matches
        f.write(b"not a compiled graph")
    second = _run(tmp_path / "c", "inductor", inductor_dir=tmp_path / "i")
    assert second["warm_loads"] == 1 and second["captures"] == 1, second
    assert any("did not load" in r for r in second["reasons"]), second
    assert not os.path.exists(body), "the damaged file should leave with its graph"


@pytest.mark.slow
def test_cache_command(tmp_path):
    _run(tmp_path)
    env = {**os.environ, "COMPILED_BW_CACHE_DIR": str(tmp_path)}
    ls = subprocess.run([sys.executable, "-m", "compiled_bw.cache", "ls"], capture_output=True,
                        text=True, env=env, timeout=300, check=False)
    assert ls.returncode == 0 and "1 stored graphs" in ls.stdout, ls.stdout + ls.stderr
    clear = subprocess.run([sys.executable, "-m", "compiled_bw.cache", "clear"],
                           capture_output=True, text=True, env=env, timeout=300, check=False)
    assert "removed 1 stored graphs" in clear.stdout and _files(tmp_path) == []


@pytest.mark.slow
def test_benchmark_rows_come_from_a_warm_second_process():
    """`python -m benchmarks.warm_start`'s rows: the second process loaded, captured nothing."""
    from benchmarks import warm_start
    res = warm_start.run(["overhead"], "eager")
    cold, warm = res["overhead"]
    assert (cold["captures"], cold["warm_loads"]) == (1, 0), cold
    assert (warm["captures"], warm["warm_loads"]) == (0, 1), warm
    assert "| overhead |" in "\n".join(warm_start.table(res, "eager"))


VERIFY = r'''
import sys, warnings, torch, compiled_bw
torch.manual_seed(0)
w = torch.randn(4, 3, requires_grad=True)
x = torch.randn(5, 4)
(x @ w).tanh().sum().backward()
ref, w.grad = w.grad.clone(), None
warnings.simplefilter("ignore")
with compiled_bw.enable(backend="eager", verify=sys.argv[1] == "verify"):
    (x @ w).tanh().sum().backward()
s = compiled_bw.stats()
print(s.warm_loads, s.verify_mismatches, bool(torch.allclose(w.grad, ref)))
'''


@pytest.mark.slow
def test_a_stored_graph_verify_rejects_leaves_the_cache(tmp_path):
    """A stored graph that computes something else (here: its file rewritten, checksum and
    all, with another op) is caught by verify, and removed: no later process loads it."""
    env = {**os.environ, "COMPILED_BW_CACHE_DIR": str(tmp_path),
           "PYTHONPATH": os.pathsep.join(sys.path)}

    def run(mode):
        r = subprocess.run([sys.executable, "-c", VERIFY, mode], capture_output=True,
                           text=True, env=env, timeout=600, check=False)
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout.split()

    assert run("-") == ["0", "0", "True"]
    (path,) = _files(tmp_path)

    def other_op(data):
        assert "aten.tanh_backward.default(" in data["graph"]
        data["graph"] = data["graph"].replace("aten.tanh_backward.default(", "aten.mul.Tensor(")
        # what runs on load is the eager backend's code stored with it (Note [Lazy stored
        # graphs]): made again from the rewritten graph
        data["eager"] = warm._eager_code(warm.graph_module(data["graph"]))
    _rewrite(path, other_op)
    assert run("-") == ["1", "0", "False"]          # loaded and wrong: what verify is for
    assert run("verify") == ["1", "1", "True"]      # loaded, caught: eager's grads
    assert _files(tmp_path) == []
    assert run("-") == ["0", "0", "True"]           # captured afresh


def test_source_hash_follows_contents_not_times(tmp_path, monkeypatch):
    """Note [Source hash memo]: the release folder's source hash changes with a file's
    contents, not with its modification time (a reinstall or checkout that rewrites unchanged
    files keeps the stored graphs), and a remembered hash is read, not recomputed."""
    monkeypatch.setenv("COMPILED_BW_CACHE_DIR", str(tmp_path / "cache"))
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "a.py").write_text("x = 1\n")
    (pkg / "sub" / "b.cpp").write_text("int f();\n")
    first = warm._source_hash(str(pkg))
    st = os.stat(pkg / "a.py")
    os.utime(pkg / "a.py", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))     # touched only
    assert warm._source_hash(str(pkg)) == first
    (pkg / "sub" / "b.cpp").write_text("int g();\n")                        # changed
    changed = warm._source_hash(str(pkg))
    assert changed != first
    (memo,) = [m for m in (tmp_path / "cache" / "sources").iterdir() if m.read_text() == changed]
    memo.write_text("remembered")
    assert warm._source_hash(str(pkg)) == "remembered"


# Graphs of MLPs of the given widths, one step each under compiled_bw (eager backend), in
# order, a second apart (the folder's clock: file times), grads compared with eager's.
WIDTHS = r'''
import json, sys, time, torch, compiled_bw
bad = []
for w in map(int, sys.argv[1].split(",")):
    torch.manual_seed(w)
    m = torch.nn.Sequential(torch.nn.Linear(5, w), torch.nn.Tanh(), torch.nn.Linear(w, 3))
    x = torch.randn(4, 5)
    def step():
        m.zero_grad(set_to_none=True)
        m(x).square().sum().backward()
        return [p.grad.clone() for p in m.parameters()]
    ref = step()
    with compiled_bw.enable(backend="eager", dynamic=False):   # a static graph per width
        got = step()
    bad += [w for r, g in zip(ref, got) if not torch.allclose(g, r) or g.stride() != r.stride()]
    time.sleep(1.1)
s = compiled_bw.stats()
print(json.dumps({"bad": bad, "captures": s.captures, "warm_loads": s.warm_loads}))
'''


@pytest.mark.slow
def test_the_folder_keeps_its_size_bound_least_recently_used_out_first(tmp_path, monkeypatch):
    """COMPILED_BW_CACHE_MB bounds the folder: storing a graph that does not fit removes the
    least recently used ones (a load counts as a use), and the rest still load."""
    monkeypatch.setenv("COMPILED_BW_CACHE_DIR", str(tmp_path))     # (warm.entries() here)
    def run(widths: str, mb: float | None = None) -> dict:
        env = {**os.environ, "COMPILED_BW_CACHE_DIR": str(tmp_path),
               "PYTHONPATH": os.pathsep.join(sys.path)}
        if mb is not None:
            env["COMPILED_BW_CACHE_MB"] = str(mb)
        return _result(subprocess.Popen([sys.executable, "-c", WIDTHS, widths],
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True, env=env))
    assert run("7,8")["captures"] == 2
    size = sum(e[1] for e in warm.entries())
    assert len(warm.entries()) == 2
    bound = size * 1.25 / 2**20             # two graphs of about this size fit, three do not
    r = run("7,9", bound)                   # 7 loads (used now), 9 is stored: 8 goes
    assert (r["warm_loads"], r["captures"]) == (1, 1), r
    assert len(_files(tmp_path)) == 2 and sum(e[1] for e in warm.entries()) <= bound * 2**20
    r = run("7,9")
    assert (r["warm_loads"], r["captures"]) == (2, 0), r
    r = run("8")
    assert (r["warm_loads"], r["captures"]) == (0, 1), r


def _user_code(cache, backend="eager", variant="a", scale=2.0) -> dict:
    env = {**os.environ, "COMPILED_BW_CACHE_DIR": str(cache),
           "PYTHONPATH": os.pathsep.join(sys.path)}
    r = subprocess.run([sys.executable, "-c", USER_CODE, backend, variant, str(scale)],
                       capture_output=True, text=True, env=env, timeout=600, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["bad"] == [] and out["fallbacks"] == 0, out
    return out


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_graphs_with_user_code_load_in_a_second_process(tmp_path, backend):
    """A traced custom Function, an opaque one, module and tensor hooks: stored, loaded by a
    second process (no capture, no Dynamo verdict asked: both are read from disk) with eager's
    grads and hook calls."""
    first = _user_code(tmp_path, backend)
    assert (first["captures"], first["warm_loads"]) == (1, 0), first
    assert first["verdicts"] == 2 and first["refused"] == ["_RefusedBackward"], first
    second = _user_code(tmp_path, backend)
    assert (second["captures"], second["warm_loads"]) == (0, 1), second
    assert second["verdicts"] == 0 and second["stored_verdicts"] == 2, second
    assert second["refused"] == ["_RefusedBackward"], second


@pytest.mark.slow
def test_a_changed_backward_or_global_is_not_loaded(tmp_path):
    """Note [Keys that name user code]: the same Function name with other backward code, or
    the same code reading another value of a global, is another key: captured again (a stale
    graph would give the old backward's grads, which `bad` would show)."""
    _user_code(tmp_path, variant="a", scale=2.0)
    for variant, scale in (("b", 2.0), ("a", 3.0)):
        r = _user_code(tmp_path, variant=variant, scale=scale)
        assert (r["captures"], r["warm_loads"]) == (1, 0), (variant, scale, r)
    r = _user_code(tmp_path, variant="b", scale=2.0)
    assert (r["captures"], r["warm_loads"]) == (0, 1), r


def test_read_ahead_holds_checked_graphs_only(tmp_path, monkeypatch):
    """Note [Read-ahead]: what the import's thread reads ahead is a checked graph file with its
    eager code compiled, taken (once) by the read of its key; a damaged file is not held."""
    _run(tmp_path)
    (path,) = _files(tmp_path)
    monkeypatch.setenv("COMPILED_BW_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(warm, "_READ", {})
    monkeypatch.setattr(warm, "_TAKEN", set())
    warm._read_ahead()
    name = os.path.basename(path)
    assert list(warm._READ) == [name] and callable(warm._READ[name][1])
    warm._READ.clear()
    warm._TAKEN.add(name)       # a backward read it before the thread got to it: not held
    warm._read_ahead()
    assert warm._READ == {}
    warm._TAKEN.clear()
    with open(path, "r+b") as f:
        f.seek(40)
        f.write(b"\x00garbage\x00" * 8)
    warm._READ.clear()
    warm._read_ahead()
    assert warm._READ == {}
