import os
import sys

sys.path.insert(0, os.path.dirname(__file__))


def _fastwalk_requested() -> bool:
    return os.environ.get("COMPILED_BW_FASTWALK", "0") not in ("", "0")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """COMPILED_BW_FASTWALK=1: say how many steps the C++ walk did (capture/fastwalk.py)."""
    if not _fastwalk_requested():
        return
    from compiled_bw.capture import fastwalk
    c = fastwalk.counters()
    terminalreporter.write_line(
        f"C++ walk: {c['fast_walks']} steps walked in C++, {c['py_walks']} by the Python walk "
        f"(gave up: {c['gave_up']}){' UNAVAILABLE: ' + c['error'] if c['error'] else ''}")


def pytest_sessionfinish(session, exitstatus):
    if _fastwalk_requested():
        from compiled_bw.capture import fastwalk
        if fastwalk.counters()["error"]:
            session.exitstatus = 1      # the C++ walk was asked for but could not be loaded
