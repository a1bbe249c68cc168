"""A GPU grade with a recorded anatomy on every timed case, as the runner would make it: what the
report, plot and browser tests draw (no GPU needed)."""

from __future__ import annotations

from grade_factory import make_grade
from grader.judge import kernel_anatomy

H200 = {"sm_count": 132, "regs_per_sm": 65536, "max_threads_per_sm": 2048, "shared_per_sm": 233472,
        "shared_per_block": 232448, "warp_size": 32, "capability": "9.0"}
CEILINGS = {"copy_gbps": 4000.0, "matmul_tflops": 700.0}


def recorded(programs: int, gpu_us: float, name: str = "add_kernel") -> dict:
    """The worker's anatomy of one call (grader.timing.anatomy.assemble's form)."""
    return {"kernels": [
        {"name": name, "source": "triton", "launches": 1, "grid": [programs, 1, 1], "num_warps": 4,
         "num_stages": 3, "registers": 26, "spills": 0, "shared_bytes": 0, "atomics": 0, "gpu_us": gpu_us},
        {"name": "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>",
         "source": "kernel", "launches": 1, "grid": None, "gpu_us": 2.0}],
        "kernel_groups": 2, "gpu_busy_us": gpu_us + 2.0, "call_us": gpu_us + 40.0, "device": H200}


def anatomy_grade(kata: str = "vector_add", *, speedup: float = 0.05, programs: int = 8, flops: bool = True,
                  files: dict | None = None, copied: dict | None = None):
    """A slow, correct GPU grade of `kata` whose timed cases each carry an anatomy."""
    result = make_grade(kata, speedup=speedup, roofline=0.03, device="NVIDIA H200", cases=3)
    result.environment["ceilings"] = dict(CEILINGS)
    for i, case in enumerate(c for c in result.cases if c.timed):
        n = 1 << (20 + 2 * i)
        case.nbytes, case.flops = 12.0 * n, (float(n) if flops else None)
        case.time_ms = case.nbytes / (CEILINGS["copy_gbps"] * 1e6) / 0.03
        case.baseline_ms = case.time_ms * speedup
        raw = recorded(programs, case.time_ms * 1e3 * 0.95)
        if files:
            raw["files"] = files
        kernel_anatomy.attach(case, raw, CEILINGS, "gpu", copied)
    result.advice = kernel_anatomy.advice(result.cases)
    return result
