"""What one of the timing's input changes costs (grader/timing/perturb.py), on the GPU: host and
GPU time per change, and the peak extra memory, for a GEMM's operands, a large logits tensor and
one CUDA-graph replay's 64 small sets. Prints JSON; benchmarks/results/PERFORMANCE_LOG.md records
the figures.

    python benchmarks/timing_changes.py [OUT.json]
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the grader, installed or not
from grader.timing.perturb import Perturber, seeded_keys


def cost(sets: list, changes: int = 20) -> dict:
    perturb, keys = Perturber(), seeded_keys(1)
    # Two changes of each set before timing: the first draws no previous bits, the second does,
    # so every kernel both paths use is loaded (CUDA loads a kernel on its first use, tens of ms).
    for _ in range(2):
        for args in sets:
            perturb(args, keys())
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    began = time.perf_counter()
    start.record()
    for _ in range(changes):
        for args in sets:
            perturb(args, keys())
    host_ms = (time.perf_counter() - began) / changes * 1e3
    end.record()
    torch.cuda.synchronize()
    return {"host_ms": host_ms, "gpu_ms": start.elapsed_time(end) / changes,
            "peak_extra_mib": (torch.cuda.max_memory_allocated() - base) / 2**20}


def main() -> None:
    gen = torch.Generator(device="cuda").manual_seed(0)
    cases = {
        "matmul operands, 2 x 8192^2 bf16": lambda: [tuple(
            torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16, generator=gen) for _ in range(2))],
        "logits 8192 x 131072 bf16, int64 targets": lambda: [(
            torch.randn(8192, 131072, device="cuda", dtype=torch.bfloat16, generator=gen),
            torch.randint(0, 131072, (8192,), device="cuda", generator=gen))],
        "one graph replay: 64 sets of 2 x 65536 fp32": lambda: [tuple(
            torch.randn(65536, device="cuda", generator=gen) for _ in range(2)) for _ in range(64)],
    }
    figures = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    for name, make in cases.items():
        figures[name] = cost(make())
        torch.cuda.empty_cache()
    text = json.dumps(figures, indent=1)
    print(text)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as out:
            out.write(text + "\n")


if __name__ == "__main__":
    main()
