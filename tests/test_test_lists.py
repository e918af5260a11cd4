"""The test lists tests/conftest.py keeps by name (Note [Release tests], Note [Full check]):
every name is a collected test, so a rename cannot silently drop a test from the release
matrix or move it out of CI.

Consumes conftest's RELEASE_SLOW and FULL_CHECK_ONLY and pytest's collection of tests/.
"""
import os
import subprocess
import sys

import conftest

HERE = os.path.dirname(os.path.abspath(__file__))


def test_listed_tests_exist():
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                          "-p", "no:cacheprovider", HERE], capture_output=True, text=True,
                         timeout=600, cwd=os.path.dirname(HERE), check=False).stdout
    ids = {line.rsplit("/", 1)[-1] for line in out.splitlines() if "::" in line}
    assert len(ids) > 1000, out[-2000:]
    # a module that skips as a whole (test_real_models.py without transformers) collects none
    files = {i.split("::")[0] for i in ids}
    for name, listed in (("RELEASE_SLOW", conftest.RELEASE_SLOW),
                         ("FULL_CHECK_ONLY", conftest.FULL_CHECK_ONLY)):
        missing = sorted(n for n in listed if n not in ids and n.split("::")[0] in files)
        assert not missing, f"tests/conftest.py {name} names tests that do not exist: {missing}"
