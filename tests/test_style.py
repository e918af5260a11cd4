"""House style is checked like behaviour: ruff (rules in pyproject.toml) must be clean, and the
C++ walk's sources must be as clang-format (rules in .clang-format) writes them."""
import glob
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_ruff_clean():
    if shutil.which("ruff") is None and subprocess.run(
            [sys.executable, "-m", "ruff", "--version"], capture_output=True, check=False).returncode:
        pytest.skip("ruff is not installed (pip install -e '.[test]' installs it)")
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "compiled_bw", "tests", "benchmarks",
                        "tools", "kernels"], cwd=ROOT, capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stdout + r.stderr


def test_clang_format_clean():
    exe = shutil.which("clang-format")
    if exe is None:
        pytest.skip("clang-format is not installed (pip install -e '.[test]' installs it)")
    files = sorted(glob.glob(os.path.join(ROOT, "compiled_bw", "**", "*.cpp"), recursive=True)
                   + glob.glob(os.path.join(ROOT, "compiled_bw", "**", "*.h"), recursive=True))
    assert len(files) >= 5, f"the C++ walk's sources were not found: {files}"
    r = subprocess.run([exe, "--dry-run", "-Werror", "--style=file", *files], cwd=ROOT,
                       capture_output=True, text=True, check=False)
    assert r.returncode == 0, (
        "C++ sources differ from clang-format's output (run `clang-format -i "
        "compiled_bw/walk/cpp/_fastwalk*.h compiled_bw/walk/cpp/_fastwalk*.cpp`):\n"
        + (r.stdout + r.stderr)[-4000:])


def test_no_iostreams_in_the_cpp_walk():
    """Note [No iostreams in the walk] (_fastwalk.h): formatting into a std::ostream inside the
    extension crashed a GPU image's torch 2.11 (built with GCC 13.3), so none may come back."""
    files = sorted(glob.glob(os.path.join(ROOT, "compiled_bw", "**", "_fastwalk*.*"), recursive=True))
    found = []
    for f in files:
        if not f.endswith((".cpp", ".h")):
            continue
        for n, line in enumerate(open(f), 1):
            code = line.split("//", 1)[0]
            if any(w in code for w in ("stringstream", "std::cout", "std::cerr", "<sstream>",
                                       "<iostream>", "std::ostream")):
                found.append(f"{os.path.relpath(f, ROOT)}:{n}: {line.strip()}")
    assert len(files) >= 5, files
    assert not found, "std::ostream use in the C++ walk:\n" + "\n".join(found)
