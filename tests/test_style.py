"""House style is checked like behaviour: ruff (rules in pyproject.toml) must be clean."""
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
