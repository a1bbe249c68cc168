#!/usr/bin/env bash
# The GPU checks left open on issues 31-36, in parts that each fit one lent call (under 600 s),
# run from the repository root on an H100/H200:
#   benchmarks/gpu_open_issues.sh OUT_DIR PART
# PART:
#   selftest   `kata selftest --gpu`, every kata (about 350 s): every reference passes inside the
#              sandbox, every stub fails (issues 33, 36)
#   fair       the existing GPU cheats, the shared-GPU and slow-kernel tests, the sandbox's doors,
#              the launch paths (issues 31, 32, 33)
#   fair-rest  the part of fair not run on the final tree (the GPU cheats, the shared-GPU tests;
#              about 300 s)
#   grading    the rest of tests/gpu but the panel: grading, wrong solutions, torch_compute,
#              transpose, compile-ahead
#   anatomy    tests/gpu/test_gpu_anatomy.py (issue 34; the launch paths' anatomy tests run in fair)
#   anatomy-cost  the anatomy's cost, four warm grades each way, softmax reference and the
#              8-program vector_add (issue 34; budget 2 s)
#   panel-a    the honest panel: adamw, cross_entropy, softmax, layer_norm, flash_attention (issue 32)
#   panel-b    the honest panel: the other katas (issue 32)
#   external   Liger-Kernel and FlagGems graded as submissions (issue 32): carry .whl/ with
#              liger_kernel, flag_gems, sqlalchemy and greenlet wheels for Python 3.12; each
#              grade's verdicts go to OUT_DIR/external-verdicts.jsonl
#   tutorials  Triton's own tutorials (vector add, fused softmax, matmul, dropout, layer norm)
#              graded as submissions, on the GPU and on the interpreter: carry .tutorials/
#              (benchmarks/fetch_triton_tutorials.py); verdicts to OUT_DIR/tutorials-verdicts.jsonl
#   flaggems-home  FlagGems' vector_add, layer_norm and gather_scatter with its cache in the
#              worker's own home (issue 33) and float16 statistics diagnosed low_precision; carry .whl/
#   envelope   the honest-error envelope on the GPU: bfloat16, fp8 and the large cases (issue 32)
#   crash      compiler-crash candidates (issue 35)
#   crashers   the two honest panel variants that failed to compile on an H200, graded by the
#              CLI with --json: their diagnoses and the compiler's own last lines (issues 32, 35)
#   retest     the tests/gpu tests changed after the H200 runs of 2026-11-29 and not run since: the
#              slow-not-hung tests, with the whole grade's limit lengthened by a real autotuner
# Each part writes OUT_DIR/PART.txt and prints its last lines. PART_TIMEOUT_S (default 590) cuts a
# part with SIGINT, so pytest still prints the failures it has seen.
set -uo pipefail
out=${1:?OUT_DIR}; part=${2:?PART}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
log="$out/$part.txt"
cut=(timeout -s INT -k 20 "${PART_TIMEOUT_S:-590}")
pytest_() { "${cut[@]}" python3 -m pytest -q -rA --durations=20 -p no:cacheprovider "$@"; }
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"
} > "$log" 2>&1
case "$part" in
  selftest) "${cut[@]}" python3 -m grader selftest --gpu >> "$log" 2>&1 ;;
  fair) pytest_ tests/gpu/test_gpu_cheats.py tests/gpu/test_gpu_shared.py tests/gpu/test_gpu_slow_not_hung.py \
          tests/gpu/test_gpu_sandbox.py tests/gpu/test_gpu_launch_paths.py >> "$log" 2>&1 ;;
  fair-rest) pytest_ tests/gpu/test_gpu_cheats.py tests/gpu/test_gpu_shared.py >> "$log" 2>&1 ;;
  flaggems-home) python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl >> "$log" 2>&1
            EXTERNAL_VERDICTS="$out/external-verdicts.jsonl" PYTHONPATH=/tmp/site pytest_ tests/external/test_flag_gems.py \
              -k "vector_add or layer_norm or gather_scatter" >> "$log" 2>&1 ;;
  grading) pytest_ tests/gpu/test_gpu_grading.py tests/gpu/test_gpu_wrong.py tests/gpu/test_gpu_torch_compute.py \
             tests/gpu/test_gpu_transpose.py tests/gpu/test_gpu_compile_ahead.py >> "$log" 2>&1 ;;
  anatomy) pytest_ tests/gpu/test_gpu_anatomy.py >> "$log" 2>&1 ;;
  anatomy-cost) python3 benchmarks/anatomy_cost.py "$out" >> "$log" 2>&1 ;;
  panel-a) pytest_ tests/gpu/test_gpu_honest_panel.py \
             -k "adamw or cross_entropy or softmax or layer_norm or flash_attention" >> "$log" 2>&1 ;;
  panel-b) pytest_ tests/gpu/test_gpu_honest_panel.py \
             -k "not (adamw or cross_entropy or softmax or layer_norm or flash_attention)" >> "$log" 2>&1 ;;
  external) python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl >> "$log" 2>&1
            EXTERNAL_VERDICTS="$out/external-verdicts.jsonl" PYTHONPATH=/tmp/site pytest_ tests/external >> "$log" 2>&1 ;;
  tutorials) EXTERNAL_VERDICTS="$out/tutorials-verdicts.jsonl" pytest_ tests/external/test_triton_tutorials.py \
               tests/external/test_triton_tutorials_interpreter.py tests/external/test_tutorial_source.py >> "$log" 2>&1 ;;
  envelope) python3 benchmarks/honest_envelope.py --mode gpu --seeds 1 --cases checked --budget-s 270 \
              --out "$out/h200-honest-envelope.json" >> "$log" 2>&1 ;;
  crashers) for spec in prefix_sum:prefix_sum_two_level_tile:long_rows matmul_lowp:matmul_lowp_grouped_kmajor:extremes; do
              IFS=: read -r kata file case <<< "$spec"
              "${cut[@]}" python3 -m grader grade "tests/honest/$file.py" --kata "$kata" --gpu --no-record --json \
                --case "$case" > "$out/$file.json" 2>> "$log"
              python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["status"], r["diagnoses"]); [print(c["task"], c["name"], c["dtype"], c["status"], c.get("diagnosis"), c["message"][-3000:]) for c in (r.get("cases") or [c for t in r["tasks"] for c in t["cases"]]) if c["status"] not in ("pass","skipped")]' \
                "$out/$file.json" >> "$log" 2>&1
            done ;;
  retest) pytest_ -vv tests/gpu/test_gpu_slow_not_hung.py >> "$log" 2>&1 ;;
  crash) python3 benchmarks/compiler_crash_check.py "$out/compiler_crash" >> "$log" 2>&1 ;;
  *) echo "unknown part: $part" >&2; exit 2 ;;
esac
rc=$?
echo "$part rc=$rc" >> "$log"
tail -n 30 "$log"
exit $rc
