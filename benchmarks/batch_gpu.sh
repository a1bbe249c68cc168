#!/usr/bin/env bash
# GPU proof of issue 15 (`kata batch grade`): 2 x 10 submissions graded across
# both GPUs of a host, then on one GPU; throughput of each, and each grade's speedups side by side.
#
# Run from the repository root, on a machine with two GPUs, with $OUT set:
#
#     OUT=/some/folder bash /path/to/sweeps/batch_gpu.sh
#
# Submissions: PEOPLE people (default 10: p01..p10), each with a vector_add and a softmax workspace; 10 of the 20
# are the references, 10 are planted wrong solutions from tests/wrong/ (one person in two has the
# reference of vector_add and a wrong softmax, the other the reverse).
#
# Runs (each `kata batch grade --gpu --json`, into a store of its own under a temporary folder):
#   warmup  the folder, --gpus 2: fills Triton's cache, starts the warm-start servers (one per
#           GPU), measures the GPU's ceilings; its speedups are a third measurement of each grade
#   gpus2   a manifest of the same 20, slowest first (by the warm-up's grade times), --gpus 2
#   gpus1   the same manifest, --gpus 1
# Throughput is grades per minute of the grading (the engine's start-up excluded; it is reported).
# Target: gpus2 / gpus1 >= 1.8. Each grade's speedup (geometric mean, and per timed case) in gpus2
# vs gpus1, next to the spread between the two runs on two GPUs (warmup vs gpus2).
#
# Which engine ran is printed and recorded: Ray when it is installed, else the local process pool
# (BATCH_ENGINE=local|ray forces one). BATCH_DRYRUN=1: the same plumbing on the CPU (--interpret,
# --cpus instead of --gpus), for a machine without a GPU. Time: about 4 minutes; each run has a
# hard limit (timeout) so the whole script ends within 9 minutes.
#
# Writes $OUT/batch_gpu.json (the summary), $OUT/batch_{warmup,gpus2,gpus1}.json (each run's
# full JSON: every grade as `kata grade --json` prints it) and .log (its progress lines).

set -u
T0=$(date +%s)
ROOT=$(pwd)
if [ ! -f "$ROOT/grader/batch/driver.py" ]; then
    echo "Run this from the root of the triton-kata checkout (a checkout of the repository)." >&2
    exit 2
fi
OUT=${OUT:-$ROOT/batch-gpu-out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
WORK=$(mktemp -d /tmp/kata-batch-gpu.XXXXXX)
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export KATA_DATA_DIR="$WORK/data"            # the grades go to a store of the proof's own
export KATA_DB="$WORK/results.sqlite"
ENGINE=${BATCH_ENGINE:-auto}
if [ "${BATCH_DRYRUN:-0}" = "1" ]; then
    MODE=(--interpret); TWO=(--cpus 2); ONE=(--cpus 1)
else
    MODE=(--gpu); TWO=(--gpus 2); ONE=(--gpus 1)
fi

echo "== machine"
nvidia-smi -L 2>/dev/null || echo "(no nvidia-smi)"
"$PY" -c "import sys, torch, triton; print('python', sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__)"
"$PY" -c "import ray; print('ray', ray.__version__, 'installed')" 2>/dev/null || echo "ray not installed: the local process pool grades"
git -C "$ROOT" log -1 --format='commit %h %s' 2>/dev/null

PEOPLE=${PEOPLE:-10}
"$PY" - "$ROOT" "$WORK" "$PEOPLE" <<'EOF'
import shutil, sys
from pathlib import Path
root, work = Path(sys.argv[1]), Path(sys.argv[2])
wrong = {"vector_add": ["bad_mask", "floor_grid", "fp32_out", "in_place", "unmasked_store"],
         "softmax": ["no_max", "grid_off_by_one", "mask_zero", "ignores_stride", "wrong_dtype"]}
for i in range(1, int(sys.argv[3]) + 1):
    for kata in ("vector_add", "softmax"):
        reference = (i % 2 == 1) == (kata == "vector_add")
        source = (root / "reference" / f"{kata}.py" if reference
                  else root / "tests" / "wrong" / f"{kata}_{wrong[kata][((i - 1) // 2) % 5]}.py")
        folder = work / "subs" / f"p{i:02d}" / kata
        folder.mkdir(parents=True)
        shutil.copyfile(source, folder / "solution.py")
        (folder / "FROM").write_text(source.name + "\n")
print(2 * int(sys.argv[3]), "submissions in", work / "subs")
EOF

run() {  # run NAME LIMIT_S SOURCE ARGS...
    local name=$1 limit=$2 source=$3; shift 3
    echo "== $name: kata batch grade $source $* (limit ${limit}s)"
    local start=$(date +%s)
    timeout -k 10 "$limit" "$PY" -m grader batch grade "$source" "${MODE[@]}" --engine "$ENGINE" \
        --json "$@" > "$OUT/batch_$name.json" 2> "$OUT/batch_$name.log"
    local rc=$?
    tail -n 4 "$OUT/batch_$name.log"
    echo "   exit code $rc, $(( $(date +%s) - start )) s"
}

run warmup $((18 * PEOPLE)) "$WORK/subs" "${TWO[@]}"

# The measured runs grade a manifest of the same files, slowest first (passing grades, which are
# timed, then by the warm-up's grade times):
# with 20 grades on 2 GPUs, a long grade left for the end would idle the other GPU.
"$PY" - "$WORK" "$OUT/batch_warmup.json" <<'EOF'
import csv, json, sys
from pathlib import Path
work = Path(sys.argv[1])
subs = sorted((work / "subs").glob("*/*/solution.py"))
cost = {}  # passing grades are timed, so they take longest; then by the warm-up's grade time
try:
    for r in json.loads(Path(sys.argv[2]).read_text())["results"]:
        g = r["grade"]
        cost[(r["handle"], r["kata"])] = (g["status"] != "pass", -(g.get("duration_s") or 0))
except (OSError, ValueError, KeyError) as exc:
    print("warm-up JSON unreadable (", exc, "): manifest in folder order")
rows = [(p.parent.parent.name, p.parent.name, str(p)) for p in subs]
rows.sort(key=lambda r: cost.get((r[0], r[1]), (True, 0)))
with open(work / "cohort.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["handle", "kata", "path"])
    w.writerows(rows)
print("manifest:", work / "cohort.csv", "(slowest first)")
EOF

run gpus2 $((12 * PEOPLE)) "$WORK/cohort.csv" "${TWO[@]}"
run gpus1 $((20 * PEOPLE)) "$WORK/cohort.csv" "${ONE[@]}"

"$PY" - "$OUT" "$T0" <<'EOF'
import json, math, statistics, sys, time
from pathlib import Path
out, t0 = Path(sys.argv[1]), float(sys.argv[2])
runs = {}
for name in ("warmup", "gpus2", "gpus1"):
    try:
        runs[name] = json.loads((out / f"batch_{name}.json").read_text())
    except (OSError, ValueError) as exc:
        print(f"{name}: no result ({exc}); see {out}/batch_{name}.log")
        runs[name] = None

def summary(run):
    if not run:
        return None
    grades = [r["grade"] for r in run["results"]]
    busy = sum(g.get("duration_s") or 0 for g in grades)
    return {"engine": run["engine"], "engine_description": run["engine_description"],
            "slots": run["slots"], "graded": run["graded"], "not_graded": run["not_graded"],
            "wall_s": run["wall_s"], "engine_start_s": run.get("engine_start_s"),
            "grades_per_minute": run["grades_per_minute"],
            "busy_fraction": round(busy / (run["wall_s"] * run["slots"]), 3) if run["wall_s"] else None,
            "devices": sorted({g.get("device") or "-" for g in grades}),
            "status": {s: sum(g["status"] == s for g in grades) for s in ("pass", "fail", "error")}}

summaries = {name: summary(run) for name, run in runs.items()}
print("\n== throughput (grades per minute of grading; engine start-up excluded)")
for name, s in summaries.items():
    if s:
        print(f"  {name:7s} {s['grades_per_minute']:7.2f} grades/min  {s['graded']} graded in "
              f"{s['wall_s']:.1f} s on {s['engine_description']}; GPUs busy {100 * (s['busy_fraction'] or 0):.0f}%; "
              f"engine start {s['engine_start_s']} s; {s['status']}")
ratio = None
if summaries["gpus2"] and summaries["gpus1"]:
    ratio = summaries["gpus2"]["grades_per_minute"] / summaries["gpus1"]["grades_per_minute"]
    print(f"  two GPUs vs one: {ratio:.2f}x (target >= 1.8: {'met' if ratio >= 1.8 else 'NOT met'})")

def by_key(run):
    return {(r["handle"], r["kata"]): r["grade"] for r in run["results"]} if run else {}

graded = {name: by_key(run) for name, run in runs.items()}
keys = sorted(set().union(*[set(g) for g in graded.values()]))
rows, case_rows = [], []
for key in keys:
    g = {name: graded[name].get(key) for name in runs}
    row = {"handle": key[0], "kata": key[1]}
    for name in runs:
        row[f"{name}_status"] = g[name]["status"] if g[name] else None
        row[f"{name}_speedup"] = g[name].get("speedup") if g[name] else None
        row[f"{name}_device"] = g[name].get("device") if g[name] else None
        row[f"{name}_s"] = g[name].get("duration_s") if g[name] else None
    a, b, w = row["gpus2_speedup"], row["gpus1_speedup"], row["warmup_speedup"]
    row["gpus2_vs_gpus1"] = round(a / b, 4) if a and b else None
    row["warmup_vs_gpus2"] = round(w / a, 4) if a and w else None
    row["same_status"] = len({row[f"{n}_status"] for n in runs if row[f"{n}_status"]}) == 1
    rows.append(row)
    cases = {}
    for name in runs:
        for t in (g[name] or {}).get("tasks", []):
            for c in t["cases"]:
                if c.get("speedup"):
                    cases.setdefault((t["name"], c["name"], c["dtype"]), {})[name] = c["speedup"]
    for (task, case, dtype), s in sorted(cases.items()):
        case_rows.append({"handle": key[0], "kata": key[1], "task": task, "case": case, "dtype": dtype,
                          **{f"{n}_speedup": s.get(n) for n in runs},
                          "gpus2_vs_gpus1": round(s["gpus2"] / s["gpus1"], 4) if s.get("gpus2") and s.get("gpus1") else None,
                          "warmup_vs_gpus2": round(s["warmup"] / s["gpus2"], 4) if s.get("warmup") and s.get("gpus2") else None})

print("\n== each grade: status and geometric-mean speedup per run (warmup and gpus2 on two GPUs, gpus1 on one)")
fmt = lambda v: "-" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))
print(f"  {'grade':22s} {'status (w/2/1)':22s} {'warmup':>8s} {'gpus2':>8s} {'gpus1':>8s} {'2 vs 1':>8s} {'w vs 2':>8s}  devices (gpus2)")
for r in rows:
    status = "/".join(str(r[f"{n}_status"]) for n in runs)
    print(f"  {r['handle'] + '/' + r['kata']:22s} {status:22s} {fmt(r['warmup_speedup']):>8s} {fmt(r['gpus2_speedup']):>8s} "
          f"{fmt(r['gpus1_speedup']):>8s} {fmt(r['gpus2_vs_gpus1']):>8s} {fmt(r['warmup_vs_gpus2']):>8s}  {r['gpus2_device']}")

def dev(values):
    values = [abs(math.log(v)) for v in values if v]
    return {"n": len(values), "median_pct": round(100 * (math.exp(statistics.median(values)) - 1), 2) if values else None,
            "max_pct": round(100 * (math.exp(max(values)) - 1), 2) if values else None}

spread = {
    "grade_gpus2_vs_gpus1": dev(r["gpus2_vs_gpus1"] for r in rows),
    "grade_warmup_vs_gpus2": dev(r["warmup_vs_gpus2"] for r in rows),
    "case_gpus2_vs_gpus1": dev(r["gpus2_vs_gpus1"] for r in case_rows),
    "case_warmup_vs_gpus2": dev(r["warmup_vs_gpus2"] for r in case_rows),
}
print("\n== speedup differences, |ratio - 1| (median / max, %): two GPUs vs one, against the run-to-run spread")
for k, v in spread.items():
    print(f"  {k:24s} n={v['n']:3d}  median {v['median_pct']}%  max {v['max_pct']}%")
within = (spread["grade_gpus2_vs_gpus1"]["max_pct"] is not None and spread["grade_warmup_vs_gpus2"]["max_pct"] is not None
          and spread["grade_gpus2_vs_gpus1"]["max_pct"] <= max(spread["grade_warmup_vs_gpus2"]["max_pct"], 3.0))
print(f"  geomean speedups, two GPUs vs one, within the spread of two runs on two GPUs (or 3%): {within}")
print(f"  every grade's status the same in all runs: {all(r['same_status'] for r in rows)}")

result = {"elapsed_s": round(time.time() - t0, 1), "runs": summaries, "throughput_ratio": round(ratio, 3) if ratio else None,
          "target": 1.8, "met": bool(ratio and ratio >= 1.8), "speedups_within_spread": within,
          "same_status": all(r["same_status"] for r in rows), "spread": spread, "grades": rows, "cases": case_rows}
(out / "batch_gpu.json").write_text(json.dumps(result, indent=1))
print(f"\nwritten {out / 'batch_gpu.json'}; {result['elapsed_s']:.0f} s in all")
EOF
rm -rf "$WORK"
