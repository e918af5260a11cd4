"""The OpInfo sweep in CI: every autograd op of op_db (about a minute).

The report is written by `python tests/opinfo_sweep.py` (tests/OPINFO.md).  An op fails the
test only on MISMATCH or CRASH; fallbacks are allowed (they are reported, with reasons).
COMPILED_BW_OPINFO_EVERY=N runs every N-th op only.
"""
import os

import pytest
from opinfo_sweep import autograd_ops, check_op, op_id, subset

pytestmark = pytest.mark.slow   # `pytest -m "not slow"` leaves it out

OPS = subset(autograd_ops(), every=int(os.environ.get("COMPILED_BW_OPINFO_EVERY", "1")))


@pytest.mark.parametrize("op", OPS, ids=[op_id(o) for o in OPS])
def test_op_grads_match_eager(op):
    cls, found = check_op(op)
    assert cls not in ("MISMATCH", "CRASH"), f"{op_id(op)}: {cls}: {found[cls]}"
