#!/usr/bin/env bash
# Several parts of gpu_open_issues.sh at once, one lane per GPU of a multi-GPU machine; the parts
# of a lane run one after another on that GPU alone (CUDA_VISIBLE_DEVICES), so no timing sees
# another lane's work. Every part of every lane ends by DEADLINE_S (default 570) after the start.
#   benchmarks/gpu_lanes.sh OUT_DIR "selftest grading" "fair"
set -uo pipefail
out=${1:?OUT_DIR}; shift
mkdir -p "$out"
deadline=$(( $(date +%s) + ${DEADLINE_S:-570} ))
here=$(dirname "$0")
gpu=0
for lane in "$@"; do
  (
    for part in $lane; do
      left=$(( deadline - $(date +%s) ))
      if (( left < 30 )); then echo "$part: not started, $left s left" >> "$out/lanes.txt"; continue; fi
      start=$(date +%s)
      CUDA_VISIBLE_DEVICES=$gpu PART_TIMEOUT_S=$left bash "$here/gpu_open_issues.sh" "$out" "$part" > /dev/null 2>&1
      echo "GPU $gpu $part rc=$? $(( $(date +%s) - start )) s" >> "$out/lanes.txt"
    done
  ) &
  gpu=$((gpu + 1))
done
wait
cat "$out/lanes.txt"
for f in "$out"/*.txt; do echo "== $f"; tail -n 8 "$f"; done
