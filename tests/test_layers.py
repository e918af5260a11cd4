"""compiled_bw's packages import one way: each layer only from the layers below it.

The layers (compiled_bw/core/__init__.py): torchapi < core < capture < passes < backends <
runtime < api < the package's __init__.  A relative or absolute import of compiled_bw from a
module in one layer of a module in a higher layer fails here, naming both.
"""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent / "compiled_bw"
LAYERS = ["torchapi", "errors", "config", "core", "capture", "passes", "backends", "runtime",
          "api", "compress", "build", "doctor", "cache", "__init__"]
RANK = {name: k for k, name in enumerate(LAYERS)}
RANK.update(errors=RANK["torchapi"], config=RANK["torchapi"], compress=RANK["api"],
            build=RANK["api"])  # leaves (compress uses capture's traceable hooks)


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
    fake = ROOT / "capture" / "nodes.py"
    src = "from ..runtime import run\nfrom compiled_bw.api import enable\nfrom . import walk\n"
    monkeypatch.setattr(pathlib.Path, "read_text", lambda self: src)
    assert [t for _, t in _imports(fake)] == ["runtime", "api", "capture"]


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
