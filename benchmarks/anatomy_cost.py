"""What the anatomy costs a warm GPU grade, and what it finds (docs/PERFORMANCE.md, "Grade times").

Run from the repository root on a lent H100/H200:

    python3 benchmarks/anatomy_cost.py "$OUT"

Grades, warm (ceilings cached, Triton's cache filled, the warm-start server up), the softmax
reference and a vector_add kernel on a fixed grid of 8 programs, ROUNDS times each with the
anatomy (the default) and ROUNDS times without (KATA_NO_ANATOMY=1), alternating.
Writes $OUT/anatomy_cost.json: per grade the median wall time with and without and the
difference (the issue's budget: at most 2 s), the speedups both ways (the anatomy's extra call
runs after each case's timing and must not move them), the advice codes, and one anatomy per
grade; and $OUT/report-*.html, the HTML report of each grade with its anatomy (the roofline
plot needs matplotlib; without it the report says how to get it).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROUNDS = int(os.environ.get("ANATOMY_COST_ROUNDS", "4"))  # the median of two is only their mean
EIGHT_PROGRAMS = '''
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr, PROGRAMS: tl.constexpr):
    pid = tl.program_id(0)
    for block in range(pid, tl.cdiv(n, BLOCK), PROGRAMS):
        offsets = block * BLOCK + tl.arange(0, BLOCK)  # int32: every case here is under 2**31
        mask = offsets < n
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask),
                 mask=mask)


def vector_add(x, y):
    out = torch.empty_like(x)
    add_kernel[(8,)](x, y, out, x.numel(), BLOCK=1024, PROGRAMS=8, num_warps=4)
    return out
'''


def grade(kata: str, path: Path, anatomy: bool, report: Path | None = None) -> tuple[float, dict]:
    env = dict(os.environ)
    if not anatomy:
        env["KATA_NO_ANATOMY"] = "1"
    command = [sys.executable, "-m", "grader", "grade", str(path), "--kata", kata, "--gpu", "--no-record",
               "--json"] + (["--report", str(report)] if report else [])
    started = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - started
    try:
        return wall, json.loads(proc.stdout)
    except ValueError:
        return wall, {"error": proc.stderr[-2000:]}


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp())
    eight = folder / "solution.py"
    eight.write_text(EIGHT_PROGRAMS)
    subjects = {"softmax_reference": ("softmax", Path("reference/softmax.py")),
                "vector_add_8_programs": ("vector_add", eight)}
    only = os.environ.get("ANATOMY_COST_ONLY")  # e.g. softmax_reference: one subject, when time is short
    found = {}
    for name, (kata, path) in subjects.items():
        if only and name not in only.split(","):
            continue
        grade(kata, path, True)  # warm: ceilings, Triton's cache, the warm-start server
        runs = {True: [], False: []}
        results = {}
        for i in range(ROUNDS):
            for anatomy in (True, False):
                report = out / f"report-{name}.html" if anatomy and i == ROUNDS - 1 else None
                wall, result = grade(kata, path, anatomy, report)
                runs[anatomy].append(wall)
                results[anatomy] = result
        timed = [c for t in results[True].get("tasks", []) for c in t["cases"] if c.get("time_ms")]
        found[name] = {
            "wall_s_with": statistics.median(runs[True]), "wall_s_without": statistics.median(runs[False]),
            "anatomy_s": statistics.median(runs[True]) - statistics.median(runs[False]),
            "walls_with": runs[True], "walls_without": runs[False],
            "speedup_with": results[True].get("speedup"), "speedup_without": results[False].get("speedup"),
            "status_with": results[True].get("status"), "status_without": results[False].get("status"),
            "advice": [a["code"] for a in results[True].get("advice", [])],
            "advice_messages": [a["message"] for a in results[True].get("advice", [])],
            "timed_cases_with_kernels": sum(bool(c.get("kernels")) for c in timed), "timed_cases": len(timed),
            "first_anatomy": {k: timed[0].get(k) for k in ("name", "dtype", "time_ms", "kernels", "anatomy")}
            if timed else None,
            "error": results[True].get("error"),
        }
        print(name, json.dumps({k: v for k, v in found[name].items() if k != "first_anatomy"}), flush=True)
    (out / "anatomy_cost.json").write_text(json.dumps(found, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", "anatomy-out")))
