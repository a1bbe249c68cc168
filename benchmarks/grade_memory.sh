#!/usr/bin/env bash
# The GPU memory a whole GPU grade of each reference peaks at: what kata.yaml's gpu_memory_gib
# declares (docs/KATA_FORMAT.md). Run from the repository root on a lent H100/H200 with nothing
# else on the GPU:
#   benchmarks/grade_memory.sh OUT_DIR [KATA ...]   (default: every kata)
# Samples nvidia-smi's memory.used (worker, checker and their CUDA contexts) every 100 ms while
# each reference is graded alone; writes OUT_DIR/grade_memory.jsonl, one line per kata:
# {kata, status, peak_gpu_MiB, gpu_memory_gib (the MiB in GiB, rounded up), wall_s}.
set -uo pipefail
out=${1:?OUT_DIR}; shift
katas=("$@")
if [ ${#katas[@]} -eq 0 ]; then
  mapfile -t katas < <(python3 -c "from grader.kata import catalog; print('\n'.join(k.name for k in catalog.all_katas()))")
fi
for kata in "${katas[@]}"; do
  samples="$out/memory-$kata.tmp"
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > "$samples" &
  sampler=$!
  t0=$(date +%s.%N)
  python3 -m grader grade "reference/$kata.py" --kata "$kata" --gpu --no-record --json > "$out/grade.tmp"
  t1=$(date +%s.%N)
  kill "$sampler"; wait "$sampler" 2>/dev/null
  python3 - "$kata" "$out/grade.tmp" "$samples" "$(python3 -c "print(round($t1 - $t0, 1))")" <<'PY' | tee -a "$out/grade_memory.jsonl"
import json, math, sys
kata, grade_path, samples_path, wall = sys.argv[1:]
status = json.load(open(grade_path)).get("status")
peak = max((int(line) for line in open(samples_path) if line.strip().isdigit()), default=0)
print(json.dumps({"kata": kata, "status": status, "peak_gpu_MiB": peak,
                  "gpu_memory_gib": math.ceil(peak / 1024), "wall_s": float(wall)}))
PY
  rm -f "$samples" "$out/grade.tmp"
done
