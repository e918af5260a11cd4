"""Stub for PyTorch's test/test_autograd.py (harness shim, see ../conftest.py): no tests.
test_compiled_autograd.py wraps TestAutograd / TestNestedCheckpoint in compiled autograd; on a
CPU-only machine most of them run unwrapped (inductor backend skipped), and test_autograd.py
under compiled_bw is covered by tools/torch_suite/run_suite.sh already."""
import unittest


class TestAutograd(unittest.TestCase):
    pass


class TestNestedCheckpoint(unittest.TestCase):
    pass
