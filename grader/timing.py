"""GPU timing (in the worker): triton.testing.do_bench medians and the device's ceilings."""

from __future__ import annotations

import itertools
import statistics

import torch
import triton.testing

ROUNDS = 3  # submission and baseline alternate this many times; the median round counts


def median_ms(fn) -> float:
    # do_bench flushes the L2 before every timed call, excludes its warm-up, and times with events.
    return float(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"))


def rotating(fn, input_sets: list[tuple]):
    """A callable that feeds fn a different input set on each call, so no call can replay the last."""
    cycle = itertools.cycle(input_sets)
    return lambda: fn(*next(cycle))


def time_pair(submission, baseline, input_sets: list[tuple]) -> tuple[float, float]:
    """Median times (ms) of submission and baseline, interleaved in the same run."""
    sub_times, base_times = [], []
    for _ in range(ROUNDS):
        sub_times.append(median_ms(rotating(submission, input_sets)))
        base_times.append(median_ms(rotating(baseline, input_sets)))
    return statistics.median(sub_times), statistics.median(base_times)


def floor_ms(nbytes: float | None, flops: float | None, ceilings: dict) -> float | None:
    """The roofline time: the larger of bytes over copy bandwidth and FLOPs over matmul rate."""
    floors = []
    if nbytes:
        floors.append(nbytes / (ceilings["copy_gbps"] * 1e9) * 1e3)
    if flops:
        floors.append(flops / (ceilings["matmul_tflops"] * 1e12) * 1e3)
    return max(floors) if floors else None


def _copy_gbps(n: int = 1 << 28) -> float:
    # 1 GiB of float32: far larger than any L2. Bytes read + bytes written.
    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    return 2 * n * 4 / (median_ms(lambda: dst.copy_(src)) * 1e-3) / 1e9


def _matmul_tflops(m: int = 8192) -> float:
    a = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    return 2 * m**3 / (median_ms(lambda: a @ b) * 1e-3) / 1e12


def measure_ceilings() -> dict:
    """Device-to-device copy bandwidth and dense bf16 matmul rate, measured here and now."""
    props = torch.cuda.get_device_properties(0)
    ceilings = {"device": props.name, "copy_gbps": _copy_gbps(), "matmul_tflops": _matmul_tflops(),
                "l2_bytes": getattr(props, "L2_cache_size", None)}
    torch.cuda.empty_cache()  # the buffers above are freed on return; give the memory back
    return ceilings
