"""The documentation cannot rot: every ```python block of README.md and of the Markdown pages
under docs/ is a complete program, and each one runs here, in a fresh process of its own (so no
block can leak state into another: installed hooks, caches, the C++ walk's memo), one test per
block named file:line.  A block that raises (or runs past TIMEOUT) fails its test.

Blocks run on the CPU (GPUs hidden, unless COMPILED_BW_TEST_DEVICE=cuda: then the blocks' own
`torch.cuda.is_available()` branches run too), with this checkout first on the import path, in
a temporary working directory.  ```bash blocks and other languages are not run.  Also checked:
the collector finds the blocks and a broken block fails when run the same way (so this file
cannot pass by collecting nothing), the README stays short (issue #40: <= 160 lines), and the
README's two commands are the first lines .ci/run and tools/*.sh grep out of it.

Consumes README.md and docs/**/*.md.
"""
from __future__ import annotations

import glob
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMEOUT = 120       # seconds per block; an Inductor block takes ~10-20 s on 2 cores
README_MAX_LINES = 160


def doc_files() -> list[str]:
    """README.md and every Markdown page under docs/ (ARCHITECTURE.md included), repo-relative."""
    found = glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True)
    return ["README.md", *sorted(os.path.relpath(f, ROOT) for f in found)]


def python_blocks(path: str) -> list[tuple[int, str]]:
    """(line of the opening fence, code) for each ```python fenced block of a Markdown file."""
    blocks, lang, start, code = [], None, 0, []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            stripped = line.strip()
            if lang is None:
                if stripped.startswith("```"):
                    lang, start, code = stripped[3:].strip().lower(), n, []
            elif stripped == "```":
                if lang in ("python", "py"):
                    blocks.append((start, "".join(code)))
                lang = None
            else:
                code.append(line)
    assert lang is None, f"{path}:{start}: a ``` block is never closed"
    return blocks


def run_block(code: str, cwd: str) -> subprocess.CompletedProcess:
    """Run one block as `python -c code` in a fresh process; never raises on the block's failure
    (a timeout comes back as returncode None)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (ROOT, os.environ.get("PYTHONPATH", "")) if p)}
    env.setdefault("COMPILED_BW_REPRO_DIR", os.path.join(cwd, "repros"))
    if os.environ.get("COMPILED_BW_TEST_DEVICE", "cpu") != "cuda":
        env["CUDA_VISIBLE_DEVICES"] = ""
    try:
        return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=TIMEOUT, check=False)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = (e.stderr or b"").decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        return subprocess.CompletedProcess(e.cmd, None, out, err + f"\n(timed out after {TIMEOUT} s)")


def _all_blocks() -> list:
    params = []
    for rel in doc_files():
        for line, code in python_blocks(os.path.join(ROOT, rel)):
            marks = [pytest.mark.slow] if 'enable(backend="inductor"' in code else []
            params.append(pytest.param(rel, line, code, id=f"{rel}:{line}", marks=marks))
    return params


BLOCKS = _all_blocks()


@pytest.fixture(scope="module")
def built_walk():
    """The C++ walk built before the first block runs: on a fresh machine its build (1-3 minutes
    on 2 cores, once) would otherwise fall into one block's TIMEOUT.  A machine that cannot build
    it runs the blocks with the Python walk, as users would."""
    subprocess.run([sys.executable, "-m", "compiled_bw.build"], cwd=ROOT, capture_output=True,
                   timeout=1200, check=False)


@pytest.mark.parametrize(("path", "line", "code"), BLOCKS)
def test_block_runs(path, line, code, tmp_path, built_walk):
    r = run_block(code, str(tmp_path))
    numbered = "\n".join(f"{line + i:4d}  {s}" for i, s in enumerate(code.splitlines(), 1))
    assert r.returncode == 0, (
        f"the python block at {path}:{line} failed (exit {r.returncode}):\n{numbered}\n"
        f"--- stdout ---\n{r.stdout[-3000:]}\n--- stderr ---\n{r.stderr[-6000:]}")


def test_collector_finds_the_blocks_and_a_broken_one_fails(tmp_path):
    files = doc_files()
    for page in ("README.md", "docs/guide.md", "docs/semantics.md", "docs/troubleshooting.md"):
        assert page in files, files
    assert len(BLOCKS) >= 10, [p.id for p in BLOCKS]
    assert {p.values[0] for p in BLOCKS} >= {"README.md", "docs/guide.md",
                                            "docs/troubleshooting.md"}
    page = tmp_path / "page.md"
    page.write_text("# A page\n\n```bash\nexit 1\n```\n\n```python\nx = 1\nprint(x)\n```\n\n"
                    "Text.\n\n```python\nx = 1\nassert x == 2, 'broken on purpose'\n```\n")
    blocks = python_blocks(str(page))
    assert [line for line, _ in blocks] == [7, 14], blocks
    good, broken = (run_block(code, str(tmp_path)) for _, code in blocks)
    assert good.returncode == 0 and good.stdout == "1\n", good.stderr
    assert broken.returncode == 1 and "broken on purpose" in broken.stderr, broken


def test_readme_is_short():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        n = len(f.read().splitlines())
    assert n <= README_MAX_LINES, (
        f"README.md has {n} lines (at most {README_MAX_LINES}): move the details to docs/")


def test_readme_commands_come_first():
    """.ci/run, tools/release_check.sh and tools/gpu_check.sh run the first README line that
    starts with `pip install` and the first that starts with `python -m pytest`: both must be
    the two lines of the README's first ```bash block."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    first = lines.index("```bash")
    pip = next(i for i, s in enumerate(lines) if s.startswith("pip install"))
    test = next(i for i, s in enumerate(lines) if s.startswith("python -m pytest"))
    assert (pip, test) == (first + 1, first + 2), (first, pip, test)
    assert "python -m benchmarks --quick" in lines[pip] and " tests" in lines[test]


def _anchors(path: str) -> set[str]:
    """GitHub's anchors for the headings of a Markdown file (lowercase, punctuation dropped,
    spaces as hyphens, repeats numbered)."""
    seen: dict[str, int] = {}
    out = set()
    in_code = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip().startswith("```"):
                in_code = not in_code
            if in_code or not re.match(r"#{1,6} ", line):
                continue
            slug = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def test_links_point_to_files_and_headings_that_exist():
    """Every relative link [text](path#anchor) of README.md and docs/ names a file of this
    checkout and, with an anchor into a Markdown file, one of its headings."""
    broken = []
    for rel in doc_files():
        path = os.path.join(ROOT, rel)
        with open(path, encoding="utf-8") as f:
            text = re.sub(r"```.*?```", "", f.read(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+://|mailto:", target):
                continue
            file, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
            if not os.path.exists(dest):
                broken.append(f"{rel}: {target} (no such file)")
            elif anchor and dest.endswith(".md") and anchor not in _anchors(dest):
                broken.append(f"{rel}: {target} (no such heading)")
    assert not broken, "\n".join(broken)
