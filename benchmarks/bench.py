"""GPU benchmark of every reference against its peers, in one run (docs/PERFORMANCE.md).

For each kata's timed (bench) cases: the reference, PyTorch eager (the kata's baseline) and
torch.compile of that baseline, timed as a grade times a call (grader.timing.timer.
held_median_ms: median, L2 flushed, the GPU held back until the host has queued the call, two
input sets rotated, the three interleaved over several rounds), plus the device's measured
copy bandwidth and matmul rate from the same run. Until 2026-11-23 the calls were timed with
triton.testing.do_bench, which counts a slow host's launch overhead in a call of several
launches (benchmarks/results/PERFORMANCE_LOG.md, "spmv: where the time goes").

    python benchmarks/bench.py [KATA ...] --out results.json
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import itertools
import json
import statistics
import sys
from pathlib import Path

import torch
import triton

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grader.judge.inputs import case_seed  # noqa: E402
from grader.kata.catalog import all_katas, get_kata  # noqa: E402
from grader.timing.timer import floor_ms, held_median_ms, measure_ceilings  # noqa: E402


def rotating(fn, input_sets):
    """A callable that feeds fn a different input set on each call, so no call can replay the last."""
    cycle = itertools.cycle(input_sets)
    return lambda: fn(*next(cycle))

ROUNDS = 3


def _shape(value) -> list[int]:
    """A tensor's shape; for a list of tensors (a model's parameters), [count, total elements]."""
    if isinstance(value, (list, tuple)):
        return [len(value), sum(t.numel() for t in value)]
    return list(value.shape)


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bench_kata(kata, ceilings: dict, compile_dtypes: set[str] | None = None) -> list[dict]:
    spec = _load(f"spec_{kata.name}", kata.spec_path)
    reference = _load(f"ref_{kata.name}", kata.reference_path)
    rows = []
    for task in kata.tasks:
        baseline = getattr(spec, task.baseline_fn)
        # A baseline marked `bench_compile = False` (an autograd call) is timed eager only.
        compiled = torch.compile(baseline, dynamic=False) if getattr(baseline, "bench_compile", True) else None
        for case in (c for c in task.cases if c.bench):
            for dtype_name in case.dtypes:
                dtype = getattr(torch, dtype_name)
                input_sets = []
                for i in range(2):
                    gen = torch.Generator(device="cuda")
                    gen.manual_seed(case_seed(0, f"{task.name}/{case.name}/{dtype_name}/{i}"))
                    inputs = getattr(spec, task.inputs_fn)(dict(case.params), dtype, "cuda", gen)
                    input_sets.append(tuple(inputs[a] for a in task.args))
                impls = {"reference": getattr(reference, task.name), "eager": baseline}
                if compiled is not None and (compile_dtypes is None or dtype_name in compile_dtypes):  # ~10 s a shape
                    impls["compile"] = compiled
                # More peers a spec names (BENCH_PEERS = {name: function in spec.py}).
                impls.update({name: getattr(spec, fn) for name, fn in getattr(spec, "BENCH_PEERS", {}).items()})
                for name, fn in list(impls.items()):  # compile and autotune outside the timed region
                    try:
                        fn(*input_sets[0])
                    except Exception as exc:  # noqa: BLE001 - a peer that cannot run this case
                        if name in ("reference", "eager"):
                            raise
                        print(f"{kata.name} {case.name}: {name} skipped ({type(exc).__name__}: "
                              f"{str(exc).splitlines()[0][:200] if str(exc) else ''})", flush=True)
                        del impls[name]
                torch.cuda.synchronize()
                times = {name: [] for name in impls}
                for _ in range(ROUNDS):
                    for name, fn in impls.items():
                        times[name].append(held_median_ms(rotating(fn, input_sets)))
                ms = {name: statistics.median(t) for name, t in times.items()}
                nbytes, flops = task.cost(case, itemsize=torch.empty((), dtype=dtype).element_size())
                floor = floor_ms(nbytes, flops, ceilings)
                row = {
                    "kata": kata.name, "task": task.name, "case": case.name, "dtype": dtype_name,
                    "shape": _shape(input_sets[0][0]), "bytes": nbytes, "flops": flops,
                    "ms": ms, "rounds_ms": times,
                    "gbps": {name: nbytes / (t * 1e-3) / 1e9 for name, t in ms.items()},
                    "pct_copy_bw": {name: floor / t for name, t in ms.items()},
                    "speedup_vs_eager": ms["eager"] / ms["reference"],
                    "speedup_vs_compile": ms["compile"] / ms["reference"] if "compile" in ms else None,
                    "speedup_vs_peers": {name: ms[name] / ms["reference"] for name in ms
                                         if name not in ("reference", "eager", "compile")},
                }
                rows.append(row)
                print(f"{kata.name:11s} {task.name:16s} {case.name:20s} {dtype_name:9s} ref {ms['reference']*1e3:8.1f} us "
                      f"({100*row['pct_copy_bw']['reference']:5.1f}% bw)  eager {ms['eager']*1e3:8.1f} us "
                      + (f"compile {ms['compile']*1e3:8.1f} us  x{row['speedup_vs_compile']:.2f} compile "
                         if "compile" in ms else "") + f"x{row['speedup_vs_eager']:.2f} eager"
                      + "".join(f"  {name} {ms[name]*1e3:8.1f} us x{x:.2f}" for name, x in row["speedup_vs_peers"].items()),
                      flush=True)
                del input_sets
                torch.cuda.empty_cache()
    return rows


def _allow_recompiles() -> None:
    # One compiled graph per (case, dtype): lift dynamo's recompile cap, or later shapes would
    # silently fall back to eager and be reported as "compile".
    for name in ("cache_size_limit", "recompile_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, 256)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("katas", nargs="*")
    parser.add_argument("--out", type=Path, default=Path("bench.json"))
    parser.add_argument("--compile-dtypes", help="comma-separated dtypes to also time under torch.compile (default: all)")
    args = parser.parse_args()
    katas = [get_kata(k) for k in args.katas] if args.katas else all_katas()
    _allow_recompiles()
    ceilings = measure_ceilings()
    print(f"{ceilings['device']}: copy {ceilings['copy_gbps']:.0f} GB/s, "
          f"bf16 matmul {ceilings['matmul_tflops']:.0f} TFLOP/s", flush=True)
    rows = []
    for kata in katas:
        rows += bench_kata(kata, ceilings, set(args.compile_dtypes.split(",")) if args.compile_dtypes else None)
    result = {
        "date": datetime.date.today().isoformat(), "device": ceilings["device"],
        "torch": torch.__version__, "triton": triton.__version__, "ceilings": ceilings,
        "method": "grader.timing.timer.held_median_ms (warmup 25 ms, rep 100 ms, L2 flushed, GPU held "
                  "back until the host has queued each call), "
                  f"2 input sets rotated, {ROUNDS} interleaved rounds, median round",
        "rows": rows,
    }
    args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
