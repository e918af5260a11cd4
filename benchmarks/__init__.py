"""compiled_bw's benchmark harness: `python -m benchmarks` (see benchmarks/__main__.py)."""
