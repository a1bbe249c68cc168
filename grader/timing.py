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


def measure_ceilings() -> dict:
    """Device-to-device copy bandwidth and dense bf16 matmul rate, measured here and now."""
    props = torch.cuda.get_device_properties(0)
    n = 1 << 28  # 1 GiB of float32: far larger than any L2
    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    copy_ms = median_ms(lambda: dst.copy_(src))
    del src, dst
    m = 8192
    a = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    mm_ms = median_ms(lambda: a @ b)
    del a, b
    torch.cuda.empty_cache()
    return {
        "device": props.name,
        "copy_gbps": 2 * n * 4 / (copy_ms * 1e-3) / 1e9,  # bytes read + bytes written
        "matmul_tflops": 2 * m**3 / (mm_ms * 1e-3) / 1e12,
        "l2_bytes": getattr(props, "L2_cache_size", None),
    }
