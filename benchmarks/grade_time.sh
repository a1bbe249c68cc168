#!/usr/bin/env bash
# How long a grade takes on the GPU (docs/PERFORMANCE.md, "Grade times"), run from the repository
# root on a lent H100/H200:
#   benchmarks/grade_time.sh OUT_DIR [NAME=TREE ...]
# Times, in this tree and in each other NAME=TREE (an older checkout, for a before/after), with
# warm caches: a passing `kata grade --gpu` of the softmax reference, a failing one
# (tests/wrong/softmax_no_max.py), and `kata selftest --gpu` (this tree only); a py-spy profile
# of one passing grade across all its processes where py-spy is installed.
set -uo pipefail
out=${1:?OUT_DIR}; shift
export PYTHONUNBUFFERED=1
trees=("after=$PWD" "$@")
stamp() { date +%s.%N; }
secs() { python3 -c "print(round($2 - $1, 2))"; }
for entry in "${trees[@]}"; do
  name=${entry%%=*}; tree=${entry#*=}
  (
    cd "$tree" || exit 1
    grade() { python3 -m grader grade "$@" --gpu --no-record --json; }
    grade reference/softmax.py --kata softmax > /dev/null  # warm: ceilings, Triton's cache
    for what in pass:reference/softmax.py fail:tests/wrong/softmax_no_max.py; do
      kind=${what%%:*}; file=${what#*:}
      for i in 1 2; do
        t0=$(stamp); grade "$file" --kata softmax > "$out/$name-$kind-$i.json"; t1=$(stamp)
        echo "$name $kind run$i wall_s $(secs "$t0" "$t1")" | tee -a "$out/grade_time.txt"
      done
    done
    if [ "$name" = after ]; then
      t0=$(stamp); python3 -m grader selftest --gpu > "$out/selftest.txt" 2>&1; rc=$?; t1=$(stamp)
      echo "$name selftest rc=$rc wall_s $(secs "$t0" "$t1")" | tee -a "$out/grade_time.txt"
    fi
    if command -v py-spy > /dev/null; then
      for what in pass:reference/softmax.py fail:tests/wrong/softmax_no_max.py; do
        kind=${what%%:*}; file=${what#*:}
        py-spy record --subprocesses --nonblocking --rate 100 --format raw -o "$out/$name-profile-$kind.txt" -- \
          python3 -m grader grade "$file" --kata softmax --gpu --no-record --json > /dev/null 2> "$out/$name-pyspy-$kind.err"
        echo "$name profile $kind rc=$?" | tee -a "$out/grade_time.txt"
      done
    fi
  )
done
