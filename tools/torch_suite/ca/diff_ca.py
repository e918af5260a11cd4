"""Diff out/<base>.jsonl (noop: eager autograd) against out/<other>.jsonl (compiled_bw).

Runs ../diff_suite.py's report (counts, reference-passing tests not passing under compiled_bw
with their errors and stats, fallback reasons, and out/<other>_captured.txt: the tests that ran
a compiled graph), then what diff_suite.py does not look at: unittest.expectedFailure tests
whose outcome differs between the two runs (an expectedFailure test that passes under eager
autograd is an "unexpected success", reported as failed), and how many tests entered the patched
compiled-autograd entry point at all (stats.ca_enters).

Usage (from this directory): python diff_ca.py [base=noop] [other=cbw_eager]
"""
import os
import re
import sys
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import diff_suite


def xml_lines(tag):
    """{nodeid suffix "Class::test": [line numbers of test_compiled_autograd.py frames]} from
    out/<tag>.xml (pytest's junit report keeps each failure's traceback)."""
    res = {}
    path = f"out/{tag}.xml"
    if not os.path.exists(path):
        return res
    for tc in ET.parse(path).getroot().iter("testcase"):
        for child in tc:
            if child.tag in ("failure", "error"):
                text = (child.text or "") + (child.get("message") or "")
                key = tc.get("classname").split(".")[-1] + "::" + tc.get("name")
                res[key] = [int(m) for m in re.findall(r"test_compiled_autograd\.py:(\d+):", text)]
    return res


def fail_site(rec, xl):
    lines = rec.get("err_lines")
    if lines is None:
        lines = xl.get("::".join(rec["nodeid"].split("::")[-2:]), [])
    return (rec["error"].split(":")[0], lines[-1] if lines else None)


def main():
    base_p = sys.argv[1] if len(sys.argv) > 1 else "noop"
    other_p = sys.argv[2] if len(sys.argv) > 2 else "cbw_eager"
    sys.argv = [sys.argv[0], base_p, other_p]
    diff_suite.main()
    base, other = diff_suite.load(base_p), diff_suite.load(other_p)
    print("\noutcome differs (any direction, incl. xfail/unexpected success):")
    for n in sorted(set(base) & set(other)):
        b, o = base[n]["outcome"], other[n]["outcome"]
        if b != o:
            print(f"  {b:8s} -> {o:8s} {n}\n           {other_p} error: {other[n]['error'][:200]}")
    xb, xo = xml_lines(base_p), xml_lines(other_p)
    print("\nfailing under both, at a different place or with a different exception type "
          "(e.g. the reference fails at a counter assertion, compiled_bw earlier at the "
          "result comparison):")
    for n in sorted(set(base) & set(other)):
        if base[n]["outcome"] in ("failed", "error") and other[n]["outcome"] in ("failed", "error"):
            fb, fo = fail_site(base[n], xb), fail_site(other[n], xo)
            if fb != fo:
                print(f"  {n}\n      {base_p}: {fb} {base[n]['error'][:150]}\n"
                      f"      {other_p}: {fo} {other[n]['error'][:150]}")
    entered = [n for n, r in other.items() if (r.get("stats") or {}).get("ca_enters")]
    print(f"\ntests that entered compiled_autograd._enable under {other_p}: {len(entered)}")


if __name__ == "__main__":
    main()
