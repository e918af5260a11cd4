"""A backend with a wrong kernel, for tests/test_verify.py: it compiles nothing and adds 1e-2
to the graph's first output (a module of its own, so a repro script in a fresh process can
import it by file)."""


def off_by_a_bit(gm, example_inputs):
    def run(*args):
        out = list(gm(*args))
        out[0] = out[0] + 1e-2
        return out
    return run


def raises(gm, example_inputs):
    raise RuntimeError("this backend cannot compile anything")
