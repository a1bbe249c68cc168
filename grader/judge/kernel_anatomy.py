"""The parent's reading of a timed case's anatomy (grader.timing.anatomy, in the worker), and the
speed advice it gives.

The worker shares its process with the submission, so nothing in the anatomy is believed: every
field is checked for type and range, and anything else is dropped (garbage never crashes the
parent and never changes a verdict: the anatomy is advice). From what is left the parent works
out each kernel's share of the call's GPU time, its rates (the kata's declared cost split by
time share: per kernel, the call's bytes and FLOPs over its kernels' GPU time) and its
theoretical occupancy (registers, shared memory and warps against the device's limits).
"""

from __future__ import annotations

import math
import os
import re
import shutil
from pathlib import Path
from typing import Any

# An H100/H200 (sm_90), for limits the worker's torch did not give.
SM90 = {"sm_count": 132, "regs_per_sm": 65536, "max_threads_per_sm": 2048,
        "shared_per_sm": 233472, "shared_per_block": 232448, "warp_size": 32}
FALLBACK = {"9.0": SM90}
MAX_BLOCKS_PER_SM = 32
REG_UNIT = 256  # registers are allocated per warp in units of this many
SHARED_RESERVED = 1024  # bytes the driver keeps per block (sm_80 and later)
MAX_KERNELS = 16
_NAME = re.compile(r"[^A-Za-z0-9_.:<>,()\[\] *&+-]")

# The thresholds of the advice below (docs/SCORING.md, "Speed advice").
SLOWER_THAN_BASELINE = 1.0  # only cases below this speedup get the anatomy's advice
DOMINANT_MIN_MS = 0.02  # a kernel shorter than this is launch overhead, whatever its grid
LOW_OCCUPANCY = 0.25
LOW_BANDWIDTH = 0.5  # of the copy ceiling
LAUNCH_BOUND = 0.5  # kernels busy for less than this share of the timed call's time
LAUNCH_GAP_MS = 0.01
SPILL_SHARE = 0.2


def _int(value, low: int = 0, high: int = 2 ** 40) -> int | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
    return value if ok else None


def _float(value, low: float = 0.0, high: float = 1e15) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok and low <= value <= high else None


PROFILERS = ("proton", "kineto")  # grader.timing.anatomy: whose GPU times these are


def _name(value) -> str | None:
    return _NAME.sub("?", value[:160]) if isinstance(value, str) and value else None


def sanitize(raw) -> dict | None:
    """The worker's anatomy in the form it writes it, every field typed and bounded; None for
    anything that is not a dict. Unknown or mistyped fields are dropped, never fatal."""
    if not isinstance(raw, dict):
        return None
    if "error" in raw:
        return {"error": str(raw["error"])[:300]}
    if "skipped" in raw:  # a call too slow to profile within the timing's limit
        return {"skipped": str(raw["skipped"])[:300]}
    kernels = []
    for k in raw.get("kernels") if isinstance(raw.get("kernels"), list) else []:
        if not isinstance(k, dict) or _name(k.get("name")) is None:
            continue
        grid = k.get("grid")
        grid = [_int(g, 0, 2 ** 31) for g in grid] if isinstance(grid, list) and len(grid) == 3 else None
        kernels.append({
            "name": _name(k["name"]),
            "source": k.get("source") if k.get("source") in ("triton", "kernel", "gpu_memcpy",
                                                              "gpu_memset", "other") else "other",
            "launches": _int(k.get("launches"), 0, 10 ** 6) or 0,
            "grid": grid if grid and None not in grid else None,
            "num_warps": _int(k.get("num_warps"), 1, 64),
            "num_stages": _int(k.get("num_stages"), 0, 64),
            "registers": _int(k.get("registers"), 0, 65536),
            "spills": _int(k.get("spills"), 0, 10 ** 6),
            "shared_bytes": _int(k.get("shared_bytes"), 0, 1 << 24),
            "atomics": _int(k.get("atomics"), 0, 10 ** 6),
            "gpu_us": _float(k.get("gpu_us"), 0, 1e10) or 0.0,
        })
        if len(kernels) == MAX_KERNELS:
            break
    device = raw.get("device") if isinstance(raw.get("device"), dict) else {}
    limits = {key: _int(device.get(key), 1, 1 << 30) for key in SM90}
    capability = device.get("capability")
    return {"kernels": kernels,
            "profiler": raw.get("profiler") if raw.get("profiler") in PROFILERS else None,
            "gpu_busy_us": _float(raw.get("gpu_busy_us"), 0, 1e10),
            "call_us": _float(raw.get("call_us"), 0, 1e12),
            "device": dict({k: v for k, v in limits.items() if v is not None},
                           capability=capability if isinstance(capability, str) and len(capability) < 8 else None),
            "files": {k: v for k, v in (raw.get("files") or {}).items()
                      if k in ("trace", "ttir", "ptx") and isinstance(v, str)}
            if isinstance(raw.get("files"), dict) else {}}


def device_limits(device: dict) -> dict:
    """The worker's limits, the gaps filled from the table of the device's compute capability."""
    table = FALLBACK.get(device.get("capability") or "", SM90)
    return {key: device.get(key) or table[key] for key in SM90}


def occupancy(num_warps: int | None, registers: int | None, shared_bytes: int | None,
              limits: dict) -> float | None:
    """Theoretical occupancy: resident warps per SM over the SM's most, as CUDA's occupancy
    calculator works it out from warps, registers per thread and shared memory per block."""
    if not num_warps:
        return None
    warp = limits["warp_size"]
    max_warps = limits["max_threads_per_sm"] // warp
    blocks = [MAX_BLOCKS_PER_SM, max_warps // num_warps]
    if registers:
        per_warp = math.ceil(registers * warp / REG_UNIT) * REG_UNIT
        blocks.append((limits["regs_per_sm"] // per_warp) // num_warps)
    if shared_bytes:
        if shared_bytes > limits["shared_per_block"]:
            return 0.0
        blocks.append(limits["shared_per_sm"] // (shared_bytes + SHARED_RESERVED))
    return min(blocks) * num_warps / max_warps


def attach(case, raw, ceilings: dict | None, mode: str, copied: dict | None = None) -> None:
    """case.kernels and case.anatomy from the worker's raw anatomy (sanitized here). copied:
    `--profile`'s files, name -> where the parent copied them (copy_files); the anatomy's file
    names become those paths, and a name not copied is dropped."""
    case.kernels, case.anatomy = None, None
    if mode != "gpu":
        return
    if not case.timed:
        return
    found = sanitize(raw)
    if found is None:
        case.anatomy = {"note": "no anatomy was reported for this case"}
        return
    if "error" in found:
        case.anatomy = {"note": f"the profiled call failed: {found['error']}"}
        return
    if "skipped" in found:
        case.anatomy = {"note": found["skipped"]}
        return
    limits = device_limits(found["device"])
    total_us = sum(k["gpu_us"] for k in found["kernels"])
    busy_us = found["gpu_busy_us"] if found["gpu_busy_us"] is not None else total_us
    copy_gbps = _float((ceilings or {}).get("copy_gbps"), 1e-3)
    matmul_tflops = _float((ceilings or {}).get("matmul_tflops"), 1e-6)
    gbps = case.nbytes / (busy_us * 1e3) if case.nbytes and busy_us else None
    tflops = case.flops / (busy_us * 1e6) if case.flops and busy_us else None
    memory_bound = None
    if case.nbytes and copy_gbps and matmul_tflops:
        intensity = (case.flops or 0) / case.nbytes
        memory_bound = intensity < matmul_tflops * 1e3 / copy_gbps
    kernels = []
    for k in found["kernels"]:
        share = k["gpu_us"] / total_us if total_us else None
        grid = k["grid"]
        kernels.append(dict(
            k, gpu_ms=k["gpu_us"] / 1e3, share=share,
            programs=grid[0] * grid[1] * grid[2] if grid else None,
            # The kata's cost split by time share: the call's rate over its kernels' GPU time.
            gbps=gbps if share else None, tflops=tflops if share else None,
            occupancy=occupancy(k["num_warps"], k["registers"], k["shared_bytes"], limits)))
        del kernels[-1]["gpu_us"]
    case.kernels = sorted(kernels, key=lambda k: -k["gpu_ms"])  # longest first, whatever was sent
    case.anatomy = {"gpu_busy_ms": busy_us / 1e3, "call_ms": (found["call_us"] or 0) / 1e3 or None,
                    "gbps": gbps, "tflops": tflops, "copy_gbps": copy_gbps,
                    "matmul_tflops": matmul_tflops, "memory_bound": memory_bound,
                    "sm_count": limits["sm_count"], "profiler": found.get("profiler"),
                    "files": {kind: copied[name] for kind, name in found["files"].items()
                              if copied and name in copied}}


_PROFILE_FILE = re.compile(r"[A-Za-z0-9_.-]{1,200}\.(?:trace\.json|ttir|ptx)")
MAX_PROFILE_FILES, MAX_PROFILE_BYTES = 256, 256 << 20


# A line of Kineto's own log (the anatomy's profiler, in the worker's process): "USDT:2026-11-29
# 02:09:40 25897:25897 SyncActivityProfilerHandler.cpp:52] profiler_start". Recent torch writes
# these to stderr whatever KINETO_LOG_LEVEL says; they are the grader's, not the submission's.
_PROFILER_LINE = re.compile(r"^(?:USDT|STAGE|INFO|WARNING|ERROR):\d{4}-\d\d-\d\d \d\d:\d\d:\d\d "
                            r"\d+:\d+ \w+\.(?:cpp|h):\d+\] .*$\n?", re.M)


def without_profiler_lines(output: str) -> str:
    """The submission's output without the log lines the anatomy's profiler wrote into it."""
    return _PROFILER_LINE.sub("", output)


def copy_files(source: Path, destination: Path | None) -> dict[str, str]:
    """`kata grade --profile DIR`: the files the worker wrote in its grade folder, copied to DIR;
    name -> the copy's path. Only plain files of the names the worker writes, never a link
    (the submission shares the worker's process and could plant one), within a size budget."""
    if destination is None or not source.is_dir():
        return {}
    copied, total = {}, 0
    try:
        entries = sorted(os.scandir(source), key=lambda e: e.name)[:MAX_PROFILE_FILES]
    except OSError:
        return {}
    for entry in entries:
        try:
            if not _PROFILE_FILE.fullmatch(entry.name) or not entry.is_file(follow_symlinks=False):
                continue
            size = entry.stat(follow_symlinks=False).st_size
            if total + size > MAX_PROFILE_BYTES:
                break
            Path(destination).mkdir(parents=True, exist_ok=True)
            target = Path(destination) / entry.name
            with open(entry.path, "rb", opener=lambda p, f: os.open(p, f | os.O_NOFOLLOW)) as src, \
                    open(target, "wb") as dst:
                shutil.copyfileobj(src, dst)
            copied[entry.name], total = str(target.resolve()), total + size
        except OSError:
            continue
    return copied


def dominant(case) -> dict | None:
    """The kernel with the most GPU time in the case's profiled call."""
    timed = [k for k in case.kernels or [] if k.get("share")]
    return max(timed, key=lambda k: k["share"]) if timed else None


# ---- advice -------------------------------------------------------------------------------------

ADVICE = {
    "small_grid": "the kernel that takes the time runs fewer programs than the GPU has SMs, so the "
                  "rest of the GPU idles. Size the grid from the problem, e.g. triton.cdiv(n, BLOCK) "
                  "programs for n elements; a persistent kernel runs one program per SM "
                  "(torch.cuda.get_device_properties(0).multi_processor_count) and loops over its tiles",
    "register_spills": "registers spilled to local memory (slow, through the caches): use smaller "
                       "blocks (BLOCK, or BLOCK_M/BLOCK_N/BLOCK_K), fewer live values per thread, "
                       "or more warps (num_warps) to spread the work",
    "low_occupancy": "few warps can be resident per SM, so memory latency is not hidden: fewer "
                     "registers or less shared memory per program (smaller blocks, fewer "
                     "num_stages), or more warps per program",
    "launch_bound": "the GPU is idle for most of the call: the time goes to launching kernels, "
                    "host work or waits between them, not to the kernels. Launch fewer kernels "
                    "(fuse them), move host-side Python (allocations, .item(), loops) out of the call",
    "low_bandwidth": "a memory-bound kata should run near the copy bandwidth. Typical causes: "
                     "uncoalesced or strided access (neighbouring lanes must read neighbouring "
                     "addresses: put the contiguous dimension last in tl.arange), blocks too small "
                     "to keep enough bytes in flight (BLOCK of 1024 elements or more), reading the "
                     "same data twice, or masks that disable most lanes",
    "atomics_contention": "the kernel that takes the time uses atomics, and many programs update "
                          "the same addresses: accumulate in registers and write once per program, "
                          "combine equal indices within a block first, or give each program its own "
                          "slice and reduce afterwards",
}
ORDER = ("small_grid", "launch_bound", "atomics_contention", "register_spills", "low_occupancy",
         "low_bandwidth")


def _ms(value: float) -> str:
    return f"{value * 1e3:.3g} us" if value < 1 else f"{value:.3g} ms"


def findings(case) -> dict[str, str]:
    """code -> what was seen, for one timed case with an anatomy (empty for a fast case)."""
    anatomy = getattr(case, "anatomy", None) or {}
    speedup = getattr(case, "speedup", None)
    if not getattr(case, "kernels", None) or speedup is None or speedup >= SLOWER_THAN_BASELINE:
        return {}
    found = {}
    top = dominant(case)
    sms = anatomy.get("sm_count")
    if top and top["programs"] is not None and sms and top["programs"] < sms \
            and top["gpu_ms"] >= DOMINANT_MIN_MS:
        found["small_grid"] = (f"{top['programs']} programs on {sms} SMs: {sms - top['programs']} SMs "
                               f"idle ({top['name']}, {top['share']:.0%} of the GPU time, case {case.name})")
    busy, timed = anatomy.get("gpu_busy_ms"), case.time_ms
    if busy is not None and timed and busy < LAUNCH_BOUND * timed and timed - busy >= LAUNCH_GAP_MS:
        found["launch_bound"] = (f"the kernels were busy {_ms(busy)} of a {_ms(timed)} call "
                                 f"({busy / timed:.0%}, case {case.name})")
    if top and top.get("atomics") and top["share"] >= 0.5:
        found["atomics_contention"] = (f"{top['name']} has {top['atomics']} atomic operation(s) and "
                                       f"takes {top['share']:.0%} of the GPU time (case {case.name})")
    spilling = [k for k in case.kernels if k.get("spills") and (k.get("share") or 0) >= SPILL_SHARE]
    if spilling:
        k = spilling[0]
        found["register_spills"] = (f"{k['name']} spills {k['spills']} register(s) per thread "
                                    f"({k['registers']} used, case {case.name})")
    slow_memory = anatomy.get("memory_bound") and anatomy.get("gbps") is not None \
        and anatomy.get("copy_gbps") and anatomy["gbps"] < LOW_BANDWIDTH * anatomy["copy_gbps"]
    if slow_memory and top and top.get("occupancy") is not None and top["occupancy"] < LOW_OCCUPANCY:
        known = [f"{top['num_warps']} warps"] + (
            [f"{top['registers']} registers per thread"] if top.get("registers") is not None else []) + (
            [f"{top['shared_bytes']} bytes of shared memory"] if top.get("shared_bytes") else [])
        found["low_occupancy"] = (f"{top['name']}: {top['occupancy']:.0%} theoretical occupancy "
                                  f"({', '.join(known)}; case {case.name})")
    if slow_memory:
        found["low_bandwidth"] = (f"{anatomy['gbps']:.0f} GB/s over the kernels' time, "
                                  f"{anatomy['gbps'] / anatomy['copy_gbps']:.0%} of the copy ceiling "
                                  f"of {anatomy['copy_gbps']:.0f} GB/s (case {case.name})")
    return found


def advice(cases) -> list[dict[str, Any]]:
    """The anatomy's advice, once per code, in the shape of grader.judge.failure_codes's."""
    seen: dict[str, list] = {}
    for case in cases:
        for code, message in findings(case).items():
            seen.setdefault(code, []).append((case, message))
    out = []
    for code in ORDER:
        if code in seen:
            first, message = seen[code][0]
            out.append({"code": code, "count": len(seen[code]),
                        "first_case": f"{first.task}/{first.name}/{first.dtype}",
                        "message": message, "advice": ADVICE[code]})
    return out
