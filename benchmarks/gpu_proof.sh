#!/usr/bin/env bash
# The GPU proof for docs/PERFORMANCE.md, run on a lent H100/H200 from the repository root:
#   benchmarks/gpu_proof.sh OUT_DIR [grade|bench]
# grade: `kata selftest --gpu`, a `kata grade --gpu` of each reference in a fresh workspace, and
#        every planted wrong solution graded on the GPU (all must fail);
#        and every cheat in tests/cheats/ (each must be rejected with its named reason);
# gputests: pytest tests/gpu (GPU-only grading behaviour and cheats);
# spread: each reference graded 5 times, the run-to-run spread of its speedups;
# bench: benchmarks/bench.py (reference vs eager vs torch.compile, same run, same method).
# Everything lands in OUT_DIR/proof-WHAT.tar.gz, with a summary printed last.
set -uo pipefail
out=${1:?OUT_DIR}; what=${2:-grade}
work=$(mktemp -d)
export PYTHONUNBUFFERED=1 KATA_CACHE_DIR="$work/cache"
kata() { python3 -m grader "$@"; }
# KATAS="a b" narrows the proof to those katas (default: every kata).
katas=${KATAS:-$(python3 -c "from grader.kata.catalog import all_katas; print(' '.join(k.name for k in all_katas()))")}
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)"
} | tee "$work/env.txt"
if [ "$what" = grade ]; then
  start=$(date +%s.%N)
  kata selftest $katas --gpu > "$work/selftest.txt"; echo "selftest rc=$? wall_s $(python3 -c "print(round($(date +%s.%N) - $start, 1))")" | tee -a "$work/selftest.txt"
  cat "$work/selftest.txt"
  ws=$(mktemp -d)
  for k in $katas; do
    kata new "$k" --dir "$ws" --force > /dev/null
    cp "reference/$k.py" "$ws/$k/solution.py"
    kata grade "$ws/$k" --gpu --json --report "$work/grade_$k.md" > "$work/grade_$k.json"
    echo "grade $k rc=$?"
  done
  mkdir -p "$work/wrong"
  for k in $katas; do ls tests/wrong/${k}_*.py 2>/dev/null; done | sort -u | KATA_LIST="$katas" xargs -P 4 -I{} sh -c '
    f={}; b=$(basename "$f" .py); kata=""
    for k in $KATA_LIST; do case "$b" in ${k}_*) [ ${#k} -gt ${#kata} ] && kata=$k;; esac; done
    python3 -m grader grade "$f" --kata "$kata" --gpu --json --no-record --fail-fast > "'"$work"'/wrong/$b.json"'
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
  mkdir -p "$work/cheats"
  for f in tests/cheats/*.py; do
    b=$(basename "$f" .py)
    python3 -m grader grade "$f" --kata vector_add --gpu --json --no-record > "$work/cheats/$b.json"
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('cheat', sys.argv[2], 'declared', sys.argv[3], 'got', d['cheat'], d['status'], d['score'])" \
      "$work/cheats/$b.json" "$b" "$(sed -n 's/^# cheat: //p' "$f")"
  done
elif [ "$what" = gputests ]; then
  python3 -m pytest -v -rA -p no:cacheprovider tests/gpu 2>&1 | tee "$work/gputests.txt" | tail -40
elif [ "$what" = spread ]; then
  for k in ${KATAS:-vector_add softmax rms_norm}; do
    for i in 1 2 3 4 5; do
      kata grade "reference/$k.py" --kata "$k" --gpu --json > "$work/spread_${k}_$i.json"; echo "spread $k $i rc=$?"
    done
  done
  python3 benchmarks/spread.py "$work" | tee "$work/spread.txt"
else
  python3 benchmarks/bench.py $katas ${BENCH_ARGS:-} --out "$work/bench.json"; echo "bench rc=$?"
fi
tar czf "$out/proof-$what.tar.gz" -C "$work" .
