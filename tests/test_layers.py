"""compiled_bw's packages import one way: each layer only from the layers below it.

The layers (compiled_bw/core/__init__.py): torchapi < core < graph < checkpoint < calls < walk
< trace < passes < backends < runtime < api < the package's __init__.  A relative or absolute
import of compiled_bw from a module in one layer of a module in a higher layer fails here,
naming both.  And no module imports itself through others (an import circle, function-level
imports included), within a package or across packages: that fails naming the circle.  No
package holds more than 40% of the package's lines.
"""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent / "compiled_bw"
LAYERS = ["torchapi", "errors", "config", "core", "graph", "checkpoint", "calls", "walk", "trace",
          "passes", "backends", "runtime", "api", "compress", "build", "doctor", "cache",
          "__init__"]
RANK = {name: k for k, name in enumerate(LAYERS)}
RANK.update(errors=RANK["torchapi"], config=RANK["torchapi"], compress=RANK["api"],
            build=RANK["api"])  # leaves (compress uses graph/packed.py's traceable hooks)


def _layer(parts: list) -> str:
    return parts[0] if len(parts) > 1 else parts[0].removesuffix(".py")


def _imports(path: pathlib.Path):
    """(line, the compiled_bw layer imported) for each import of compiled_bw in `path`."""
    rel = list(path.relative_to(ROOT).parts)
    for n in ast.walk(ast.parse(path.read_text())):
        if isinstance(n, ast.ImportFrom) and n.level > 0:
            base = rel[:-1][:len(rel) - n.level]
            target = base + (n.module.split(".") if n.module else [])
            if target:
                yield n.lineno, target[0]
            else:               # `from . import x` at the top of the package
                for a in n.names:
                    yield n.lineno, a.name
        elif isinstance(n, (ast.ImportFrom, ast.Import)):
            names = [n.module] if isinstance(n, ast.ImportFrom) else [a.name for a in n.names]
            for name in names:
                parts = (name or "").split(".")
                if parts[0] == "compiled_bw" and len(parts) > 1:
                    yield n.lineno, parts[1]


MODULES = sorted(ROOT.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=[str(p.relative_to(ROOT)) for p in MODULES])
def test_imports_point_down(path):
    here = _layer(list(path.relative_to(ROOT).parts))
    assert here in RANK, f"{path.relative_to(ROOT)}: not in a layer: add it to LAYERS"
    up = [f"line {line}: imports {there} (layer {RANK[there]}) from {here} (layer {RANK[here]})"
          for line, there in _imports(path) if there in RANK and RANK[there] > RANK[here]]
    assert not up, f"compiled_bw/{path.relative_to(ROOT)} imports upward:\n" + "\n".join(up)


def test_the_layer_check_sees_an_upward_import(tmp_path, monkeypatch):
    fake = ROOT / "graph" / "nodes.py"
    src = "from ..runtime import run\nfrom compiled_bw.api import enable\nfrom . import saved\n"
    monkeypatch.setattr(pathlib.Path, "read_text", lambda self: src)
    assert [t for _, t in _imports(fake)] == ["runtime", "api", "graph"]


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _edges(sources: dict) -> dict:
    """{module: {modules of compiled_bw it imports}} over `sources` ({module: (source, is
    package)}), function-level imports included; `from pkg import name` names the module
    pkg.name where that is one, else pkg."""
    edges: dict = {m: set() for m in sources}
    for m, (src, is_pkg) in sources.items():
        pkg = m.split(".") if is_pkg else m.split(".")[:-1]
        for n in ast.walk(ast.parse(src)):
            if isinstance(n, ast.ImportFrom):
                if n.level:
                    base = pkg[:len(pkg) - (n.level - 1)]
                    mod = base + (n.module.split(".") if n.module else [])
                elif (n.module or "").split(".")[0] == "compiled_bw":
                    mod = n.module.split(".")[1:]
                else:
                    continue
                for a in n.names:
                    full = ".".join([*mod, a.name])
                    edges[m].add(full if full in sources else ".".join(mod))
            elif isinstance(n, ast.Import):
                for a in n.names:
                    if a.name.startswith("compiled_bw."):
                        edges[m].add(a.name.removeprefix("compiled_bw."))
        edges[m] = {e for e in edges[m] if e in sources and e != m}
    return edges


def _circles(edges: dict) -> list:
    """The import circles (strongly connected sets of more than one module), each sorted."""
    index: dict = {}
    low: dict = {}
    stack: list = []
    on: set = set()
    out: list = []

    def visit(v) -> None:      # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle():
    sources = {_module_name(p): (p.read_text(), p.name == "__init__.py") for p in MODULES}
    edges = _edges(sources)
    circles = [" -> ".join(c) + "  (" + "; ".join(f"{a} imports {', '.join(sorted(edges[a] & set(c)))}"
                                               for a in c) + ")" for c in _circles(edges)]
    assert not circles, ("import circles in compiled_bw (move what both sides need below both):\n"
                         + "\n".join(circles))


def test_the_circle_check_sees_a_circle():
    sources = {"walk.fastwalk": ("def f():\n    from ..calls import opaque\n", False),
               "calls.opaque": ("from ..walk.fastwalk import x\n", False),
               "calls": ("", True), "walk": ("", True), "graph.saved": ("import torch\n", False)}
    assert _circles(_edges(sources)) == [["calls.opaque", "walk.fastwalk"]]


def _lines(path: pathlib.Path) -> int:
    return sum(1 for _ in path.open(encoding="utf-8", errors="replace"))


def test_no_package_holds_most_of_the_code():
    # issue #40: a package of more than ~40% of the lines (Python and C++) is several stages
    files = [p for p in ROOT.rglob("*") if p.suffix in (".py", ".cpp", ".h")
             and "node_tables" not in p.parts]
    total = sum(_lines(p) for p in files)
    per: dict = {}
    for p in files:
        parts = p.relative_to(ROOT).parts
        if len(parts) > 1:
            per[parts[0]] = per.get(parts[0], 0) + _lines(p)
    big = {k: f"{v / total:.0%}" for k, v in per.items() if v > 0.4 * total}
    assert not big, f"packages holding more than 40% of compiled_bw's {total} lines: {big}"


def _thread_locals(src: str) -> list:
    """Lines that make a threading.local (a call, or a class deriving from it)."""
    out = []
    for n in ast.walk(ast.parse(src)):
        if isinstance(n, ast.Call) and ast.unparse(n.func).endswith("threading.local"):
            out.append(n.lineno)
        elif isinstance(n, ast.ClassDef) and any(ast.unparse(b).endswith("threading.local")
                                                 for b in n.bases):
            out.append(n.lineno)
    return out


def test_per_thread_state_lives_in_core_thread():
    # one place holds every layer's per-thread state (core/thread.py THREAD), with each field
    # documented there; a second threading.local elsewhere fails here, naming it
    found = {str(p.relative_to(ROOT)): _thread_locals(p.read_text()) for p in MODULES}
    found = {k: v for k, v in found.items() if v}
    assert found == {"core/thread.py": found.get("core/thread.py")}, (
        f"threading.local outside core/thread.py: {found}; add a field to core/thread.py THREAD")
    assert _thread_locals("import threading\n_t = threading.local()\n") == [2]
