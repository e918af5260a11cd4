"""Report: the results table (stdout and Markdown) and PNG charts.

Consumes the results dict of `python -m benchmarks`; produces text lines, a Markdown table, and
(with matplotlib, the `bench` extra) grouped bars of the time ratio vs eager per model.
"""
from __future__ import annotations

import os


def cell(c: dict) -> str:
    if "error" in c:
        return f"n/a ({c['error']})"
    flag = " FAIL" if c["fail"] else ""
    fb = f" fb={c['fallbacks']}" if c["fallbacks"] else ""
    return f"{c['ratio']:.2f}x ({c['median_ms']:.2f} ms, first {c['first_ms']:.0f} ms){fb}{flag}"


def table(results: dict, modes: list) -> list:
    lines = ["| model | walk µs | " + " | ".join(modes) + " |",
             "|---|---:|" + "---|" * len(modes)]
    for model, r in results.items():
        lines.append(f"| {model} | {r['nodes_overhead_us']:.0f} | "
                     + " | ".join(cell(r[m]) for m in modes) + " |")
    return lines


def charts(results: dict, modes: list, out_dir: str) -> list:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    models = list(results)
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(models)), 4))
    width = 0.8 / max(1, len(modes))
    for k, m in enumerate(modes):
        vals = [results[mod][m].get("ratio", 0) or 0 for mod in models]
        ax.bar([i + k * width for i in range(len(models))], vals, width, label=m)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks([i + width * (len(modes) - 1) / 2 for i in range(len(models))])
    ax.set_xticklabels(models)
    ax.set_ylabel("backward time / eager autograd (lower is better)")
    ax.set_title("Steady-state backward time vs eager autograd")
    ax.legend()
    fig.tight_layout()
    path = os.path.join(out_dir, "time_ratio.png")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return [path]
