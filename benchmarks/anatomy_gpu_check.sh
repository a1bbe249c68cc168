#!/usr/bin/env bash
# Issue 34's GPU check, run from the repository root on a lent H100/H200 (about 4 minutes):
#   bash benchmarks/anatomy_gpu_check.sh "$OUT"
# 1. tests/gpu/test_gpu_anatomy.py: three correct kernels on 8 programs get small_grid (and every
#    timed case its anatomy), each other code is earned by a small honest kernel, the softmax and
#    vector_add references get none of the anatomy's codes, --profile writes IR, PTX and a trace;
# 2. benchmarks/anatomy_cost.py: a warm grade's wall time with and without the anatomy;
# 3. one softmax grade with --profile and an HTML report, as a learner would run it.
set -uo pipefail
out=${1:-${OUT:?give OUT_DIR}}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_anatomy.py > "$out/anatomy_gpu_tests.txt" 2>&1
echo "tests rc=$?" | tee -a "$out/summary.txt"
tail -3 "$out/anatomy_gpu_tests.txt" | tee -a "$out/summary.txt"
python3 benchmarks/anatomy_cost.py "$out" 2>&1 | tee -a "$out/summary.txt"
python3 -m grader grade reference/softmax.py --kata softmax --gpu --no-record --profile "$out/profile" \
  --report "$out/softmax-report.html" > "$out/softmax-grade.txt" 2>&1
echo "softmax grade rc=$?" | tee -a "$out/summary.txt"
ls -la "$out/profile" >> "$out/summary.txt" 2>&1
