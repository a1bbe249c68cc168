"""A timed case's anatomy (in the worker): one extra call of the submission, outside the timed
window, under a real profiler, with every Triton launch seen as it happens.

Per kernel of that call: its name, grid, num_warps and num_stages, registers, spills and shared
memory (Triton's compiled-kernel metadata), its launches and its GPU time (CUPTI's kernel
activity, whose kernel names are Triton's). The profiler is Triton's proton: its first session
in a process costs about 0.1 s on an H200, where PyTorch's profiler (Kineto) costs 3.5-5.9 s
(benchmarks/profiler_overhead_probe.py), which alone broke the anatomy's 2 s budget. Kineto is
the fallback where proton is missing or sees nothing, and `--profile` uses it for its Chrome
trace. The parent derives the rest (time shares, rates,
occupancy, advice: grader.judge.kernel_anatomy) and believes none of it: the anatomy is advice and
never changes a verdict, so a submission that forged it would gain nothing.

The GPU-only part is `profile_call`; what it gathers is turned into the report by pure functions
(`kernel_facts`, `gpu_events`, `assemble`), tested on the CPU with recorded profiler data.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import tempfile
import time
from pathlib import Path

from grader.timing.launchers import launcher_classes

MAX_KERNELS = 16  # kernel groups reported per case (the longest first)
MAX_LAUNCHES = 100_000  # launches of one kernel taken from a profile
FLUSH_BYTES = 256 << 20  # the L2 is flushed before the call, as before every timed call
_ATOMIC = re.compile(r"\btt\.atomic_(?:rmw|cas)\b")


def _number(value) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def kernel_facts(kernel, grid) -> dict:
    """What Triton's compiled kernel says of itself, tolerant of the attribute names of triton
    3.6 to 3.9 (n_regs and n_spills appear once the kernel is loaded; the metadata is a
    namedtuple with num_warps, num_stages and shared)."""
    metadata = getattr(kernel, "metadata", None)
    meta = (lambda key: metadata.get(key)) if isinstance(metadata, dict) else \
        (lambda key: getattr(metadata, key, None))
    name = getattr(kernel, "name", None) or meta("name")
    asm = getattr(kernel, "asm", None)
    ttir = None
    try:
        ttir = asm.get("ttir") if hasattr(asm, "get") else None
    except Exception:  # noqa: BLE001 - an odd asm dict costs only the atomics count
        ttir = None
    dims = None
    if grid is not None:
        given = list(grid if isinstance(grid, (tuple, list)) else (grid,))[:3]
        dims = [d if d is not None else 1 for d in map(_number, given)] + [1] * (3 - len(given))
    return {
        "name": str(name) if name else "a Triton kernel",
        "grid": dims,
        "num_warps": _number(meta("num_warps")),
        "num_stages": _number(meta("num_stages")),
        "registers": _number(getattr(kernel, "n_regs", None)),
        "spills": _number(getattr(kernel, "n_spills", None)),
        "shared_bytes": _number(meta("shared")),
        "atomics": len(_ATOMIC.findall(ttir)) if isinstance(ttir, str) else None,
    }


def gpu_events(kineto_events) -> list[dict]:
    """The GPU activity of a profile (torch.profiler's kineto_results.events()) as plain dicts
    {name, start_us, dur_us, kind}: kernels, copies and fills, in start order."""
    found = []
    for event in kineto_events:
        plain = event_dict(event)
        if plain is None or "CUDA" not in plain["device"].upper():
            continue
        if not any(word in plain["kind"] for word in ("kernel", "memcpy", "memset")):
            continue  # an annotation or a runtime call, not GPU work
        found.append({k: plain[k] for k in ("name", "start_us", "dur_us", "kind")})
    return sorted(found, key=lambda e: e["start_us"])


def event_dict(event) -> dict | None:
    """One Kineto event as {name, device, kind, start_us, dur_us}; None for another shape."""
    try:
        kind = str(event.activity_type()) if hasattr(event, "activity_type") else "kernel"
        if hasattr(event, "start_ns"):
            start, dur = event.start_ns() / 1e3, event.duration_ns() / 1e3
        else:
            start, dur = float(event.start_us()), float(event.duration_us())
        return {"name": str(event.name()), "device": str(event.device_type()), "kind": kind,
                "start_us": start, "dur_us": dur}
    except Exception:  # noqa: BLE001 - an event of another shape is left out, not fatal
        return None


def busy_us(events: list[dict]) -> float:
    """Microseconds the GPU was busy: the union of the events' intervals (streams may overlap)."""
    total, end = 0.0, None
    for e in sorted(events, key=lambda e: e["start_us"]):
        start, stop = e["start_us"], e["start_us"] + e["dur_us"]
        if end is None or start >= end:
            total += stop - start
            end = stop
        elif stop > end:
            total += stop - end
            end = stop
    return total


def assemble(launches: list[dict], events: list[dict], call_us: float, device: dict) -> dict:
    """The anatomy of one call: Triton launches (kernel_facts, in launch order) matched in order
    to the profiler's GPU events of the same name; alike launches grouped; other GPU work (a
    PyTorch fill, a copy) listed under its own name."""
    pending: dict[str, list[dict]] = {}
    for launch in launches:
        pending.setdefault(launch["name"], []).append(launch)
    groups: dict[tuple, dict] = {}
    for event in events:
        # Kineto names a Triton kernel as Triton does; a name with a suffix added still matches.
        queue = pending.get(event["name"]) or next(
            (q for name, q in pending.items() if q and event["name"].startswith(name)), None)
        facts = queue.pop(0) if queue else None
        if facts is None:
            facts = {"name": event["name"], "source": event.get("kind") or "other"}
        else:
            facts = dict(facts, source="triton")
        key = tuple(repr(facts.get(k)) for k in sorted(facts))
        group = groups.setdefault(key, dict(facts, launches=0, gpu_us=0.0))
        group["launches"] += 1
        group["gpu_us"] += event["dur_us"]
    # Triton launches the profiler did not see (it lost them): listed, with no time.
    for queue in pending.values():
        for facts in queue:
            key = tuple(repr(facts.get(k)) for k in sorted(dict(facts, source="triton")))
            group = groups.setdefault(key, dict(facts, source="triton", launches=0, gpu_us=0.0))
            group["launches"] += 1
    kernels = sorted(groups.values(), key=lambda g: -g["gpu_us"])
    return {"kernels": kernels[:MAX_KERNELS], "kernel_groups": len(kernels),
            "gpu_busy_us": busy_us(events), "call_us": call_us, "device": device}


def device_limits(props) -> dict:
    """The limits theoretical occupancy is worked out against, from torch's device properties
    (the names of recent torch; the parent falls back to a table for what is missing)."""
    names = {"sm_count": "multi_processor_count", "regs_per_sm": "regs_per_multiprocessor",
             "max_threads_per_sm": "max_threads_per_multi_processor",
             "shared_per_sm": "shared_memory_per_multiprocessor",
             "shared_per_block": "shared_memory_per_block_optin", "warp_size": "warp_size"}
    limits = {key: _number(getattr(props, attr, None)) for key, attr in names.items()}
    limits["capability"] = f"{getattr(props, 'major', '?')}.{getattr(props, 'minor', '?')}"
    return {k: v for k, v in limits.items() if v is not None}


@contextlib.contextmanager
def recording_launches():
    """Every Triton launch while in force, as (compiled kernel, grid), put back exactly as it was
    afterwards (grader.sandbox.launches checks its own wrappers are still there; they are,
    underneath these). JITFunction.run's launches are seen there, with their kernel; a compiled
    kernel launched without it (one from `.warmup()` launched as `kernel[grid](...)`, a library's
    own cache of compiled kernels) at the driver's launcher, with the kernel whose `run` it is."""
    from triton.runtime.jit import JITFunction

    current = JITFunction.run
    seen: list[tuple] = []
    inside = [0]  # JITFunction.run calls in progress: their launch is recorded there, once
    owners: dict[int, object] = {}  # id(launcher) -> the compiled kernel whose `run` it is

    def run(self, *args, **kwargs):
        if kwargs.get("warmup", False):
            return current(self, *args, **kwargs)
        box = {"grid": kwargs.get("grid")}
        if callable(box["grid"]):
            given = box["grid"]

            def grid(meta):
                box["grid"] = given(meta)
                return box["grid"]

            kwargs["grid"] = grid
        inside[0] += 1
        try:
            kernel = current(self, *args, **kwargs)
        finally:
            inside[0] -= 1
        seen.append((kernel, None if callable(box["grid"]) else box["grid"]))  # never evaluated: unknown
        return kernel

    def launching(original):
        def __call__(self, *args, **kwargs):
            if not inside[0]:  # (gridX, gridY, gridZ, stream, function, ...), positional in Triton
                seen.append((owners.get(id(self)), tuple(args[:3]) if len(args) >= 3 else None))
            return original(self, *args, **kwargs)
        return __call__

    put_back = [(JITFunction, "run", current)]
    JITFunction.run = run
    try:
        from triton.compiler.compiler import CompiledKernel

        prop = CompiledKernel.__dict__.get("run")
    except ImportError:
        prop = None
    if isinstance(prop, property):  # a launch takes the kernel's launcher from this property
        def launcher_of(kernel):
            launcher = prop.fget(kernel)
            owners[id(launcher)] = kernel
            return launcher

        put_back.append((CompiledKernel, "run", prop))
        CompiledKernel.run = property(launcher_of)
    for cls in launcher_classes():
        put_back.append((cls, "__call__", cls.__call__))
        cls.__call__ = launching(cls.__call__)
    try:
        yield seen
    finally:
        for owner, name, original in reversed(put_back):
            setattr(owner, name, original)


def fits(call_ms, elapsed_s: float, limit_s: float | None) -> bool:
    """Whether the profiled call fits in what is left of the case's timing limit (twice the call:
    the profiler's first session in a process may see nothing, and the call is made again), a
    quarter of the limit to spare. A slow kernel's timing is sized to fit its limit
    (grader.timing.sizing); the anatomy is advice and must not take it past: slow is not hung."""
    if limit_s is None or not isinstance(call_ms, (int, float)):
        return True
    return elapsed_s + 2 * call_ms / 1e3 <= 0.75 * limit_s


def not_profiled(call_ms: float, limit_s: float) -> dict:
    """The anatomy of a case whose call is too slow to profile within its timing limit."""
    return {"skipped": f"not profiled: one call takes {call_ms / 1e3:.3g} s, and one more would not "
                       f"fit in the timing's limit of {limit_s:.0f} s"}


def proton_events(database) -> list[dict]:
    """The GPU kernels of a proton profile (its hatchet tree: frames with metrics, the kernels the
    leaves) as the events `assemble` takes. Proton keeps a kernel's total time and launch count,
    not each launch's start: each launch gets the mean time, laid end to end."""
    root = database[0] if isinstance(database, list) and database else database
    found: list[dict] = []
    stack = [root] if isinstance(root, dict) else []
    while stack:
        node = stack.pop()
        children = [c for c in node.get("children") or [] if isinstance(c, dict)]
        stack.extend(reversed(children))
        name = (node.get("frame") or {}).get("name")
        metrics = node.get("metrics") or {}
        time_ns = next((v for k, v in metrics.items()
                        if k.startswith("time") and "ns" in k and not k.startswith("cpu")), None)
        if children or not isinstance(name, str) or name.startswith("__proton") \
                or not isinstance(time_ns, (int, float)) or time_ns <= 0:
            continue
        count = max(1, min(int(_number(metrics.get("count")) or 1), MAX_LAUNCHES))
        for _ in range(count):
            found.append({"name": name, "dur_us": time_ns / 1e3 / count, "kind": "kernel"})
    start = 0.0
    for event in found:
        event["start_us"] = start
        start += event["dur_us"]
    return found


def profile_call(fn, args, dump_dir: Path | None = None, label: str = "case") -> dict:
    """One call of fn(*args) profiled (GPU only). Never raises: a failure becomes {"error": ...}.
    dump_dir: also write the call's Chrome trace and the longest Triton kernel's IR and PTX there
    (inside the grade's folder: the parent copies them out); that takes PyTorch's profiler."""
    try:
        if dump_dir is None:
            found = _profile_with_proton(fn, args)
            if found is not None:
                return found
        return _profile_with_kineto(fn, args, dump_dir, label)
    except Exception as exc:  # noqa: BLE001 - advice only: a failure here never fails the case
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}


def _profile_with_proton(fn, args) -> dict | None:
    """The call under proton's CUPTI backend; None where proton cannot start, fails, or saw no
    kernel of a call that launched some (the caller then uses Kineto)."""
    try:
        import triton.profiler as proton
    except ImportError:
        return None
    folder = Path(tempfile.mkdtemp(prefix="kata-anatomy-"))  # TMPDIR: inside the grade's folder
    try:
        _flush_l2()
        with recording_launches() as seen:
            if proton.start(str(folder / "call"), backend="cupti") is None:
                return None
            try:
                call_us = _call_us(fn, args)
            finally:
                proton.finalize()
        written = next(folder.glob("call*"), None)
        events = proton_events(json.loads(written.read_text())) if written else []
        if not events and seen:
            return None
        return _anatomy(seen, events, call_us, "proton")
    except Exception:  # noqa: BLE001 - proton's own failure: Kineto is tried instead
        return None
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _profile_with_kineto(fn, args, dump_dir: Path | None, label: str) -> dict:
    """The call under PyTorch's profiler (Kineto): the CUDA activity, and the CPU's too for
    `--profile`'s Chrome trace."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CUDA] + ([ProfilerActivity.CPU] if dump_dir else [])
    for attempt in range(2):
        # The L2 flushed first, as before every timed call, and outside the profile: the
        # profile holds the call's GPU work alone.
        _flush_l2()
        with profile(activities=activities) as prof:
            with recording_launches() as seen:
                call_us = _call_us(fn, args)
        events = gpu_events(prof.profiler.kineto_results.events())
        if events or not seen:
            break  # else the profiler's first session in a process saw nothing: once more
    found = _anatomy(seen, events, call_us, "kineto")
    if dump_dir is not None:
        found["files"] = _dump(prof, seen, found, Path(dump_dir), label)
    return found


def _call_us(fn, args) -> float:
    """fn(*args) and the GPU's work it queued, in microseconds of wall time."""
    import torch

    started = time.perf_counter()
    fn(*args)
    torch.cuda.synchronize()
    return (time.perf_counter() - started) * 1e6


def _anatomy(seen: list[tuple], events: list[dict], call_us: float, profiler: str) -> dict:
    """The recorded launches' facts matched to the profiler's events (assemble), and whose
    events they are."""
    launches = [kernel_facts(kernel, grid) for kernel, grid in seen if kernel is not None]
    return dict(assemble(launches, events, call_us, _this_device()), profiler=profiler)


def _flush_l2() -> None:
    import torch

    torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda").zero_()
    torch.cuda.synchronize()


def _this_device() -> dict:
    import torch

    return device_limits(torch.cuda.get_device_properties(torch.cuda.current_device()))


def _dump(prof, seen, found: dict, folder: Path, label: str) -> dict:
    """The call's Chrome trace (opens in Perfetto), and the IR and PTX of the Triton kernel with
    the most GPU time; file names only (the parent copies them out and names where)."""
    folder.mkdir(parents=True, exist_ok=True)
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", label)[:80]
    files = {}
    trace = folder / f"{stem}.trace.json"
    prof.export_chrome_trace(str(trace))
    files["trace"] = trace.name
    top = next((k for k in found["kernels"] if k.get("source") == "triton"), None)
    kernel = next((k for k, _ in seen if k is not None and top and getattr(k, "name", None) == top["name"]), None)
    asm = getattr(kernel, "asm", None) or {}
    for kind in ("ttir", "ptx"):
        try:
            text = asm.get(kind) if hasattr(asm, "get") else None
        except Exception:  # noqa: BLE001
            text = None
        if isinstance(text, str):
            path = folder / f"{stem}.{top['name']}.{kind}"
            path.write_text(text)
            files[kind] = path.name
    return files
