"""Graph snapshots on every torch release: the inline text is the recorded release's; others
compare against a file of their own.

Consumes a test's captured graph text and its inline expectation; produces a pass, or an
assertion showing the diff.  The aten text of a capture differs between torch releases (their
decompositions and autograd formulas do), so the inline snapshot holds the text of
RECORDED and each other release keeps its own copy in tests/snapshots/torch_X_Y/NAME.txt.
`EXPECTTEST_ACCEPT=1 python -m pytest tests/test_graph_snapshots.py tests/test_aot.py`, run on
a release, refreshes that release's text (inline or file); review the diff like code.
"""
from __future__ import annotations

import os

import torch

RECORDED = "2.13"          # the release whose text the inline snapshots hold (CI's whole suite)
RELEASE = ".".join(torch.__version__.split("+")[0].split(".")[:2])
HERE = os.path.dirname(os.path.abspath(__file__))


def check(tc, actual: str, expect: str, name: str | None = None) -> None:
    """tc.assertExpectedInline on RECORDED; on any other release, the file of that release
    (named after the test method, or `name`)."""
    name = name or tc._testMethodName
    if RELEASE == RECORDED:
        tc.assertExpectedInline(actual, expect, skip=1)
        return
    path = os.path.join(HERE, "snapshots", f"torch_{RELEASE.replace('.', '_')}", f"{name}.txt")
    if os.environ.get("EXPECTTEST_ACCEPT"):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(actual + "\n")
        return
    assert os.path.exists(path), (
        f"no graph snapshot of {name} for torch {RELEASE} ({path}): record it by running "
        "EXPECTTEST_ACCEPT=1 python -m pytest tests/test_graph_snapshots.py tests/test_aot.py on "
        "that release, then review the text")
    with open(path) as f:
        tc.assertMultiLineEqual(f.read().rstrip("\n"), actual)
