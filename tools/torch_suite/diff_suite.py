"""Diff the per-test outcomes of an eager run and a compiled_bw run of PyTorch's autograd tests.

Consumes: out/<base>.jsonl and out/<other>.jsonl written by conftest.py (a mode "a+b" merges
  out/a.jsonl and out/b.jsonl, later lines win).
Produces (stdout): outcome counts per mode; every test that passes under eager and fails or
  errors under compiled_bw (with its error); tests that pass under compiled_bw only through
  fallbacks; fallback reasons aggregated; and out/<other>_captured.txt, the node ids of tests
  that ran at least one compiled graph, captured there or reused from the cache (input for the
  Inductor re-run: a test that only reused graphs an earlier test captured captures them itself
  when the Inductor run does not run that earlier test first).

Usage: python diff_suite.py [base_prefix=eager] [other_prefix=cbw_eager]
"""
import collections
import glob
import json
import re
import sys


def load(prefix):
    res = {}
    for path in [p for part in prefix.split("+") for p in sorted(glob.glob(f"out/{part}.jsonl"))]:
        for line in open(path):
            rec = json.loads(line)
            nid = rec["nodeid"]
            if rec["when"] == "call" or rec["outcome"] in ("error", "skipped"):
                if rec["when"] != "call" and nid in res and res[nid]["when"] == "call" \
                        and rec["outcome"] != "error":
                    continue
                if rec["when"] == "teardown" and nid in res:   # error in teardown after a call
                    res[nid] = dict(res[nid], outcome="error", error=rec["error"])
                    continue
                res[nid] = rec
    return res


def norm_reason(r):
    r = re.sub(r"0x[0-9a-f]+", "0x…", r)
    r = re.sub(r"\d+", "N", r)
    return r[:160]


def main():
    base_p = sys.argv[1] if len(sys.argv) > 1 else "eager"
    other_p = sys.argv[2] if len(sys.argv) > 2 else "cbw_eager"
    base, other = load(base_p), load(other_p)
    for name, res in ((base_p, base), (other_p, other)):
        c = collections.Counter(r["outcome"] for r in res.values())
        print(f"{name}: {len(res)} tests: {dict(sorted(c.items()))}")
    base_pass = {n for n, r in base.items() if r["outcome"] == "passed"}
    print(f"\npassing under {base_p}: {len(base_pass)}")
    ran = [n for n in base_pass if n in other]
    missing = sorted(base_pass - set(other))
    if missing:
        print(f"not run under {other_p} (crashed run / not collected): {len(missing)}")
        for n in missing[:50]:
            print("   ", n)
    bad = sorted(n for n in ran if other[n]["outcome"] not in ("passed",))
    print(f"\neager-passing, not passing under {other_p}: {len(bad)}")
    for n in bad:
        r = other[n]
        st = r.get("stats") or {}
        print(f"  {r['outcome']:8s} {n}\n           error: {r['error'][:300]}\n"
              f"           captures={st.get('captures')} fallbacks={st.get('fallbacks')} "
              f"reasons={[x[:120] for x in st.get('fallback_reasons', [])][:3]}")
    fixed = sorted(n for n, r in other.items()
                   if r["outcome"] == "passed" and n in base and base[n]["outcome"] != "passed")
    if fixed:
        print(f"\npassing under {other_p} but not under {base_p}: {len(fixed)}")
        for n in fixed:
            print(f"  {base[n]['outcome']:8s} {n}: {base[n]['error'][:200]}")

    captured, fb_only, none_ran, mixed, hits_only = [], [], [], [], []
    reasons = collections.Counter()
    reason_tests = collections.defaultdict(set)
    notes = collections.Counter()
    for n in ran:
        st = other[n].get("stats")
        if not st:
            continue
        for r in st["fallback_reasons"]:
            k = norm_reason(r)
            reasons[k] += 1
            reason_tests[k].add(n)
        for x in st.get("notes", []):
            notes[norm_reason(x)] += 1
        compiled = st["captures"] > 0 or st.get("cache_hits", 0) > 0
        if compiled:
            captured.append(n)
        if other[n]["outcome"] == "passed":
            if not compiled and st["fallbacks"] > 0:
                fb_only.append(n)
            elif compiled and st["fallbacks"] > 0:
                mixed.append(n)
            elif st["captures"] == 0 and st["fallbacks"] == 0:
                (hits_only if compiled else none_ran).append(n)
    print(f"\nof the {len(ran)} eager-passing tests run under {other_p}:")
    print(f"  ran >=1 compiled graph (captured or reused): {len(captured)}")
    print(f"    of which only reused graphs captured by earlier tests: {len(hits_only)}")
    print(f"  passed with fallbacks only (nothing compiled): {len(fb_only)}")
    print(f"  passed with compiled graphs and fallbacks: {len(mixed)}")
    print(f"  passed with no backward through compiled_bw at all: {len(none_ran)}")
    cats = collections.Counter()
    cat_tests = collections.defaultdict(set)
    for k, v in reasons.items():
        c = re.split(r"; |: ", k)[0]
        cats[c] += v
        cat_tests[c] |= reason_tests[k]
    print("\nfallback reason categories (fallbacks, tests):")
    for k, v in cats.most_common():
        print(f"  {v:5d} {len(cat_tests[k]):4d}  {k}")
    print(f"\nfallback reasons (count of fallbacks, count of tests), {sum(reasons.values())} fallbacks:")
    for k, v in reasons.most_common():
        print(f"  {v:5d} {len(reason_tests[k]):4d}  {k}")
    if notes:
        print("\nnotes (compiled with a documented deviation):")
        for k, v in notes.most_common():
            print(f"  {v:5d}  {k}")
    only = collections.Counter()
    for n in fb_only:
        cs = {re.split(r"; |: ", norm_reason(r))[0] for r in other[n]["stats"]["fallback_reasons"]}
        for c in cs:
            only[c] += 1
    print(f"\ntests passing only through fallbacks ({len(fb_only)}), per reason category "
          "(a test with several categories counts once in each):")
    for k, v in only.most_common():
        print(f"  {v:4d}  {k}")
    print("\ntests passing only through fallbacks:")
    for n in sorted(fb_only):
        rs = sorted({norm_reason(r)[:90] for r in other[n]['stats']['fallback_reasons']})
        print(f"  {n}  <- {rs[:2]}")
    with open(f"out/{other_p.replace('+', '_')}_captured.txt", "w") as f:
        f.write("\n".join(sorted(captured)) + "\n")


if __name__ == "__main__":
    main()
