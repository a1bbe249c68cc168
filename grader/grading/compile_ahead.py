"""Compile ahead: helper workers that run a GPU grade's later checked cases early, so that their
kernels are in Triton's cache by the time the grade's own worker reaches them.

A cold GPU grade is compile-bound: the worker runs its checked cases one after another, and each
new shape, dtype or flag compiles a kernel variant, 1-3 s each (docs/PERFORMANCE.md: 36 of
flash_attention's 60 s of checked cases). Triton's cache is on disk and shared between processes,
so helpers that run later cases at the same time compile them in parallel, and the worker loads
what they compiled.

Why a helper cannot change a verdict:
- It is a worker like the grade's own (the same sandbox, the same watchdog limits), started with
  `warm_up`: it measures nothing and runs no baseline, and nothing it reports, prints or returns
  is read.
- It draws its inputs from a seed of its own, so nothing it computes is of use to the grade's
  worker (outputs a submission stashed for the worker to find would be the wrong ones).
- It runs only small cases (bytes moved, from the kata's cost expression, under CASE_BYTES) with
  a small share of GPU memory, and only where the kata's declared peak leaves the GPU room for
  it (room_for): adamw's and cross_entropy's grades need nearly all of an 80 GB GPU.
- It is stopped as soon as the grade's worker catches up with it, before timing (which needs
  the GPU alone), and when the grade ends.

Helpers start only once one of the worker's checked cases has run for START_AFTER_S: a case
that slow is most likely compiling. When Triton's cache already holds the kernels (the same code
graded again), small cases take milliseconds and no helper starts, so a warm grade does not pay
for them (started at once, two helpers cost a warm softmax grade 0.7 s of 6.2, and cold grades
lose about that first second: docs/PERFORMANCE.md).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import threading
import time
from pathlib import Path

from grader.grading.plan import build_plan
from grader.kata.format import Kata
from grader.sandbox import watchdog

ENV_SWITCH = "KATA_COMPILE_AHEAD"  # the number of helpers, or "auto"; 0 turns them off
# "auto" is the rule of helper_count. Measured on an H100 (benchmarks/cold_grade_time.sh,
# docs/PERFORMANCE.md): cold grades 22-45% shorter, every bench case's speedup unchanged.
DEFAULT = "auto"
MAX_HELPERS = 2
CORES_PER_HELPER = 4  # a compile takes a core; the worker and the checker need theirs
GPU_MEMORY_FRACTION = 0.04
CASE_BYTES = 256 << 20  # bytes moved by a case a helper may run
KATA_BYTES = 4 << 30  # a kata without a declared peak: its largest case's bytes moved, at most
HELPER_CONTEXT_BYTES = 600 << 20  # a CUDA context and Triton's own buffers
SPARE = 0.9  # the share of the GPU the grade and its helpers may plan on
HELPER_POLL_S = 0.2  # a helper's watchdog reads /proc less often than the worker's
# A helper case running longer than this is stopped: compiling a variant takes seconds, and a
# hang (a loop that never ends) would only take GPU time from the grade's worker.
HELPER_CASE_S = 30.0
# A checked case running longer than this is compiling (warm, a small case takes milliseconds):
# the helpers start then, and only then.
START_AFTER_S = 1.0
# Stopping a helper runs in the referee's thread, which the worker waits on: wait less for its
# tree to freeze than the grade's own end does (the kill follows either way).
HELPER_FREEZE_S = 0.5
_WIDE_DTYPES = ("float64", "int64", "complex64", "complex128")


def helper_count(mode: str, shared_gpu: bool) -> int:
    """How many helpers a grade starts, from KATA_COMPILE_AHEAD: a number, or `auto`: none under
    the interpreter (nothing compiles), else one per CORES_PER_HELPER cores beyond the first
    CORES_PER_HELPER, up to MAX_HELPERS. Unset: DEFAULT. None, whatever the setting, when
    grades share the GPU (selftest, batch): they take turns on it so that one grade's timing
    never runs beside another's cases, and helpers take no turns."""
    if shared_gpu:
        return 0
    setting = os.environ.get(ENV_SWITCH, DEFAULT).strip().lower()
    if setting != "auto":
        try:
            return max(0, min(8, int(setting)))
        except ValueError:
            return 0
    if mode != "gpu":
        return 0
    return max(0, min(MAX_HELPERS, (os.cpu_count() or 1) // CORES_PER_HELPER - 1))


def _case_bytes(kata: Kata, planned: dict) -> float | None:
    task = next(t for t in kata.tasks if t.name == planned["task"])
    if not task.cost_bytes:
        return None
    itemsize = 8 if planned["dtype"] in _WIDE_DTYPES else 4  # an upper bound for the rest
    try:
        return float(task.cost(task.case(planned["case"]), itemsize)[0])
    except Exception:  # noqa: BLE001 - an expression that needs what this case lacks: unknown
        return None


def room_for(kata: Kata, count: int, total_bytes: int | None) -> bool:
    """Does this GPU hold the kata's grade and `count` helpers beside it? By the kata's declared
    peak (kata.yaml `gpu_memory_gib`) where there is one, with a tenth of the GPU to spare; else
    by its largest case's bytes moved (a rougher proxy: gather_scatter moves 1 GiB and peaks at
    29)."""
    if kata.gpu_memory_gib and total_bytes:
        helpers = count * (GPU_MEMORY_FRACTION * total_bytes + HELPER_CONTEXT_BYTES)
        return kata.gpu_memory_gib * watchdog.GIB + helpers <= SPARE * total_bytes
    sizes = [_case_bytes(kata, p.to_dict()) for p in build_plan(kata, "gpu") if not p.skip_reason]
    return all(size is not None and size <= KATA_BYTES for size in sizes)


def shares(kata: Kata, plan: list[dict], count: int, total_bytes: int | None = None) -> list[list[dict]]:
    """The cases each helper runs, in plan order: the small checked cases cut into count + 1
    runs of equal length. The grade's worker compiles the first run itself while helper i runs
    run i + 1. None where the GPU has no room for helpers beside the grade (room_for)."""
    runnable = [p for p in plan if not p.get("skip_reason")]
    if count <= 0 or not runnable or not room_for(kata, count, total_bytes):
        return []
    small = [p for p in runnable if not p["bench"] and (_case_bytes(kata, p) or KATA_BYTES) <= CASE_BYTES]
    cuts = [round(i * len(small) / (count + 1)) for i in range(count + 2)]
    return [run for run in (small[cuts[i]:cuts[i + 1]] for i in range(1, count + 1)) if run]


class _Helper:
    def __init__(self, index: int, run: list[dict]):
        self.index, self.run = index, run
        self.keys = {p["key"] for p in run}
        self.proc = None
        self.line: socket.socket | None = None  # our end of its line to the grader
        self.seen: dict[int, int] = {}
        self.ran: set[str] = set()  # the cases it finished
        self.case_started: float | None = None  # when the case it runs now started
        self.stopped = False


class Helpers:
    """A grade's compile-ahead helpers. `case_started(key)` (the referee's hook) starts them once
    one of the worker's checked cases has run for `start_after_s` (default START_AFTER_S), and
    stops a helper once the worker has caught up with it (starts a case of its share that it
    has not finished); stop() ends them all. `timeline` (the referee's, for KATA_TRACE) gets
    (when, "ahead", key) for each case a helper finishes."""

    def __init__(self, runs: list[list[dict]], request: dict, grade_dir: Path,
                 limits: watchdog.ResourceLimits, launch, env_for, timeline: list | None = None,
                 start_after_s: float | None = None):
        self.helpers = [_Helper(i, run) for i, run in enumerate(runs)]
        self._request, self._grade_dir, self._limits = request, grade_dir, limits
        self._launch, self._env_for = launch, env_for
        self.timeline = timeline if timeline is not None else []
        self._start_after_s = START_AFTER_S if start_after_s is None else start_after_s
        self._lock = threading.Lock()
        self._started = False
        self._closed = False
        self._current: str | None = None  # the worker's case in flight
        self._timer: threading.Timer | None = None
        self._threads: list[threading.Thread] = []

    # -- the referee's hooks -----------------------------------------------------------------
    def case_started(self, key: str) -> None:
        with self._lock:
            self._current = key
            waiting = self.helpers and not self._started and not self._closed
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if waiting and self._start_after_s > 0:
                self._timer = threading.Timer(self._start_after_s, self._slow_case, args=(key,))
                self._timer.daemon = True
                self._timer.start()
            caught_up = [h for h in self.helpers if key in h.keys and key not in h.ran and not h.stopped]
        if waiting and self._start_after_s <= 0:
            self._slow_case(key)
        for helper in caught_up:  # from here on the helper would only compile beside the worker
            self._stop(helper)

    def stop(self) -> None:
        with self._lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
        for helper in self.helpers:
            self._stop(helper)
        for thread in self._threads:
            thread.join(timeout=30)

    def _slow_case(self, key: str) -> None:
        """The worker's case `key` has run for start_after_s: start the helpers whose share the
        worker has not reached (case_started has stopped the others)."""
        with self._lock:
            if self._started or self._closed or self._current != key:
                return
            self._started = True
        for helper in self.helpers:
            if helper.stopped:
                continue
            try:
                self._start(helper)
            except Exception as exc:  # noqa: BLE001 - a helper is an optimisation: never the grade's fault
                helper.stopped = True
                self.timeline.append((time.monotonic(), "ahead-failed", f"{type(exc).__name__}: {exc}"))

    # -- one helper ----------------------------------------------------------------------------
    def _start(self, helper: _Helper) -> None:
        folder = self._grade_dir / f"ahead{helper.index}"
        for sub in ("work", "tmp", "outputs"):
            (folder / sub).mkdir(parents=True, exist_ok=True)
        ours, theirs = socket.socketpair()
        request = dict(self._request, seed=secrets.randbits(32), plan=helper.run, warm_up=True,
                       results=str(folder / "events.jsonl"), grade_dir=str(folder),
                       outputs=str(folder / "outputs"), gpu_memory_fraction=GPU_MEMORY_FRACTION,
                       control_fd=theirs.fileno())
        request_path = folder / "request.json"
        request_path.write_text(json.dumps(request))
        output_path = folder / "output.txt"
        with self._lock:
            if self._closed or helper.stopped:
                ours.close()
                theirs.close()
                return
            try:
                with open(output_path, "wb") as output:
                    helper.proc = self._launch(request_path, folder / "work",
                                               self._env_for(folder / "tmp"), output, theirs)
            except BaseException:
                ours.close()
                raise
            finally:
                theirs.close()
            helper.line = ours
        for target in (lambda: self._answer(helper, ours), lambda: self._watch(helper, output_path)):
            thread = threading.Thread(target=target, daemon=True, name=f"kata-ahead{helper.index}")
            thread.start()
            self._threads.append(thread)

    def _answer(self, helper: _Helper, sock: socket.socket) -> None:
        """The helper's side of the grader's line: every case is fine, timing is never wanted."""
        reader, writer = sock.makefile("rb"), sock.makefile("wb")
        try:
            for line in reader:
                try:
                    request = json.loads(line)
                except ValueError:
                    request = {}
                op = request.get("op") if isinstance(request, dict) else None
                answer = {}
                if op == "start":
                    helper.case_started = time.monotonic()
                elif op == "case":
                    helper.case_started = None
                    helper.ran.add(str(request.get("key")))
                    self.timeline.append((time.monotonic(), "ahead", request.get("key")))
                    answer = {"ok": True, "stop": False, "skip_task": False}
                elif op == "time":
                    answer = {"time": False}
                writer.write((json.dumps(answer) + "\n").encode())
                writer.flush()
        except (OSError, ValueError):
            pass
        finally:
            sock.close()

    def _watch(self, helper: _Helper, output_path: Path) -> None:
        def overdue():
            started = helper.case_started
            if started is not None and time.monotonic() - started > HELPER_CASE_S:
                return watchdog.Breach("time", "a helper case ran too long")
            return None

        watchdog.watch(helper.proc, self._limits, output_path, helper.seen, extra=overdue,
                       poll_s=HELPER_POLL_S)
        self._stop(helper)

    def _stop(self, helper: _Helper) -> None:
        with self._lock:
            helper.stopped = True
            proc, line = helper.proc, helper.line
        if proc is None:
            return
        try:  # its answering thread stops reading now, whoever else holds the line's other end
            line.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        watchdog.freeze(helper.seen, timeout_s=HELPER_FREEZE_S)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        watchdog.kill_all(helper.seen)
        try:
            proc.wait(timeout=10)
        except Exception:  # noqa: BLE001 - killed above; a zombie is reaped by the warm start
            pass
