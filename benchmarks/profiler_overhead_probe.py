"""What a profiling session costs a grade's worker, by profiler (issue 34: the anatomy's 2 s budget).

Run from the repository root on a lent GPU:

    python3 benchmarks/profiler_overhead_probe.py "$OUT"

Each profiler runs in a fresh process, as in a worker: CUDA started and one Triton kernel run,
then a first profiled call and a second. Measured: PyTorch's profiler (Kineto), Triton's proton
(CUPTI backend), CUPTI's own activity API through ctypes (the floor every CUPTI-based profiler
pays), and Kineto's first session started in a thread while the main thread works (whether its
cost can hide behind other work). Writes $OUT/profiler_probe.json.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

MODES = ("cupti", "proton", "kineto", "kineto_in_thread")


def _one(mode: str, out: Path) -> dict:
    import glob
    import os
    import threading

    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def add_one(x, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x + offs, tl.load(x + offs, mask=offs < n) + 1, mask=offs < n)

    x = torch.zeros(1 << 20, device="cuda")

    def call():
        add_one[(1024,)](x, x.numel(), BLOCK=1024)
        torch.cuda.synchronize()

    def busy(n=2000):  # the main thread's own GPU work
        started = time.perf_counter()
        for _ in range(n):
            x.mul_(1.0)
        torch.cuda.synchronize()
        return time.perf_counter() - started

    call()
    found: dict = {"mode": mode}
    if mode in ("kineto", "kineto_in_thread"):
        from torch.profiler import ProfilerActivity, profile

        def session():
            started = time.perf_counter()
            with profile(activities=[ProfilerActivity.CUDA]):
                call()
            return time.perf_counter() - started

        if mode == "kineto_in_thread":
            found["busy_alone_s"] = busy()
            box = {}
            thread = threading.Thread(target=lambda: box.update(first_s=session()))
            thread.start()
            found["busy_during_first_session_s"] = busy()
            thread.join()
            found.update(box)
        else:
            found["first_s"] = session()
        found["second_s"] = session()
    elif mode == "proton":
        import triton.profiler as proton

        for attempt in ("first_s", "second_s"):
            started = time.perf_counter()
            proton.start(str(out / f"proton-{attempt}"), backend="cupti")
            call()
            proton.finalize()
            found[attempt] = time.perf_counter() - started
    elif mode == "cupti":
        import ctypes

        base = os.path.join(os.path.dirname(torch.__file__), "..", "nvidia")
        lib = ctypes.CDLL((sorted(glob.glob(f"{base}/*/lib/libcupti.so*")) + ["libcupti.so"])[0])
        request_t = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t),
                                     ctypes.POINTER(ctypes.c_size_t))
        complete_t = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t,
                                      ctypes.c_size_t)
        buffers = []

        def request(buf, size, max_records):
            buffers.append(ctypes.create_string_buffer((8 << 20) + 8))
            buf[0], size[0], max_records[0] = ctypes.cast(buffers[-1], ctypes.c_void_p).value, 8 << 20, 0

        def complete(ctx, stream, buf, size, valid):
            found["record_bytes"] = valid

        callbacks = (request_t(request), complete_t(complete))
        for attempt in ("first_s", "second_s"):
            started = time.perf_counter()
            if attempt == "first_s":
                lib.cuptiActivityRegisterCallbacks(*callbacks)
            lib.cuptiActivityEnable(10)  # CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
            call()
            lib.cuptiActivityDisable(10)
            lib.cuptiActivityFlushAll(1)
            found[attempt] = time.perf_counter() - started
    return found


def main(out: Path) -> None:
    import torch
    import triton

    out.mkdir(parents=True, exist_ok=True)
    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
               "date": time.strftime("%Y-%m-%d"), "modes": {}}
    for mode in MODES:
        proc = subprocess.run([sys.executable, __file__, "--mode", mode, str(out)], capture_output=True,
                              text=True, timeout=120)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        results["modes"][mode] = json.loads(lines[-1]) if lines else {"error": proc.stderr[-1500:]}
        print(mode, json.dumps(results["modes"][mode]), flush=True)
    (out / "profiler_probe.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--mode":
        print(json.dumps(_one(sys.argv[2], Path(sys.argv[3]))))
    else:
        main(Path(sys.argv[1] if len(sys.argv) > 1 else "profiler-probe-out"))
