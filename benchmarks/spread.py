"""Run-to-run spread of repeated GPU grades: `python benchmarks/spread.py DIR` reads
DIR/spread_<kata>_<i>.json (from benchmarks/gpu_proof.sh spread) and prints, per kata, the
geometric-mean speedup of each run and max/min; per case, the spread of its speedup."""

from __future__ import annotations

import glob
import json
import re
import sys
from collections import defaultdict


def main(folder: str) -> None:
    runs = defaultdict(list)
    for path in sorted(glob.glob(f"{folder}/spread_*_*.json")):
        kata = re.match(r".*/spread_(.+)_\d+\.json$", path).group(1)
        try:
            runs[kata].append(json.load(open(path)))
        except ValueError:
            print(f"{path}: unreadable")
    summary = {}
    for kata, grades in runs.items():
        speedups = [g["speedup"] for g in grades if g.get("speedup")]
        statuses = [g["status"] for g in grades]
        per_case = defaultdict(list)
        kernel_ms = {}
        for g in grades:
            for t in g["tasks"]:
                for c in t["cases"]:
                    if c.get("speedup"):
                        label = f"{c['name']}/{c['dtype']}"
                        per_case[label].append(c["speedup"])
                        kernel_ms[label] = c["time_ms"]
        ratio = max(speedups) / min(speedups) if speedups else None
        summary[kata] = {"statuses": statuses, "speedups": speedups, "max_over_min": ratio,
                         "min_kernel_ms": min(kernel_ms.values()) if kernel_ms else None,
                         "cases": {k: {"speedups": v, "max_over_min": max(v) / min(v), "kernel_ms": kernel_ms[k]}
                                   for k, v in per_case.items()}}
        print(f"{kata}: statuses {statuses}; geomean speedups "
              + ", ".join(f"{s:.4f}" for s in speedups) + (f"; max/min {ratio:.4f}" if ratio else ""))
        for label, v in per_case.items():
            print(f"  {label:32s} {kernel_ms[label]:.4f} ms  max/min {max(v) / min(v):.4f}  "
                  + " ".join(f"{s:.3f}" for s in v))
    json.dump(summary, open(f"{folder}/spread.json", "w"), indent=2)


if __name__ == "__main__":
    main(sys.argv[1])
