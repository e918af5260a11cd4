"""Report: the results table (stdout and Markdown) and PNG charts.

Consumes the results dict of `python -m benchmarks`; produces text lines, a Markdown table, and
(with matplotlib, the `bench` extra) grouped bars of the time ratio vs eager per model.
"""
from __future__ import annotations

import os


def _na(c: dict) -> str | None:
    return f"n/a ({c['error']})" if "error" in c else None


def cell(c: dict) -> str:
    """Steady state: ratio to eager (median ms), fallbacks, FAIL on a wrong grad."""
    if _na(c):
        return _na(c)
    flag = " **FAIL**" if c["fail"] else ""
    fb = f" fb={c['fallbacks']}" if c["fallbacks"] else ""
    return f"{c['ratio']:.2f}x ({c['median_ms']:.2f} ms){fb}{flag}"


def first_cell(c: dict) -> str:
    """First backward; and when the compiled code is in use, if later (background compile)."""
    if _na(c):
        return "n/a"
    first, ready = c["first_ms"] / 1e3, c["ready_ms"] / 1e3
    return f"{first:.2f} s" + (f" (ready {ready:.1f} s)" if ready > first * 1.2 + 0.05 else "")


def memory_cell(c: dict, base: dict) -> str:
    if _na(c):
        return "n/a"
    ratio = f" ({c['peak_mb'] / base['peak_mb']:.2f}x)" if base.get("peak_mb") else ""
    return f"{c['peak_mb']:.1f}{ratio}"


def table(results: dict, modes: list) -> list:
    """Markdown: steady-state time, first backward, peak memory during backward; then the
    varying-shapes table (varying_table) when that model ran."""
    varying = {k: r for k, r in results.items() if r.get("kind") == "varying"}
    results = {k: r for k, r in results.items() if k not in varying}
    if not results:
        return varying_table(varying, modes)
    head = " | ".join(modes)
    lines = ["Steady-state backward time, ratio to eager autograd (median ms):", "",
             f"| model | walk µs | {head} |", "|---|---:|" + "---|" * len(modes)]
    for model, r in results.items():
        lines.append(f"| {model} | {r['nodes_overhead_us']:.0f} | "
                     + " | ".join(cell(r[m]) for m in modes) + " |")
    lines += ["", ("First backward (capture + compile), cold Inductor cache; \"ready\": compiled "
              "code in use (background compile):"), "",
              f"| model | {head} |", "|---|" + "---|" * len(modes)]
    for model, r in results.items():
        lines.append(f"| {model} | " + " | ".join(first_cell(r[m]) for m in modes) + " |")
    lines += ["", "Peak live tensor MB during one backward (ratio to eager):", "",
              f"| model | {head} |", "|---|" + "---|" * len(modes)]
    for model, r in results.items():
        lines.append(f"| {model} | " + " | ".join(memory_cell(r[m], r.get("eager", {}))
                                                   for m in modes) + " |")
    if varying:
        lines += [""] + varying_table(varying, modes)
    return lines


def varying_table(results: dict, modes: list) -> list:
    """Markdown, one row per mode: the varying-shapes model (benchmarks/varying_shapes.py)."""
    lines = []
    for model, r in results.items():
        lines += [(f"{model} ({r['config']}; every mode the same sequence of shapes, "
                   "interleaved step by step): total = zero_grad + forward + backward of every "
                   "step, compiles included; steady = the backward of the "
                   f"{len(r.get('steady_steps', ()))} steps after the first third in which no "
                   "mode captured or compiled, summed:"), "",
                  ("| mode | total s (ratio) | steady backward ms (ratio) | captures | dynamic "
                   "| Inductor compiles | fallbacks | max grad diff |"),
                  "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for m in modes:
            c = r.get(m)
            if c is None:
                continue
            if _na(c):
                lines.append(f"| {m} | {_na(c)} | | | | | | |")
                continue
            def n(k, c=c):
                return "-" if c.get(k) is None else str(c[k])
            flag = " **FAIL**" if c["fail"] else ""
            lines.append(f"| {m} | {c['total_s']:.1f} ({c['total_ratio']:.2f}x) | "
                         f"{c['steady_ms']:.0f} ({c['steady_ratio']:.2f}x) | {n('captures')} | "
                         f"{n('dynamic_captures')} | {n('inductor_compiles')} | "
                         f"{n('fallbacks')} | {c['maxdiff']:.1e}{flag} |")
        vs = r.get("dynamic_vs_static")
        if isinstance(vs, str):
            lines += ["", f"cbw-inductor's dynamic graph vs a static graph: {vs}"]
        elif vs is not None and not vs:
            lines += ["", ("cbw-inductor's dynamic graph vs a static graph: no compared size "
                           "ran the dynamic graph")]
        elif vs:
            lines += ["", "cbw-inductor's dynamic graph vs a static graph of the same size "
                      "(backward ms, medians, interleaved): " + "; ".join(
                          f"{b}x{t}: {d:.1f} vs {s_:.1f} ({d / s_:.2f}x)"
                          for (b, t), d, s_ in vs)]
        lines.append("")
    return lines


def _bars(results: dict, modes: list, value, ylabel: str, title: str, path: str, ref=None):
    import matplotlib.pyplot as plt
    models = list(results)
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(models)), 4))
    width = 0.8 / max(1, len(modes))
    for k, m in enumerate(modes):
        vals = [value(results[mod][m]) for mod in models]
        ax.bar([i + k * width for i in range(len(models))], vals, width, label=m)
    if ref is not None:
        ax.axhline(ref, color="black", linewidth=0.8)
    ax.set_xticks([i + width * (len(modes) - 1) / 2 for i in range(len(models))])
    ax.set_xticklabels(models)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def charts(results: dict, modes: list, out_dir: str) -> list:
    results = {k: r for k, r in results.items() if r.get("kind") != "varying"}
    if not results:
        return []
    try:
        import matplotlib
        matplotlib.use("Agg")
    except ImportError:
        return []
    return [
        _bars(results, modes, lambda c: c.get("ratio", 0) or 0,
              "backward time / eager autograd (lower is better)",
              "Steady-state backward time vs eager autograd",
              os.path.join(out_dir, "time_ratio.png"), ref=1.0),
        _bars(results, modes, lambda c: c.get("peak_mb", 0) or 0,
              "peak live tensor MB during backward",
              "Peak memory during one backward",
              os.path.join(out_dir, "peak_memory.png")),
    ]
