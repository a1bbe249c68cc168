"""The floor of a CSR matrix-vector product on this GPU, beside cuSPARSE and the spmv reference.

A CSR SpMV cannot avoid three costs: streaming the values, column indices and row pointers once,
gathering one x element per nonzero, and writing y once. The floor kernel below pays exactly
those and nothing else: program p streams the p-th chunk of nonzeros and gathers x at their
columns, sums its products into one number (no rows, no segments: its y is wrong), and streams
the p-th share of the row pointers into y. No correct kernel can be faster than the fastest
floor variant, so the floor bounds what a speed target on these matrices can ask
(docs/PERFORMANCE.md, 2026-11-24: cuSPARSE x 2.0 is beyond it on every bench case, and 60% of
the copy bandwidth is beyond it on bench_power_law_wide).

    python benchmarks/spmv_floor.py --out floor.json

Times are medians of `grader.timing.timer.held_median_ms` (the L2 flushed before each call, as a
grade times one), in interleaved rounds; bandwidth is on the kata's counted bytes.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import statistics
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader.timing.timer import held_median_ms, measure_ceilings  # noqa: E402

CASES = ("bench_power_law", "bench_power_law_wide")
DTYPES = (torch.float32, torch.float16)
# (nonzeros per program, warps): the floor is the fastest of these.
FLOOR_CONFIGS = ((512, 4), (1024, 8), (256, 1), (2048, 8))
ROUNDS = 3


@triton.jit
def floor_kernel(crow_ptr, col_ptr, val_ptr, x_ptr, y_ptr, nnz, R, rows_per_program,
                 NPP: tl.constexpr, ROW_BLOCK: tl.constexpr):
    p = tl.program_id(0)
    k = p.to(tl.int64) * NPP + tl.arange(0, NPP)
    inside = k < nnz
    v = tl.load(val_ptr + k, mask=inside, other=0.0, eviction_policy="evict_first")
    col = tl.load(col_ptr + k, mask=inside, other=0, eviction_policy="evict_first")
    xv = tl.load(x_ptr + col, mask=inside, other=0.0)
    total = tl.sum(v.to(tl.float32) * xv.to(tl.float32), 0)
    # This program's share of the row pointers, streamed into y (kept live by the store).
    r0 = p.to(tl.int64) * rows_per_program
    r1 = tl.minimum(r0 + rows_per_program, R)
    for rb in range(r0, r1, ROW_BLOCK):
        rows = rb + tl.arange(0, ROW_BLOCK)
        start = tl.load(crow_ptr + rows, mask=rows < r1, other=0, eviction_policy="evict_first")
        out = start.to(tl.float32) * 1e-30 + total
        tl.store(y_ptr + rows, out.to(y_ptr.dtype.element_ty), mask=rows < r1)


def floor_spmv(crow, col, values, x, npp: int, warps: int) -> torch.Tensor:
    R, nnz = crow.numel() - 1, values.numel()
    programs = max(1, triton.cdiv(nnz, npp))
    rows_per_program = triton.cdiv(R, programs)
    y = torch.empty(R, dtype=values.dtype, device=values.device)
    floor_kernel[(programs,)](crow, col, values, x, y, nnz, R, rows_per_program, NPP=npp,
                              ROW_BLOCK=min(1024, triton.next_power_of_2(rows_per_program)),
                              num_warps=warps, num_stages=1)
    return y


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def counted_bytes(case: dict, itemsize: int) -> int:
    # The kata's cost model (katas/spmv/kata.yaml, task spmv).
    R, nnz = case["R"], case["nnz"]
    return nnz * (2 * itemsize + 8) + (R + 1) * 8 + R * itemsize


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = parser.parse_args()

    spec = _load("spmv_spec", ROOT / "katas/spmv/spec.py")
    reference = _load("spmv_reference", ROOT / "reference/spmv.py")
    kata = yaml.safe_load((ROOT / "katas/spmv/kata.yaml").read_text())
    cases = {c["name"]: c for c in kata["tasks"][0]["cases"]["hidden"]}
    ceilings = measure_ceilings()
    copy_gbps = ceilings["copy_gbps"]

    calls = {"cusparse": spec.baseline, "reference": reference.spmv}
    for npp, warps in FLOOR_CONFIGS:
        calls[f"floor npp={npp} warps={warps}"] = (
            lambda *a, npp=npp, warps=warps: floor_spmv(*a, npp=npp, warps=warps))

    rows = []
    for name in CASES:
        case = cases[name]
        for dtype in DTYPES:
            gen = torch.Generator(device="cuda")
            gen.manual_seed(0)
            inputs = spec.make_inputs(case, dtype, "cuda", gen)
            operands = (inputs["crow_indices"], inputs["col_indices"], inputs["values"], inputs["x"])
            times = {label: [] for label in calls}
            for _ in range(ROUNDS):
                for label, fn in calls.items():
                    times[label].append(held_median_ms(lambda: fn(*operands), rep_ms=60) * 1e3)
            nbytes = counted_bytes(case, dtype.itemsize)
            medians = {label: statistics.median(ts) for label, ts in times.items()}
            floor_label = min((label for label in medians if label.startswith("floor")),
                              key=medians.get)
            for label, us in medians.items():
                rows.append({"case": name, "dtype": str(dtype).removeprefix("torch."), "call": label,
                             "us": us, "rounds_us": times[label],
                             "vs_cusparse": medians["cusparse"] / us,
                             "pct_copy": 100 * nbytes / (us * 1e-6) / 1e9 / copy_gbps,
                             "is_floor": label == floor_label})
            del inputs, operands
            torch.cuda.empty_cache()

    for r in rows:
        mark = "  <- floor" if r["is_floor"] else ""
        print(f"{r['case']:22s} {r['dtype']:8s} {r['call']:26s} {r['us']:8.1f} us "
              f"{r['vs_cusparse']:5.2f}x cuSPARSE {r['pct_copy']:5.1f}% of copy{mark}")
    if args.out:
        args.out.write_text(json.dumps({
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="minutes"),
            "device": ceilings["device"], "torch": torch.__version__, "triton": triton.__version__,
            "copy_gbps": copy_gbps, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
