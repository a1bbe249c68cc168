#!/usr/bin/env bash
# Cold grades with and without compile-ahead helpers (grader/grading/compile_ahead.py), one
# machine, run from the repository root on a lent H100/H200:
#   benchmarks/cold_grade_time.sh OUT_DIR [KATA ...]   (default: flash_attention muon matmul)
# Each kata's reference is graded twice, Triton's cache emptied before each: KATA_COMPILE_AHEAD=0,
# then =auto. Writes OUT_DIR/cold_grade_time.txt (a line per grade: kata, helpers, status, overall
# speedup, grade and wall seconds, and each bench case's speedup, to show helpers never touch
# the timing) and OUT_DIR/traces.txt (KATA_TRACE: when each case started and ended, and
# "ahead" lines for the cases the helpers ran).
set -uo pipefail
out=${1:?OUT_DIR}; shift
katas=("$@"); [ ${#katas[@]} -gt 0 ] || katas=(flash_attention muon matmul)
export PYTHONUNBUFFERED=1
cache=$(python3 -c "from triton import knobs; print(knobs.cache.dir)")
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import sys, os, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__, 'cores', os.cpu_count())"
  date -u; } > "$out/env.txt"
python3 -m grader grade reference/vector_add.py --kata vector_add --gpu --no-record --json > /dev/null  # the warm start, and the ceilings
for kata in "${katas[@]}"; do
  for helpers in 0 auto; do
    rm -rf "$cache"
    echo "=== $kata helpers=$helpers" >> "$out/traces.txt"
    t0=$(date +%s.%N)
    KATA_COMPILE_AHEAD=$helpers KATA_TRACE="$out/trace.tmp" \
      python3 -m grader grade "reference/$kata.py" --kata "$kata" --gpu --no-record --json > "$out/grade.tmp"
    t1=$(date +%s.%N)
    grep -v " sample " "$out/trace.tmp" >> "$out/traces.txt"; rm -f "$out/trace.tmp"
    python3 - "$out/grade.tmp" "$kata" "$helpers" "$(python3 -c "print(round($t1 - $t0, 1))")" <<'PY' | tee -a "$out/cold_grade_time.txt"
import json, sys
r = json.load(open(sys.argv[1]))
bench = {f"{c['task']}/{c['name']}/{c['dtype']}": round(c["speedup"], 3)
         for t in r["tasks"] for c in t["cases"] if c.get("speedup")}
print(sys.argv[2], f"helpers={sys.argv[3]}", r["status"], round(r.get("speedup") or 0, 3),
      "grade_s", r.get("duration_s"), "wall_s", sys.argv[4], json.dumps(bench))
PY
    rm -f "$out/grade.tmp"
  done
done
