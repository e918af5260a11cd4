"""The OpInfo sweep in CI: every 4th autograd op of op_db on the eager backend (all of them, about
eight minutes on 2 cores, in tools/full_check.sh), the same ops again with every graph symbolic
(`dynamic=True`, six samples per dtype unreset: about 50 s), and
every 24th op on the Inductor backend (about 100 s on 2 cores with a cold Inductor cache:
Inductor compiles take ~3.5 s each; float32, one sample, grad() and backward()).

The report is written by `python tests/opinfo_sweep.py` (tests/OPINFO.md; with
COMPILED_BW_OPINFO_BACKEND=inductor its Inductor section).  An op fails the test only on
MISMATCH or CRASH; fallbacks are allowed (they are reported, with reasons).
COMPILED_BW_OPINFO_EVERY=N runs every N-th op only on the eager backend,
COMPILED_BW_OPINFO_INDUCTOR_EVERY=N (default 24; 0 = none) on Inductor.
"""
import os

import pytest
from conftest import FULL_CHECK
from opinfo_sweep import autograd_ops, check_op, op_id, settings, subset

pytestmark = pytest.mark.slow   # `pytest -m "not slow"` leaves it out

# every 4th op in CI, all of them in tools/full_check.sh (tests/conftest.py Note [Full check])
_EVERY = "1" if FULL_CHECK else "4"
OPS = subset(autograd_ops(), every=int(os.environ.get("COMPILED_BW_OPINFO_EVERY", _EVERY)))
_IND_EVERY = int(os.environ.get("COMPILED_BW_OPINFO_INDUCTOR_EVERY", "24"))
INDUCTOR_OPS = subset(autograd_ops(), every=_IND_EVERY) if _IND_EVERY > 0 else []


@pytest.mark.parametrize("op", OPS, ids=[op_id(o) for o in OPS])
def test_op_grads_match_eager(op):
    cls, found = check_op(op)
    assert cls not in ("MISMATCH", "CRASH"), f"{op_id(op)}: {cls}: {found[cls]}"


# ops whose symbolic graphs the whole sweep found wrong once (a squeeze of a symbolic size of 1:
# torchapi/dynamo.py Note [Squeezes in a symbolic trace]), whatever the subset
_SYMBOLIC_FOUND = ("nn.functional.conv1d", "nn.functional.conv_transpose2d", "vstack")
SYMBOLIC_OPS = OPS + [o for o in autograd_ops() if op_id(o) in _SYMBOLIC_FOUND and o not in OPS]


@pytest.mark.parametrize("op", SYMBOLIC_OPS, ids=[op_id(o) for o in SYMBOLIC_OPS])
def test_op_grads_match_eager_symbolic(op):
    # opinfo_sweep.py dynamic_mode(): every graph symbolic from its first capture (dynamic=True),
    # six samples of each dtype without a reset, so a sample of another size that builds the
    # same autograd graph runs the dynamic graph an earlier one captured
    cls, found = check_op(op, max_samples=6, backward=False, dynamic=True)
    assert cls not in ("MISMATCH", "CRASH"), f"{op_id(op)} (symbolic): {cls}: {found[cls]}"


@pytest.mark.parametrize("op", INDUCTOR_OPS, ids=[op_id(o) for o in INDUCTOR_OPS])
def test_op_grads_match_eager_on_inductor(op):
    pytest.importorskip("torch._inductor.compile_fx")
    dtypes, samples, backward = settings("inductor")
    cls, found = check_op(op, dtypes, samples, "inductor", backward)
    assert cls not in ("MISMATCH", "CRASH"), f"{op_id(op)} (inductor): {cls}: {found[cls]}"
    if cls == "FALLBACK":   # a failed Inductor compile is a fallback: say which, never hide it
        assert not any("compile" in d for d in found["FALLBACK"]), found["FALLBACK"]
