#!/usr/bin/env bash
# The review of the merged issues 31-35 (their seams), checked on a lent H100/H200, from the
# repository root (about 3 minutes):   bash benchmarks/seams_gpu_check.sh "$OUT"
# 1. launch paths and the anatomy: a compiled kernel launched without the JIT (.warmup(), a
#    library's cache) is counted, and the anatomy shows it as a Triton kernel with its facts;
# 2. slow is not hung on a GPU (the anatomy's call now runs under the case's timing limit);
# 3. one softmax reference grade with --profile, sandboxed as usual: the profile's files are
#    written, and no profiler log line is shown as "output of the submission".
set -uo pipefail
out=${1:-${OUT:?give OUT_DIR}}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 -m pytest -q -p no:cacheprovider tests/gpu/test_gpu_launch_paths.py \
  tests/gpu/test_gpu_slow_not_hung.py > "$out/seams_gpu_tests.txt" 2>&1
echo "tests rc=$?" | tee -a "$out/summary.txt"
tail -3 "$out/seams_gpu_tests.txt" | tee -a "$out/summary.txt"
python3 -m grader grade reference/softmax.py --kata softmax --gpu --no-record --profile "$out/profile" \
  --json > "$out/softmax.json" 2> "$out/softmax-stderr.txt"
echo "softmax grade rc=$?" | tee -a "$out/summary.txt"
python3 - "$out/softmax.json" <<'PY' | tee -a "$out/summary.txt"
import json, sys
r = json.load(open(sys.argv[1]))
timed = [c for c in r["tasks"][0]["cases"] if c.get("time_ms")] if r.get("tasks") else []
print("status", r.get("status"), "sandbox reads held", ((r.get("sandbox") or {}).get("protections") or {}).get("reads"))
print("output shown:", repr((r.get("output") or "")[:300]))
for c in timed:
    a = c.get("anatomy") or {}
    print(c["name"], c["dtype"], "kernels", [(k["name"], k["source"], k["grid"]) for k in (c.get("kernels") or [])][:3],
          "note", a.get("note"), "files", sorted((a.get("files") or {}).keys()))
PY
ls -la "$out/profile" >> "$out/summary.txt" 2>&1
