"""The honest-error envelope: how much of each tolerance honest kernels use (docs/SCORING.md,
"How tolerances are set").

    python benchmarks/honest_envelope.py [--mode interpreter|gpu] [--katas K,K] [--seeds 1,2,3]
                                         [--cases panel|checked|all] [--budget-s S] [--out FILE.json]

Grades, for each kata of the honest panel (tests/test_honest_panel.py), each honest variant
(tests/honest/<kata>_*.py) and the kata's reference with the grader's own API, and reads each
case's `tolerance_used`: per output, the worst error as a fraction of what the tolerance allows
at that element (1.0: at the limit; above 1 fails). Reports, per kata x task x output x dtype,
the largest fraction over the variants (naming the variant, case and seed) and the reference's.

Cases: `panel` (the default) grades each variant as the panel does, on its `# panel-cases`, all
of them under the first seed and the first two under the others; the reference on the union of
its variants' cases. `checked` grades every case the mode has that is not timed (on a GPU: the
large checked cases too), every file on every seed; `all` adds the bench cases (timed, slow).
bfloat16 and fp8 run wherever the case has them on a GPU; the interpreter skips them, and they
are reported as "GPU only". The JSON is rewritten after every grade, so a run cut short keeps
what it measured; --budget-s starts no grade after that many seconds (the table still prints).
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader.grading.runner import grade  # noqa: E402
from grader.kata.catalog import get_kata  # noqa: E402

HONEST = ROOT / "tests" / "honest"
PANEL_KATAS = ("adamw", "cross_entropy", "softmax", "layer_norm", "rms_norm", "rms_norm_backward",
               "paged_decode", "prefix_sum", "reduce", "flash_attention", "quantize", "muon",
               "matmul_lowp")
NEAR = 0.5  # a variant above this fraction of its tolerance is named in the report


def panel_cases(path: Path) -> list[str]:
    found = re.search(r"^# panel-cases:\s*(.+)$", path.read_text(), flags=re.M)
    return [c.strip() for c in found.group(1).split(",")] if found else []


def variants_of(kata: str) -> list[Path]:
    """tests/honest/<kata>_*.py, not those of a longer kata name (rms_norm vs rms_norm_backward)."""
    longer = [k for k in PANEL_KATAS if k != kata and k.startswith(kata + "_")]
    return sorted(p for p in HONEST.glob(f"{kata}_*.py")
                  if not any(p.stem.startswith(k + "_") for k in longer))


def case_plan(kata, mode: str, variants: list[Path], seeds: list[int], cases: str) -> dict:
    """{file stem or 'reference': [(seed, only_cases or None)]}, as the panel grades them."""
    if cases in ("all", "checked"):
        only = None if cases == "all" else sorted({c.name for t in kata.tasks for c in t.cases
                                                   if not c.bench and mode in c.modes})
        return {name: [(s, only) for s in seeds] for name in [p.stem for p in variants] + ["reference"]}
    plan, reference = {}, {}
    for path in variants:
        listed = panel_cases(path)
        plan[path.stem] = [(s, listed if i == 0 else listed[:2]) for i, s in enumerate(seeds)]
        for i, s in enumerate(seeds):
            reference.setdefault(s, [])
            reference[s] += [c for c in (listed if i == 0 else listed[:2]) if c not in reference[s]]
    plan["reference"] = [(s, reference[s]) for s in seeds]
    return plan


def jobs(katas: list[str], mode: str, seeds: list[int], cases: str) -> list[tuple]:
    """(kata, file name, path, seed, only_cases) for every grade, in rounds: every kata's
    reference, then every kata's first variant, and so on, seed by seed, so that a run cut short
    by --budget-s still covers every kata."""
    per_kata = []
    for name in katas:
        kata = get_kata(name)
        variants = variants_of(name)
        paths = {p.stem: p for p in variants} | {"reference": kata.reference_path}
        plan = case_plan(kata, mode, variants, seeds, cases)
        order = ["reference"] + [p.stem for p in variants]
        per_kata.append([[(kata, f, paths[f], *plan[f][i]) for f in order] for i in range(len(seeds))])
    width = max(len(order) for rounds in per_kata for order in rounds)
    return [rounds[i][j] for i in range(len(seeds)) for j in range(width)
            for rounds in per_kata if j < len(rounds[i])]


def measure(job: tuple, mode: str, record) -> None:
    kata, name, path, seed, only = job
    start = time.perf_counter()
    result = grade(kata, path, mode, seed=seed, only_cases=only, keep_going=True)
    record({"kata": kata.name, "file": name, "seed": seed, "status": result.status,
            "message": result.message, "cheats": list(result.cheats),
            "seconds": round(time.perf_counter() - start, 1),
            "cases": [{"task": t.name, "case": c.name, "dtype": c.dtype, "status": c.status,
                       "tolerance_used": c.tolerance_used, "message": c.message[:300]}
                      for t in result.tasks for c in t.cases]})


def envelope(grades: list[dict]) -> list[dict]:
    """Per kata x task x output x dtype: the worst honest variant's fraction (and where), the
    reference's, and the dtypes only a GPU grades."""
    rows: dict[tuple, dict] = {}
    for g in grades:
        side = "reference" if g["file"] == "reference" else "honest"
        for c in g["cases"]:
            outputs = c["tolerance_used"] or ({"(all)": None} if c["status"] == "skipped" else {})
            for output, used in outputs.items():
                key = (g["kata"], c["task"], output, c["dtype"])
                row = rows.setdefault(key, {"kata": key[0], "task": key[1], "output": key[2],
                                            "dtype": key[3], "honest": None, "reference": None,
                                            "all_skipped": True, "failed": []})
                if c["status"] == "skipped":
                    continue
                row["all_skipped"] = False
                if c["status"] != "pass":
                    row["failed"].append({"file": g["file"], "case": c["case"], "seed": g["seed"],
                                          "status": c["status"], "message": c["message"]})
                if used is None:
                    continue
                best = row[side]
                if best is None or used > best["used"]:
                    row[side] = {"used": used, "file": g["file"], "case": c["case"], "seed": g["seed"]}
    # A dtype whose outputs were measured elsewhere in the task needs no "(all)" placeholder.
    measured = {(k[0], k[1], k[3]) for k, r in rows.items() if k[2] != "(all)"}
    return [r for k, r in sorted(rows.items()) if not (k[2] == "(all)" and (k[0], k[1], k[3]) in measured)]


def _fmt(entry: dict | None, with_file: bool) -> str:
    if entry is None:
        return "-"
    where = f"{entry['file']}, " if with_file else ""
    used = entry["used"]
    figure = f"{used:.3g}" if not 0.999 < used < 1 else f"{used:.6f}"  # just under the limit is not 1
    return f"{figure} ({where}{entry['case']}, seed {entry['seed']})"


def table(rows: list[dict], mode: str) -> str:
    from tabulate import tabulate

    body = []
    skipped = "GPU only" if mode == "interpret" else "skipped"
    for r in rows:
        if r["all_skipped"]:
            body.append([r["kata"], r["task"], r["output"], r["dtype"], skipped, skipped])
            continue
        body.append([r["kata"], r["task"], r["output"], r["dtype"], _fmt(r["honest"], True),
                     _fmt(r["reference"], False)])
    return tabulate(body, headers=["kata", "task", "output", "dtype", "worst honest variant",
                                   "reference"])


def dump(report: dict) -> str:
    """The report as JSON, one line per grade and per envelope row (a file of thousands of
    indented lines otherwise)."""
    lines = []
    for key, value in report.items():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            items = ",\n  ".join(json.dumps(v, default=str) for v in value)
            lines.append(f"{json.dumps(key)}: [\n  {items}\n ]")
        else:
            lines.append(f"{json.dumps(key)}: {json.dumps(value, default=str)}")
    return "{\n " + ",\n ".join(lines) + "\n}\n"


def environment(mode: str) -> dict:
    import torch
    import triton

    env = {"mode": mode, "torch": torch.__version__, "triton": triton.__version__,
           "python": platform.python_version(), "date": datetime.datetime.now(datetime.timezone.utc).isoformat()}
    if mode == "gpu" and torch.cuda.is_available():
        env["device"] = torch.cuda.get_device_name()
    return env


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", default="interpreter", choices=["interpreter", "interpret", "gpu"])
    parser.add_argument("--katas", default=",".join(PANEL_KATAS))
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--cases", default="panel", choices=["panel", "checked", "all"])
    parser.add_argument("--budget-s", type=float, default=None,
                        help="start no grade after this many seconds")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    mode = "interpret" if args.mode.startswith("interpret") else "gpu"
    katas = [k for k in args.katas.split(",") if k]
    unknown = [k for k in katas if k not in PANEL_KATAS]
    if unknown:
        parser.error(f"not in the honest panel: {', '.join(unknown)}")
    seeds = [int(s) for s in args.seeds.split(",") if s]
    label = "interpreter" if mode == "interpret" else "gpu"
    out = args.out or (ROOT / "benchmarks" / "results" / "perf" /
                       f"{datetime.date.today().isoformat()}-{label}-honest-envelope.json")
    report = {"environment": environment(mode), "katas": katas, "seeds": seeds, "cases": args.cases,
              "grades": [], "envelope": []}

    def record(entry: dict) -> None:
        report["grades"].append(entry)
        report["envelope"] = envelope(report["grades"])
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(dump(report))
        print(f"{entry['kata']:18} {entry['file']:36} seed {entry['seed']}: {entry['status']} "
              f"({entry['seconds']} s)", file=sys.stderr, flush=True)

    deadline = time.monotonic() + (args.budget_s if args.budget_s else float("inf"))
    planned = jobs(katas, mode, seeds, args.cases)
    for job in planned:
        if time.monotonic() > deadline:
            break
        measure(job, mode, record)
    if len(report["grades"]) < len(planned):
        report["cut_short"] = (f"the budget of {args.budget_s:g} s ran out: {len(report['grades'])} of "
                               f"{len(planned)} grades ran")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(dump(report))
        print(report["cut_short"])
    rows = report["envelope"]
    print(table(rows, mode))
    near = [r for r in rows if r["honest"] and r["honest"]["used"] > NEAR]
    failed = [(r, f) for r in rows for f in r["failed"]]
    for r in near:
        print(f"near the limit: {r['kata']}/{r['task']} {r['output']} {r['dtype']}: {_fmt(r['honest'], True)}")
    for r, f in failed:
        print(f"FAILED: {r['kata']}/{r['task']} {r['dtype']}: {f['file']} on {f['case']} (seed {f['seed']}): "
              f"{f['status']}: {f['message'][:200]}")
    print(f"written to {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
