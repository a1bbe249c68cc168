#!/usr/bin/env bash
# The GPU proof for docs/PERFORMANCE.md, run on a lent H100/H200 from the repository root:
#   benchmarks/gpu_proof.sh OUT_DIR [grade|bench]
# grade: `kata selftest --gpu`, a `kata grade --gpu` of each reference in a fresh workspace, and
#        every planted wrong solution graded on the GPU (all must fail);
# bench: benchmarks/bench.py (reference vs eager vs torch.compile, same run, same method).
# Everything lands in OUT_DIR/proof-WHAT.tar.gz, with a summary printed last.
set -uo pipefail
out=${1:?OUT_DIR}; what=${2:-grade}
work=$(mktemp -d)
export PYTHONUNBUFFERED=1 KATA_CACHE_DIR="$work/cache"
kata() { python3 -m grader "$@"; }
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)"
} | tee "$work/env.txt"
if [ "$what" = grade ]; then
  kata selftest --gpu > "$work/selftest.txt"; echo "selftest rc=$?" | tee -a "$work/selftest.txt"
  cat "$work/selftest.txt"
  ws=$(mktemp -d)
  for k in vector_add softmax rms_norm; do
    kata new "$k" --dir "$ws" --force > /dev/null
    cp "reference/$k.py" "$ws/$k/solution.py"
    kata grade "$ws/$k" --gpu --json --report "$work/grade_$k.md" > "$work/grade_$k.json"
    echo "grade $k rc=$?"
  done
  mkdir -p "$work/wrong"
  ls tests/wrong/*.py | xargs -P 6 -I{} sh -c '
    f={}; b=$(basename "$f" .py)
    for k in vector_add softmax rms_norm; do case "$b" in ${k}_*) kata=$k;; esac; done
    python3 -m grader grade "$f" --kata "$kata" --gpu --json > "'"$work"'/wrong/$b.json"'
  python3 - "$work/wrong" <<'PY'
import glob, json, sys
for path in sorted(glob.glob(sys.argv[1] + "/*.json")):
    name = path.rsplit("/", 1)[1][:-5]
    try:
        d = json.load(open(path))
    except ValueError:
        print("UNREADABLE", name); continue
    print("wrong", name, d["status"], d["score"], d["message"][:100].replace("\n", " "))
PY
else
  python3 benchmarks/bench.py --out "$work/bench.json"; echo "bench rc=$?"
fi
tar czf "$out/proof-$what.tar.gz" -C "$work" .
