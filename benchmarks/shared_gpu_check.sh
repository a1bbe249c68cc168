#!/usr/bin/env bash
# Issue 31, points 1-3, on a lent H100/H200, from the repository root:
#   benchmarks/shared_gpu_check.sh OUT_DIR
# 1. The issue's reproduction: a first grade beside a process multiplying 8192^2 bf16 matrices
#    in a loop (where the ceilings used to be measured and cached), the loop stopped, then the
#    matmul reference graded on the idle GPU. Expected: the first grade has gpu_shared set and
#    caches nothing; the matmul reference passes with no cheat and gpu_shared null.
# 2. pytest of tests/gpu/test_gpu_shared.py and the slow-first-calls cheat.
# Everything lands in OUT_DIR; a summary is printed last.
set -uo pipefail
out=${1:?OUT_DIR}
mkdir -p "$out"
work=$(mktemp -d)
export PYTHONUNBUFFERED=1 KATA_CACHE_DIR="$work/cache"
grade() { python3 -m grader grade "$@" --gpu --no-record --json; }
summary() {
  python3 - "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"{sys.argv[1].rsplit('/', 1)[-1]}: status={r['status']} cheats={[c['reason'] for c in r['cheats']]} "
      f"gpu_shared={json.dumps(r.get('gpu_shared'))} disturbed={len(r.get('timings_disturbed') or [])} "
      f"ceilings={r['environment'].get('ceilings')} note={r['environment'].get('ceilings_note')} "
      f"seen_by={r['environment'].get('gpu_processes_seen_by')} wall_s={r.get('duration_s')}")
PY
}
python3 -c '
import torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
(a @ a).sum().item()
print("ready", flush=True)
while True:
    b = a @ a
' > "$work/hog.txt" &
hog=$!
for _ in $(seq 60); do grep -q ready "$work/hog.txt" 2>/dev/null && break; sleep 1; done
grade reference/vector_add.py --kata vector_add > "$out/beside-hog-vector_add.json"
kill "$hog"; wait "$hog" 2>/dev/null
cp "$KATA_CACHE_DIR/ceilings.json" "$out/ceilings-after-shared.json" 2>/dev/null || echo "{}" > "$out/ceilings-after-shared.json"
grade reference/matmul.py --kata matmul > "$out/idle-matmul.json"
cp "$KATA_CACHE_DIR/ceilings.json" "$out/ceilings-after-idle.json" 2>/dev/null
python3 -m pytest -q -rA tests/gpu/test_gpu_shared.py "tests/gpu/test_gpu_cheats.py::test_slow_first_timed_calls" \
  > "$out/pytest.txt" 2>&1
echo "pytest rc=$?" >> "$out/pytest.txt"
{
  summary "$out/beside-hog-vector_add.json"
  echo "cached after the shared grade: $(cat "$out/ceilings-after-shared.json")"
  summary "$out/idle-matmul.json"
  tail -n 12 "$out/pytest.txt"
} | tee "$out/summary.txt"
rm -rf "$work"
