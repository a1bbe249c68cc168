"""The floor of a CSR matrix-vector product on this GPU, beside cuSPARSE and the spmv reference.

A CSR SpMV cannot avoid three costs: streaming the values, column indices and row pointers once,
gathering one x element per nonzero, and writing y once. The floor kernel below pays exactly
those and nothing else: program p streams the p-th chunk of nonzeros and gathers x at their
columns, sums its products into one number (no rows, no segments: its y is wrong), and streams
the p-th share of the row pointers into y. A correct kernel has all of these costs and the row
work on top, so the fastest floor configuration bounds what a speed target on these matrices
can ask. It is an empirical bound (the best of the configurations below), not a proof
(docs/PERFORMANCE.md, "What was shown out of reach"; measured 2026-11-24: cuSPARSE x 2.0 is
beyond it on every bench case, and 60% of the copy bandwidth on bench_power_law_wide in float16).

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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader.judge.checker import load_spec  # noqa: E402
from grader.kata.catalog import get_kata  # noqa: E402
from grader.timing.timer import held_median_ms, measure_ceilings  # noqa: E402

CASES = ("bench_power_law", "bench_power_law_wide")
DTYPES = (torch.float32, torch.float16)
# (nonzeros per program, warps): the floor is the fastest of these.
FLOOR_CONFIGS = ((512, 4), (1024, 4), (1024, 8), (2048, 8), (4096, 8), (256, 1))
ROW_BLOCKS = (128, 512)
ROUNDS = 3


@triton.jit
def floor_kernel(crow_ptr, col_ptr, val_ptr, x_ptr, y_ptr, nnz, R, rows_per_program,
                 NPP: tl.constexpr, ROW_BLOCK: tl.constexpr, GATHER: tl.constexpr = True):
    p = tl.program_id(0)
    s = p.to(tl.int64) * NPP
    k = s + tl.arange(0, NPP)
    # As the reference does: a full chunk loads without a mask, so its loads vectorise.
    if s + NPP <= nnz:
        v = tl.load(val_ptr + k, eviction_policy="evict_first")
        col = tl.load(col_ptr + k, eviction_policy="evict_first")
        xv = tl.load(x_ptr + col) if GATHER else col
    else:
        inside = k < nnz
        v = tl.load(val_ptr + k, mask=inside, other=0.0, eviction_policy="evict_first")
        col = tl.load(col_ptr + k, mask=inside, other=0, eviction_policy="evict_first")
        xv = tl.load(x_ptr + col, mask=inside, other=0.0) if GATHER else col
    total = tl.sum(v.to(tl.float32) * xv.to(tl.float32), 0)
    # This program's share of the row pointers (a multiple of ROW_BLOCK rows), streamed into y
    # (kept live by the store); unmasked but for the last share.
    r0 = p.to(tl.int64) * rows_per_program
    for rb in range(r0, r0 + rows_per_program, ROW_BLOCK):
        rows = rb + tl.arange(0, ROW_BLOCK)
        if rb + ROW_BLOCK <= R:
            start = tl.load(crow_ptr + rows, eviction_policy="evict_first")
            tl.store(y_ptr + rows, (start.to(tl.float32) * 1e-30 + total).to(y_ptr.dtype.element_ty))
        else:
            start = tl.load(crow_ptr + rows, mask=rows < R, other=0, eviction_policy="evict_first")
            tl.store(y_ptr + rows, (start.to(tl.float32) * 1e-30 + total).to(y_ptr.dtype.element_ty),
                     mask=rows < R)


def floor_spmv(crow, col, values, x, npp: int, warps: int, row_block: int = 256,
               gather: bool = True) -> torch.Tensor:
    R, nnz = crow.numel() - 1, values.numel()
    programs = max(1, triton.cdiv(nnz, npp))
    rows_per_program = triton.cdiv(triton.cdiv(R, programs), row_block) * row_block
    programs = max(programs, triton.cdiv(R, rows_per_program))
    y = torch.empty(R, dtype=values.dtype, device=values.device)
    floor_kernel[(programs,)](crow, col, values, x, y, nnz, R, rows_per_program, NPP=npp,
                              ROW_BLOCK=row_block, GATHER=gather, num_warps=warps, num_stages=1)
    return y


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = parser.parse_args()

    kata = get_kata("spmv")
    task = next(t for t in kata.tasks if t.name == "spmv")
    spec = load_spec(kata)
    reference = _load("spmv_reference", kata.reference_path)
    ceilings = measure_ceilings()
    copy_gbps = ceilings["copy_gbps"]

    calls = {"cusparse": spec.baseline, "reference": reference.spmv}
    for npp, warps in FLOOR_CONFIGS:
        for row_block in ROW_BLOCKS:
            calls[f"floor npp={npp} warps={warps} rows={row_block}"] = (
                lambda *a, npp=npp, warps=warps, rb=row_block: floor_spmv(*a, npp=npp, warps=warps,
                                                                          row_block=rb))
    # Context, not a floor: the streams alone, x replaced by the column index (no gather).
    calls["streams only (no x gather)"] = lambda *a: floor_spmv(*a, npp=1024, warps=8,
                                                                row_block=512, gather=False)

    rows = []
    for name in CASES:
        case = task.case(name)
        for dtype in DTYPES:
            gen = torch.Generator(device="cuda")
            gen.manual_seed(0)
            inputs = spec.make_inputs(dict(case.params), dtype, "cuda", gen)
            operands = (inputs["crow_indices"], inputs["col_indices"], inputs["values"], inputs["x"])
            times = {label: [] for label in calls}
            for _ in range(ROUNDS):
                for label, fn in calls.items():
                    times[label].append(held_median_ms(lambda: fn(*operands), rep_ms=60) * 1e3)
            nbytes, _ = task.cost(case, itemsize=dtype.itemsize)  # the kata's counted bytes
            medians = {label: statistics.median(ts) for label, ts in times.items()}
            floor_label = min((label for label in medians if label.startswith("floor ")),
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
        print(f"{r['case']:22s} {r['dtype']:8s} {r['call']:34s} {r['us']:8.1f} us "
              f"{r['vs_cusparse']:5.2f}x cuSPARSE {r['pct_copy']:5.1f}% of copy{mark}")
    if args.out:
        args.out.write_text(json.dumps({
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="minutes"),
            "device": ceilings["device"], "torch": torch.__version__, "triton": triton.__version__,
            "copy_gbps": copy_gbps, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
