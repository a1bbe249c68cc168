"""How long a warm interpreter grade takes on the CPU (docs/PERFORMANCE.md), wall and CPU time.

    python benchmarks/interpret_grade_time.py [--rounds N] [--out FILE.json] [KATA ...]

Grades each kata's reference with `python -m grader grade reference/K.py --kata K --interpret
--no-record --json`, one after another, after one grade to warm the warm-start server and
Triton's cache (not counted). For each grade: the wall time of the command, the grade time and
its phases as the grade reports them, and the CPU time (user + sys) of every process of the
grade: the command's own, and its worker's and checker's, which the warm-start server forks (read
from the server's reaped-children times in /proc) or, with KATA_WARM_START=0, the command starts.
On a shared machine CPU time is the steadier figure: wall time counts the other processes' turns.
Run nothing else with the same Python meanwhile: its grades would share the server's count.
Default katas: softmax, layer_norm, activations, spmv, vector_add.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ["softmax", "layer_norm", "activations", "spmv", "vector_add"]
TICKS = os.sysconf("SC_CLK_TCK")


def warm_servers() -> list[int]:
    """This Python's warm-start servers (their reaped children are the grades' workers and checkers)."""
    mine = os.path.realpath(sys.executable)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
            exe = os.path.realpath(entry / "exe")
        except OSError:
            continue
        if exe == mine and any(b"warm_start" in part for part in cmd) and entry.stat().st_uid == os.getuid():
            found.append(int(entry.name))
    return found


def reaped_cpu() -> dict[int, float]:
    """{server pid: CPU seconds of the children it has reaped}."""
    found = {}
    for pid in warm_servers():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        found[pid] = (int(fields[13]) + int(fields[14])) / TICKS  # cutime, cstime
    return found


def own_children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def grade(kata: str) -> dict:
    cpu0, server0, t0 = own_children_cpu(), reaped_cpu(), time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "grader", "grade", f"reference/{kata}.py", "--kata", kata,
                           "--interpret", "--no-record", "--json"], cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    # A server started by this grade counts whole; one gone since (idle) counts nothing.
    cpu = own_children_cpu() - cpu0 + sum(t - server0.get(pid, 0.0) for pid, t in reaped_cpu().items())
    result = json.loads(done.stdout) if done.stdout.strip().startswith("{") else {}
    return {"kata": kata, "status": result.get("status"), "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "grade_s": result.get("duration_s"), "phases_s": result.get("phases_s")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("katas", nargs="*", default=DEFAULT)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    for kata in args.katas:  # warm: the server, Triton's cache (not counted)
        grade(kata)
    runs = []
    for number in range(args.rounds):
        for kata in args.katas:
            run = dict(grade(kata), round=number + 1)
            runs.append(run)
            print(f"{kata:<16} round {number + 1}: {run['status']}, wall {run['wall_s']:.2f} s, "
                  f"CPU {run['cpu_s']:.2f} s, grade {run['grade_s']} s", flush=True)
    print(f"\n{'kata':<16} {'wall median (s)':>16} {'CPU median (s)':>15} {'grade median (s)':>17}")
    for kata in args.katas:
        mine = [r for r in runs if r["kata"] == kata]
        print(f"{kata:<16} {statistics.median(r['wall_s'] for r in mine):>16.2f} "
              f"{statistics.median(r['cpu_s'] for r in mine):>15.2f} "
              f"{statistics.median(r['grade_s'] or 0 for r in mine):>17.2f}")
    if args.out:
        args.out.write_text(json.dumps({"load": os.getloadavg(), "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
