#!/usr/bin/env bash
# The GPU proof for docs/PERFORMANCE.md, run on a lent H100/H200 from the repository root:
#   benchmarks/gpu_proof.sh OUT_DIR [grade|bench|all]
# grade: `kata selftest --gpu` and a `kata grade --gpu` of each reference in a fresh workspace;
# bench: benchmarks/bench.py (reference vs eager vs torch.compile, same run, same method).
set -uo pipefail
out=${1:?OUT_DIR}; what=${2:-all}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 KATA_CACHE_DIR="$out/cache"
kata() { python3 -m grader "$@"; }
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)"
} | tee "$out/env.txt"
if [ "$what" != bench ]; then
  kata selftest --gpu --json > "$out/selftest.json"; echo "selftest rc=$?"
  ws=$(mktemp -d)
  for k in vector_add softmax rms_norm; do
    kata new "$k" --dir "$ws" --force > /dev/null
    cp "reference/$k.py" "$ws/$k/solution.py"
    kata grade "$ws/$k" --gpu --json --report "$out/grade_$k.md" > "$out/grade_$k.json"
    echo "grade $k rc=$?"
  done
fi
if [ "$what" != grade ]; then
  python3 benchmarks/bench.py --out "$out/bench.json"; echo "bench rc=$?"
fi
