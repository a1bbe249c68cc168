"""How long a GPU grade takes for honest kernels of several speeds (issue 31, point 5: a kernel of at
most 1 s a call is graded within 60 s, a typical honest kernel within 15 s). Run from the
repository root on a lent H100/H200:

    python benchmarks/grade_wall_time.py [--out DIR] [--runs N]

Grades each kernel below with `kata grade --gpu --no-record --json` (a fresh CLI process, as a
learner runs it) after one warm-up grade (the warm-start server, the device's ceilings), N times
each (default 1; the first grade of a kernel compiles it). About 3-4 minutes on an H200. Writes DIR/grade_wall_time.json (default
DIR: $OUT, else the current folder): every grade (status, score, speedup, wall and grade seconds,
phases, each bench case's speedup, time and timing rounds) and the distribution of wall times; prints a
table. Exit status 0 when every grade ended within the bound and with the status expected.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HONEST = ROOT / "benchmarks" / "honest_speeds"
BOUND_S, TYPICAL_S = 60.0, 15.0

# (label, kata, solution, the status an honest kernel of that speed gets)
KERNELS = [
    ("vector_add reference", "vector_add", ROOT / "reference" / "vector_add.py", "pass"),
    ("vector_add grid of 64", "vector_add", HONEST / "vector_add_grid64.py", None),
    ("vector_add grid of 8 (~0.01x)", "vector_add", HONEST / "vector_add_grid8.py", "fail"),
    ("vector_add grid of 1 (~1 s a call)", "vector_add", HONEST / "vector_add_grid1.py", "fail"),
    ("softmax reference", "softmax", ROOT / "reference" / "softmax.py", "pass"),
    ("softmax three passes", "softmax", HONEST / "softmax_three_pass.py", None),
]


def grade(kata: str, solution: Path) -> tuple[dict, float]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "grader", "grade", str(solution), "--kata", kata, "--gpu",
                           "--no-record", "--json"], cwd=ROOT, capture_output=True, text=True)
    wall = time.monotonic() - started
    try:
        return json.loads(done.stdout), wall
    except ValueError:
        return {"status": "no_result", "message": (done.stderr or done.stdout)[-2000:]}, wall


def summary(result: dict) -> dict:
    cases = [c for t in result.get("tasks", []) for c in t.get("cases", [])]
    return {
        "status": result.get("status"), "score": result.get("score"), "speedup": result.get("speedup"),
        "duration_s": result.get("duration_s"), "phases_s": result.get("phases_s"),
        "message": (result.get("message") or "")[:400],
        "bench": {f"{c['task']}/{c['name']}/{c['dtype']}": {
            "speedup": c.get("speedup"), "time_ms": c.get("time_ms"), "method": c.get("timing_method"),
            "rounds": len(c.get("round_speedups") or [])} for c in cases if c.get("speedup")},
    }


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    import torch
    import triton

    env = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "triton": triton.__version__,
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cores": os.cpu_count()}
    warm, warm_wall = grade("vector_add", ROOT / "reference" / "vector_add.py")
    print(f"warm-up grade: {warm.get('status')} in {warm_wall:.1f} s", flush=True)
    grades, ok = [], True
    for label, kata, solution, expected in KERNELS:
        for run in range(args.runs):
            result, wall = grade(kata, solution)
            row = {"label": label, "kata": kata, "solution": str(solution.relative_to(ROOT)), "run": run + 1,
                   "wall_s": round(wall, 2), "expected": expected, **summary(result)}
            good = wall <= BOUND_S and (expected is None or row["status"] == expected)
            ok &= good
            grades.append(row)
            speed = f"{row['speedup']:.3g}x" if row["speedup"] else "-"
            print(f"{label:32s} run {run + 1}: {row['status']:5s} score {row['score']} speedup {speed:8s} "
                  f"wall {wall:6.1f} s  grade {row['duration_s']} s  {row['phases_s']}"
                  + ("" if good else "  <-- NOT AS EXPECTED"), flush=True)
    walls = [g["wall_s"] for g in grades]
    distribution = {"grades": len(walls), "median_s": statistics.median(walls), "p90_s": percentile(walls, 0.9),
                    "max_s": max(walls), "within_bound": all(w <= BOUND_S for w in walls),
                    "within_typical": sum(w <= TYPICAL_S for w in walls),
                    "by_kernel": {label: {"median_s": statistics.median(w), "max_s": max(w)} for label, w in (
                        (label, [g["wall_s"] for g in grades if g["label"] == label]) for label, *_ in KERNELS)}}
    report = {"env": env, "bound_s": BOUND_S, "typical_s": TYPICAL_S, "warm_up_wall_s": round(warm_wall, 2),
              "distribution": distribution, "grades": grades}
    (args.out / "grade_wall_time.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(distribution))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
