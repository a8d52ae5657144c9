#!/usr/bin/env bash
# Issue 39's device check, in <= 6 minutes on one GPU: the CUDA tests, then the sweep
# (benchmarks/bench_gpu.py). Run from anywhere; the package runs from this checkout (PYTHONPATH=src):
#
#     bash benchmarks/device_check.sh            # results under $OUT, else ./device-out
#
# Writes $OUT/pytest.log, $OUT/bench.log, $OUT/gpu_table.md, $OUT/gpu_results.json. Without a
# CUDA device (torch.cuda.is_available() is False) it runs the dry variant: the same test files
# (tests/test_triton_scatter.py: its CUDA tests skip, the Triton fold runs in Triton's interpreter)
# and the sweep's --quick CPU variant, about 1-2 minutes. Each step has its own timeout, and a failing step does not stop
# the next; the exit status is the first failure's.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-./device-out}
mkdir -p "$OUT"
export PYTHONPATH="src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
# Wheels carried to a bare machine (.whl/, e.g. array-api-compat): installed aside, on the path.
if ! python3 -c 'import array_api_compat' 2>/dev/null && compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/device-site .whl/*.whl \
    && export PYTHONPATH="$PYTHONPATH:/tmp/device-site"
fi
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

files=()
candidates=(tests/test_cuda.py tests/test_triton_scatter.py tests/test_pallas_scatter.py)
# dry: only the interpreter's tests (test_cuda.py's CPU part takes minutes on a small machine)
[ "$gpu" -eq 0 ] && candidates=(tests/test_triton_scatter.py)
for f in "${candidates[@]}"; do
  if [ -f "$f" ]; then files+=("$f"); else echo "($f not here: skipped)"; fi
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

# The sweep gets what is left of 6 minutes, less a margin for writing its table.
left=$((360 - (SECONDS - start) - 25))
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
echo "sweep: exit $rc; device_check: $((SECONDS - start)) s in all, results in $OUT"
exit "$status"
