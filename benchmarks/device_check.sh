#!/usr/bin/env bash
# Issue 39's device check, in <= 6 minutes on one GPU: the CUDA tests, then the sweep
# (benchmarks/bench_gpu.py), then, where onnxruntime's CUDA build is here (or its wheel in .whl/),
# the scoreboard of the onnxruntime-cuda engine on a sample of the suite (<= 2 minutes, taken from
# the sweep's share). Run from anywhere; the package runs from this checkout (PYTHONPATH=src):
#
#     bash benchmarks/device_check.sh            # results under $OUT, else ./device-out
#
# Writes $OUT/pytest.log, $OUT/bench.log, $OUT/gpu_table.md, $OUT/gpu_results.json (and
# $OUT/scoreboard_cuda.md, .json and .log where onnxruntime-cuda runs). Without a
# CUDA device (torch.cuda.is_available() is False) it runs the dry variant: the same test files
# (tests/test_triton_scatter.py: its CUDA tests skip, the Triton fold runs in Triton's interpreter)
# and the sweep's --quick CPU variant, about 1-2 minutes. Each step has its own timeout, and a failing step does not stop
# the next; the exit status is the first failure's.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-./device-out}
mkdir -p "$OUT"
export PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
# Wheels carried to a bare machine (.whl/, e.g. array-api-compat): installed aside, on the path;
# onnxruntime-gpu's apart (it replaces onnxruntime: only the onnxruntime-cuda step below sees it).
wheels=(); ort_wheels=()
for w in .whl/*.whl; do
  case "${w##*/}" in onnxruntime_gpu-*) ort_wheels+=("$w") ;; *.whl) [ -f "$w" ] && wheels+=("$w") ;; esac
done
if ! python3 -c 'import array_api_compat' 2>/dev/null && [ "${#wheels[@]}" -gt 0 ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/device-site "${wheels[@]}" \
    && export PYTHONPATH="$PYTHONPATH:/tmp/device-site"
fi
# gather_scatter is not installed here: the engines pyproject.toml declares, as entry points on the path.
engines_site=$(python3 scripts/checkout_engines.py /tmp/device-engines 2>/dev/null) \
  && [ -n "$engines_site" ] && export PYTHONPATH="$PYTHONPATH:$engines_site"
# JAX beside torch (and 8 test workers) on one GPU: no process takes 75% of its memory up front.
export XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_PYTHON_CLIENT_MEM_FRACTION=0.1
start=$SECONDS
status=0

if python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  gpu=1; tests_limit=130; workers=8
  python3 -c 'import torch; print(torch.cuda.get_device_name(), "torch", torch.__version__)' | tee "$OUT/device.txt"
  nvidia-smi >> "$OUT/device.txt" 2>&1 || true
else
  gpu=0; tests_limit=120; workers=0
  echo "no CUDA device: the dry variant (interpreter tests, bench_gpu.py --device cpu --quick)" | tee "$OUT/device.txt"
fi

# onnxruntime's CUDA build, for the onnxruntime-cuda step at the end: the one installed, or the wheel
# carried in .whl/ installed aside (its own folder, first on that step's path). Found: that step's
# 2 minutes (+5 s) come off the sweep's share, so the whole stays within 6 minutes.
ort_path=""; ort_cuda=0; ort_reserve=0
if [ "$gpu" -eq 1 ] && [ "${#ort_wheels[@]}" -gt 0 ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/device-ort-cuda "${ort_wheels[@]}" \
    && ort_path=/tmp/device-ort-cuda
fi
if [ "$gpu" -eq 1 ] && PYTHONPATH="${ort_path:+$ort_path:}$PYTHONPATH" python3 -c \
    "import onnxruntime; assert 'CUDAExecutionProvider' in onnxruntime.get_available_providers()" 2>/dev/null; then
  ort_cuda=1; ort_reserve=125
fi

files=()
# (test_deferred_bounds: its GPU tests only, no host sync per call and a usable context after a bad index)
candidates=(tests/test_cuda.py tests/test_triton_scatter.py tests/test_pallas_scatter.py
            tests/test_deferred_bounds.py::test_cuda_calls_do_not_sync_the_host
            tests/test_deferred_bounds.py::test_cuda_bad_index_leaves_the_context_usable)
# dry: only the interpreter's tests (test_cuda.py's CPU part takes minutes on a small machine)
[ "$gpu" -eq 0 ] && candidates=(tests/test_triton_scatter.py)
for f in "${candidates[@]}"; do
  if [ -f "${f%%::*}" ]; then files+=("$f"); else echo "($f not here: skipped)"; fi
done
parallel=()
if [ "$workers" -gt 0 ] && python3 -c 'import xdist' 2>/dev/null; then parallel=(-n "$workers"); fi
if python3 -c 'import xdist' 2>/dev/null && [ "$workers" -eq 0 ]; then parallel=(-n 0); fi
echo "=== tests (timeout ${tests_limit}s): ${files[*]}"
if [ "${#files[@]}" -eq 0 ]; then  # never a bare pytest: that would run the whole suite
  echo "no test file found" | tee "$OUT/pytest.log"; rc=4
else
  timeout "$tests_limit" python3 -m pytest -p no:cacheprovider "${parallel[@]}" -q -rs "${files[@]}" 2>&1 \
    | tee "$OUT/pytest.log" | tail -40
  rc=${PIPESTATUS[0]}
fi
[ "$rc" -ne 0 ] && [ "$status" -eq 0 ] && status=$rc
echo "tests: exit $rc after $((SECONDS - start)) s"

# The sweep gets what is left of 6 minutes, less a margin for writing its table (and onnxruntime-cuda's share).
left=$((360 - (SECONDS - start) - 25 - ort_reserve))
[ "$left" -lt 60 ] && left=60
if [ "$gpu" -eq 1 ]; then
  bench=(python3 benchmarks/bench_gpu.py --device cuda --out "$OUT" --budget $((left - 20)))
else
  bench=(python3 benchmarks/bench_gpu.py --device cpu --quick --out "$OUT" --budget $((left - 20)))
fi
echo "=== sweep (timeout ${left}s): ${bench[*]}"
timeout "$left" "${bench[@]}" > "$OUT/bench.log" 2>&1
rc=$?; [ "$rc" -ne 0 ] && [ "$status" -eq 0 ] && status=$rc
if [ -f "$OUT/gpu_table.md" ]; then cat "$OUT/gpu_table.md"; else tail -30 "$OUT/bench.log"; fi
echo "sweep: exit $rc after $((SECONDS - start)) s"

# Optional: the onnxruntime-cuda engine's scoreboard on a seeded sample of the suite (400 of 3911
# tests: the export takes ~5 s, each test a CUDA session), at most 2 minutes and only within the 6.
room=$((360 - (SECONDS - start) - 5))
ort_limit=$(( room < 120 ? room : 120 ))
if [ "$ort_cuda" -eq 0 ]; then
  echo "onnxruntime-cuda: skipped (no GPU, or no onnxruntime with CUDAExecutionProvider here nor in .whl/)"
elif [ "$ort_limit" -lt 60 ]; then
  echo "onnxruntime-cuda: skipped (${room} s left of the 6 minutes)"
else
  board=(python3 benchmarks/scoreboard.py --engine onnxruntime-cuda --sample onnxruntime-cuda=400 --doc -
         --json "$OUT/scoreboard_cuda.json")
  echo "=== onnxruntime-cuda (timeout ${ort_limit}s): ${board[*]}"
  PYTHONPATH="${ort_path:+$ort_path:}$PYTHONPATH" timeout "$ort_limit" "${board[@]}" \
    > "$OUT/scoreboard_cuda.md" 2> "$OUT/scoreboard_cuda.log"
  rc=$?; [ "$rc" -ne 0 ] && [ "$status" -eq 0 ] && status=$rc
  head -12 "$OUT/scoreboard_cuda.md"; tail -3 "$OUT/scoreboard_cuda.log"
  echo "onnxruntime-cuda: exit $rc"
fi
echo "device_check: $((SECONDS - start)) s in all, results in $OUT"
exit "$status"
