#!/usr/bin/env bash
# compiled_bw on a GPU machine, in one command: the CUDA tests, the differential suites with
# tensors on the GPU, and the GPU benchmark.  Run in the repository root:
#   bash tools/gpu_check.sh OUTDIR            # on a machine with a CUDA device
#   bash tools/gpu_check.sh OUTDIR --dry-run  # anywhere: the same steps, CPU-sized, no GPU
#   bash tools/gpu_check.sh OUTDIR --full     # also the full GPU benchmark (several minutes)
#   bash tools/gpu_check.sh OUTDIR --bench M  # only the full GPU benchmark of models M (e.g.
#        overhead,pointwise; pinn,gradient_penalty: the create_graph=True steps of
#        benchmarks/higher_order.py): the device tool allows 10 minutes a command, so a session
#        runs the checks in one command and the full benchmark in parts
#   GPU_CHECK_BUDGET=S bash tools/gpu_check.sh ...  # end within S seconds: each step's limit is
#        cut to what is left, a step that cannot start with 30 s left is SKIPPED (and the run
#        FAILED: not whole).  The CPU suite runs last: it is the one a CPU machine can redo.
# Installs the project as a user on that machine would, over its preinstalled torch and with
# no package index: `pip install --no-deps --no-build-isolation -e .` (the machine's torch,
# pytest and Triton are used as they are); where even that cannot run, the checkout goes on
# PYTHONPATH.  Without torch at all, it runs the README's install command.  Writes OUTDIR/{env.txt,build.log,private_api.log,cuda_tests.log,
# suites_cuda.log,cpu_suite.log,failures.log,bench/latest.md,bench/latest.json,summary.txt}; exits
# non-zero if a step failed.  failures.log: every failed test's traceback as it happens (a step
# cut off by its limit prints no summary).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: tools/gpu_check.sh OUTDIR [--dry-run|--full|--bench MODELS]}
mode=${2:-}
mkdir -p "$out/bench"
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
if ! "$PY" -c "import torch" 2>/dev/null; then
  install_cmd=$(grep -m1 '^pip install' README.md | sed 's/ *#.*//')
  echo "+ $install_cmd"; eval "$install_cmd" || exit 1
elif ! "$PY" -m pip install -q --no-deps --no-build-isolation -e . >"$out/install.log" 2>&1; then
  echo "pip install --no-deps -e . failed ($out/install.log): the checkout goes on PYTHONPATH"
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
export COMPILED_BW_FAILURE_LOG="$out/failures.log"   # tests/conftest.py
export TORCHINDUCTOR_CACHE_DIR="${TORCHINDUCTOR_CACHE_DIR:-$(mktemp -d)}"
status=0
# pytest-xdist (on GPU machines' images): the tests' compiles run in parallel
par=$("$PY" -c "import xdist" 2>/dev/null && echo "-n 8 -p no:benchmark" || true)
budget=${GPU_CHECK_BUDGET:-100000}
step() {  # step NAME LOG LIMIT CMD...: run under min(LIMIT, budget left), record pass/fail
  local name=$1 log=$2 limit=$3; shift 3
  local left=$((budget - SECONDS))
  if [ "$left" -lt 30 ]; then
    printf '%-12s SKIPPED (GPU_CHECK_BUDGET=%s spent)\n' "$name" "$budget" | tee -a "$out/summary.txt"
    status=1; return
  fi
  [ "$limit" -le "$left" ] || limit=$left
  local t0=$SECONDS
  timeout "$limit" "$@" >"$log" 2>&1; local rc=$?
  printf '%-12s rc=%-3s %4ss  %s\n' "$name" "$rc" "$((SECONDS - t0))" "$(tail -n1 "$log")" | tee -a "$out/summary.txt"
  [ "$rc" -eq 0 ] || status=1
}
: >"$out/summary.txt"
{ nvidia-smi -L 2>/dev/null || echo "no nvidia-smi"
  "$PY" -c "import torch, sys; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available()); print(torch.cuda.get_device_name() if torch.cuda.is_available() else 'no GPU')"
  "$PY" -c "import triton; print('triton', triton.__version__)" 2>&1 | tail -n1
  git rev-parse HEAD 2>/dev/null; } >"$out/env.txt" 2>&1
cat "$out/env.txt"
gpu=$("$PY" -c "import torch; print(int(torch.cuda.is_available()))")
if [ "$mode" != "--dry-run" ] && [ "$gpu" != 1 ]; then
  echo "no CUDA device: run with --dry-run for the CPU rehearsal" | tee -a "$out/summary.txt"; exit 2
fi
step build "$out/build.log" 900 "$PY" -m compiled_bw.build
if [ "$mode" = "--bench" ]; then
  step bench_part "$out/bench_part.log" 560 "$PY" -m benchmarks --device cuda --models "${3:?--bench MODELS}" --out "$out/bench_part"
  echo "gpu_check: $([ $status -eq 0 ] && echo PASSED || echo FAILED) ($out/summary.txt)"
  exit $status
fi
# the GPU image's torch is not the pinned one: name every private symbol that moved (a missing
# one turns its feature off, as Note [SAC storage format] does, or breaks the import)
step private_api "$out/private_api.log" 120 "$PY" -m pytest -q -p no:cacheprovider tests/test_private_api.py -k "exists"
step cuda_tests "$out/cuda_tests.log" 420 "$PY" -m pytest -q -p no:cacheprovider $par tests/test_cuda.py tests/test_streams.py
if [ "$mode" = "--dry-run" ]; then
  step bench "$out/bench.log" 300 "$PY" -m benchmarks --quick --models overhead --out "$out/bench"
else
  step suites_cuda "$out/suites_cuda.log" 300 env COMPILED_BW_TEST_DEVICE=cuda "$PY" -m pytest -q -p no:cacheprovider $par \
    tests/test_core.py tests/test_hooks.py tests/test_custom_functions.py -k "not inductor"
  step bench "$out/bench.log" 420 "$PY" -m benchmarks --device cuda --quick --out "$out/bench"
  # the whole CPU suite on the GPU image's torch (not the pinned one): what a torch version
  # changes shows here (a retains_grad mix-up on 2.11 did: Note [Node ids stay alive])
  # -v: each test's outcome is in the log as it ends, so a run cut off by its limit still
  # names what failed (or crashed a worker: its last test) -- -rf's summary never comes then
  step cpu_suite "$out/cpu_suite.log" 300 "$PY" -m pytest -v -p no:cacheprovider $par -m "not slow" tests
  if [ "$mode" = "--full" ]; then
    step bench_full "$out/bench_full.log" 1500 "$PY" -m benchmarks --device cuda --out "$out/bench_full"
  fi
fi
echo "gpu_check: $([ $status -eq 0 ] && echo PASSED || echo FAILED) ($out/summary.txt)"
exit $status
