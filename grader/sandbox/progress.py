"""How far the worker's current case has got: a small record in a file the worker maps into its
memory and the parent reads at any moment, even while the worker is stuck.

The worker writes it as it goes (cheap: a few bytes per launch, per interpreted program):
Triton kernels launched, the checked call it is in, whether it waits for the GPU, the programs
of the current interpreted launch run out of its grid, and the time spent compiling and
autotuning. The parent reads it for two things only, so a submission that forges it (it shares
the worker's process) gains nothing a verdict rests on:

- the compile credit: a case's time limit is lengthened by the seconds its calls spent in
  Triton's compiler and autotuner, capped (COMPILE_CREDIT_CAP_S), and the whole grade's limit by
  the grade's, capped at the limit itself (GRADE_COMPILE_CREDIT_SHARE);
- when a limit fires, a sentence saying how far the call had got, so that a slow kernel (still
  running programs, still launching) is told from one that hangs (nothing new for seconds), and,
  when the whole grade's limit fires, how much of the grade went to compiling and autotuning.

The grade's report also shows those compile seconds (GradeResult.compile_s), as a figure only.
"""

from __future__ import annotations

import math
import mmap
import struct
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

# launches, programs started (this launch), grid programs (this launch), checked calls, stage;
# compile seconds done, compiling since, this launch's start, last launch or program start;
# the last kernel's name; compile seconds of the whole grade (the one field a new case keeps).
_FORMAT = "<5Q4d48sd"
SIZE = struct.calcsize(_FORMAT)
_LAUNCHES, _PROGRAMS, _GRID, _CALLS, _STAGE = (i * 8 for i in range(5))
_COMPILE_S, _COMPILING_SINCE, _LAUNCH_AT, _LAST_AT = (40 + i * 8 for i in range(4))
_NAME = 72
_GRADE_COMPILE_S = 120

IDLE, BASELINE, CALL, WAITING, TIMING = range(5)
COMPILE_CREDIT_CAP_S = 60.0  # at most this much compiling lengthens one case's limit
# The whole grade's compiling lengthens its limit too, by at most this share of the limit: an
# honest autotuner keyed on the shape benchmarks its configs again for each of the kata's
# dozens of shapes; a hang still stops at its case's limit.
GRADE_COMPILE_CREDIT_SHARE = 1.0
ADVANCING_GRACE = 1.0  # an interpreted launch still running programs gets this much of its limit again
STALL_S = 2.0  # nothing new for this long (and several times the usual pace): not progressing


def now() -> float:
    # CLOCK_MONOTONIC is one clock for every process of the machine: both sides compare with it.
    return time.monotonic()


# -- the worker's side ---------------------------------------------------------------------------
class Recorder:
    """The worker's writer; a no-op until opened (a compile-ahead helper, a test)."""

    def __init__(self):
        self._map: mmap.mmap | None = None
        self._depth = 0  # nested compile sections (an autotuner's benchmark compiles its config)
        self._names: dict[str, bytes] = {}

    def open(self, path: str) -> None:
        with open(path, "r+b") as f:
            self._map = mmap.mmap(f.fileno(), SIZE)

    def _q(self, offset: int, value: int) -> None:
        struct.pack_into("<Q", self._map, offset, value)

    def _d(self, offset: int, value: float) -> None:
        struct.pack_into("<d", self._map, offset, value)

    def _get_q(self, offset: int) -> int:
        return struct.unpack_from("<Q", self._map, offset)[0]

    def begin(self, stage: int) -> None:
        """A new case or phase: everything counted afresh."""
        if self._map is None:
            return
        grade_compile_s = struct.unpack_from("<d", self._map, _GRADE_COMPILE_S)[0]
        self._map[:SIZE] = bytes(SIZE)
        self._d(_GRADE_COMPILE_S, grade_compile_s)
        self._depth = 0
        self._q(_STAGE, stage)

    def stage(self, stage: int) -> None:
        if self._map is not None:
            self._q(_STAGE, stage)

    def call(self) -> None:
        """A checked call of the submission starts."""
        if self._map is not None:
            self._q(_CALLS, self._get_q(_CALLS) + 1)
            self._q(_STAGE, CALL)

    def launched(self, name: str) -> None:
        if self._map is None:
            return
        at = now()
        # launches, programs and grid are adjacent, and so are the launch's start and the last.
        struct.pack_into("<3Q", self._map, _LAUNCHES, self._get_q(_LAUNCHES) + 1, 0, 0)
        struct.pack_into("<2d", self._map, _LAUNCH_AT, at, at)
        encoded = self._names.get(name)
        if encoded is None:
            encoded = self._names[name] = name.encode("utf-8", "replace")[:48].ljust(48, b"\0")
        self._map[_NAME:_NAME + 48] = encoded

    def returned(self) -> None:
        """The launch returned: under the interpreter every program of its grid has run."""
        if self._map is not None:
            struct.pack_into("<2Q", self._map, _PROGRAMS, 0, 0)
            self._d(_LAST_AT, now())

    def grid(self, programs: int) -> None:
        if self._map is not None:
            self._q(_GRID, max(0, int(programs)))

    def program(self) -> None:
        if self._map is not None:
            self._q(_PROGRAMS, self._get_q(_PROGRAMS) + 1)
            self._d(_LAST_AT, now())

    @contextmanager
    def compiling(self):
        """Time spent in Triton's compiler or autotuner (the outermost section counts)."""
        if self._map is None or self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        self._depth = 1
        started = now()
        self._d(_COMPILING_SINCE, started)
        try:
            yield
        finally:
            self._depth = 0
            self._d(_COMPILING_SINCE, 0.0)
            spent = now() - started
            for offset in (_COMPILE_S, _GRADE_COMPILE_S):
                self._d(offset, struct.unpack_from("<d", self._map, offset)[0] + spent)


record = Recorder()
_installed: list[tuple[type, str, object]] = []
_inside_run = [0]  # JITFunction.run calls in progress: their launch is counted there, once


def _wrap(cls, name: str, make) -> None:
    original = getattr(cls, name, None)
    if original is None:
        return
    wrapper = make(original)
    wrapper.__wrapped__ = original
    setattr(cls, name, wrapper)
    _installed.append((cls, name, original))


def install() -> None:
    """Triton's launch, compile and autotune paths (a GPU's launchers too), and the interpreter's
    grid, report here.
    Called in the worker before the submission is imported (and before grader.sandbox.launches
    wraps the same launch methods on top)."""
    if _installed:
        return
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction

    def launching(original):
        def run(self, *args, **kwargs):
            if kwargs.get("warmup", False):
                return original(self, *args, **kwargs)
            record.launched(getattr(getattr(self, "fn", None), "__name__", "a Triton kernel"))
            _inside_run[0] += 1
            try:
                return original(self, *args, **kwargs)
            finally:
                _inside_run[0] -= 1
                record.returned()
        return run

    def compiling(original):
        def timed(self, *args, **kwargs):
            with record.compiling():
                return original(self, *args, **kwargs)
        return timed

    _wrap(JITFunction, "run", launching)
    _wrap(JITFunction, "_do_compile", compiling)
    _wrap(Autotuner, "_bench", compiling)
    from grader.timing.launchers import launcher_classes

    for cls in launcher_classes():
        count_compiled_launches(cls)
    try:
        from triton.runtime.interpreter import InterpretedFunction, InterpreterBuilder
    except ImportError:
        return
    _wrap(InterpretedFunction, "run", launching)

    # The interpreter runs a launch's programs one after another (GridExecutor): it sets the
    # grid's size once, then each program's index before running it (triton 3.6 and 3.9 alike).
    def grid_dim(original):
        def set_grid_dim(self, nx, ny, nz):
            record.grid(nx * ny * nz)
            return original(self, nx, ny, nz)
        return set_grid_dim

    def grid_idx(original):
        def set_grid_idx(self, x, y, z):
            record.program()
            return original(self, x, y, z)
        return set_grid_idx

    _wrap(InterpreterBuilder, "set_grid_dim", grid_dim)
    _wrap(InterpreterBuilder, "set_grid_idx", grid_idx)


def count_compiled_launches(cls) -> None:
    """A compiled kernel launched without JITFunction.run (one from `.warmup()` launched as
    `kernel[grid](...)`, a library's own cache of compiled kernels: FlagGems' LibEntry) is
    counted at its driver's launcher, as grader.sandbox.launches counts it; a launch through
    JITFunction.run is counted there, once."""
    from grader.timing.launchers import launch_name

    def launching(original):
        def __call__(self, *args, **kwargs):
            if _inside_run[0]:
                return original(self, *args, **kwargs)
            record.launched(launch_name(args[5:]))  # the launch metadata names it (triton 3.9)
            try:
                return original(self, *args, **kwargs)
            finally:
                record.returned()
        return __call__

    _wrap(cls, "__call__", launching)


def create(path: Path) -> Path:
    """The parent's empty record, before the worker starts."""
    path.write_bytes(bytes(SIZE))
    return path


# -- the parent's side ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Snapshot:
    launches: int
    programs: int
    grid: int
    calls: int
    stage: int
    compile_s: float
    compiling_since: float
    launch_at: float
    last_at: float
    name: str
    grade_compile_s: float = 0.0  # every case's compiling so far, the one in progress excepted

    def compile_credit(self, at: float, cap: float = COMPILE_CREDIT_CAP_S) -> float:
        """Seconds of this case's time spent compiling or autotuning (the one in progress too),
        as the worker claims them: capped, since the submission could write any figure."""
        return min(cap, max(0.0, self.compile_s + self._compiling_now(at)))

    def grade_compiling(self, at: float) -> float:
        """Seconds of the whole grade spent compiling or autotuning, as the worker claims them
        (for a message; the limit takes grade_compile_credit)."""
        return self.grade_compile_s + self._compiling_now(at)

    def grade_compile_credit(self, at: float, limit_s: float) -> float:
        """Seconds the whole grade's limit is lengthened by: its compiling and autotuning,
        capped at GRADE_COMPILE_CREDIT_SHARE of the limit, since the submission could write any
        figure."""
        return min(GRADE_COMPILE_CREDIT_SHARE * limit_s, max(0.0, self.grade_compiling(at)))

    def _compiling_now(self, at: float) -> float:
        """The compile section in progress at `at`, if any."""
        return max(0.0, at - self.compiling_since) if self.compiling_since > 0 else 0.0

    def programs_advancing(self, at: float) -> bool | None:
        """Under the interpreter, were the current launch's programs still starting one after
        another (True), had they stopped for long, for their pace (False), or is there no grid
        to judge by (None)?"""
        if not self.grid or not self.launches or not self.programs:
            return None
        quiet = at - self.last_at
        if self.programs == 1:  # no pace yet: a first program running for long is stuck
            return False if quiet >= STALL_S else None
        return quiet < max(STALL_S, 4 * (self.last_at - self.launch_at) / (self.programs - 1))


def read(path: Path) -> Snapshot | None:
    """The record as it is now; None when it cannot be read or makes no sense."""
    try:
        with open(path, "rb") as f:
            data = f.read(SIZE)
        fields = struct.unpack(_FORMAT, data)
    except (OSError, struct.error):
        return None
    *counts, compile_s, compiling_since, launch_at, last_at, name, grade_compile_s = fields
    floats = (compile_s, compiling_since, launch_at, last_at, grade_compile_s)
    if any(not math.isfinite(v) or v < 0 for v in floats) or counts[4] > TIMING:
        return None
    text = name.split(b"\0", 1)[0].decode("utf-8", "replace")
    text = "".join(ch for ch in text if ch.isprintable())[:48]
    return Snapshot(*counts, compile_s, compiling_since, launch_at, last_at, text, grade_compile_s)


def _kernels(n: int) -> str:
    return f"{n} Triton kernel{'s' if n != 1 else ''}"


def describe(snap: Snapshot | None, at: float, timed: tuple[int, int] | None = None,
             conclude: bool = True) -> tuple[str, bool | None]:
    """(a sentence of how far the case had got when stopped at `at`, and whether that shows a
    slow kernel (True), a hang (False) or cannot tell (None)). `timed`: (timed calls made,
    planned), where the parent knows them (a bench case's timing). conclude=False leaves out the
    sentence that says which it looks like (the caller has a better one)."""
    if snap is None:
        return "", None
    parts, slow = [], None
    if snap.stage == TIMING and timed and timed[0] >= timed[1]:
        # What follows the timed calls is still under the case's limit: the parent's check of
        # the kept outputs, then one more call, profiled (grader.timing.anatomy).
        parts.append(f"it had made all {timed[1]} of its timed calls, and was past them: in the "
                     "check of the kept outputs or the one profiled call after it (the speed anatomy)")
    elif snap.stage == TIMING and timed:
        parts.append(f"it had made {timed[0]} of its {timed[1]} timed calls")
    elif snap.stage in (CALL, WAITING) and snap.calls:
        parts.append(f"it was in its {'first' if snap.calls == 1 else 'second'} checked call")
    elif snap.stage == BASELINE:
        parts.append("the kata's baseline was running on the case's inputs")
    if snap.compiling_since > 0:
        parts.append(f"Triton had been compiling or autotuning for {at - snap.compiling_since:.0f} s")
        slow = True
    quiet = max(0.0, at - snap.last_at)
    if snap.launches:
        kernel = f" (the last: {snap.name})" if snap.name else ""
        parts.append(f"the case had launched {_kernels(snap.launches)} so far{kernel}")
    elif snap.stage in (CALL, WAITING):
        parts.append("no Triton kernel had been launched yet")
    advancing = snap.programs_advancing(at)
    if snap.grid and snap.launches and snap.programs:
        parts.append(f"the interpreter was running program {snap.programs} of the {snap.grid} in "
                     f"that launch's grid, started {quiet:.1f} s before")
        if advancing and snap.programs > 1:
            rate = (snap.programs - 1) / max(snap.last_at - snap.launch_at, 1e-6)
            parts.append(f"about {rate:.3g} programs a second, so that launch alone needed about "
                         f"{(snap.grid - snap.programs) / rate:.0f} s more")
        slow = True if slow or advancing else advancing
    elif snap.stage == WAITING:
        parts.append("the host was waiting for the GPU to finish them")
    elif snap.launches and snap.stage == CALL and slow is None:
        if quiet >= STALL_S:
            parts.append(f"nothing had been launched for {quiet:.0f} s")
            slow = False
        else:
            parts.append("it was still launching kernels")
    if not parts:
        return "", slow
    text = "When stopped, " + "; ".join(parts) + "."
    if not conclude:
        return text, slow
    if slow:
        text += (" It was still making progress: the kernel looks slow, not hung. --timeout S "
                 "raises the limit, to get its verdict.")
    elif slow is False:
        text += (" Nothing new since: that looks like a hang (a loop whose bound or index never "
                 "advances), not a slow kernel.")
    elif snap.stage == WAITING:
        text += " A kernel that never ends, or one far too slow for this case."
    return text, slow


def describe_grade(snap: Snapshot | None, at: float, limit_s: float) -> str:
    """When the whole grade's limit fired: that compiling and autotuning took more than the
    lengthening they get (grade_compile_credit), where they did; else the grade ran out of time
    for its kernels and checks, and says nothing here."""
    if snap is None or limit_s <= 0:
        return ""
    spent, allowed = snap.grade_compiling(at), GRADE_COMPILE_CREDIT_SHARE * limit_s
    if spent < allowed:
        return ""
    return (f"{spent:.0f} s of the grade went to Triton compiling and autotuning, more than the "
            f"{allowed:g} s by which its {limit_s:g} s limit is lengthened for them: an autotuner keyed "
            "on the shape (key=['M', 'N', 'K']) benchmarks each of its configs again for every new "
            "shape, and the kata has many. Key it on fewer values (sizes rounded to powers of 2), "
            "prune its configs, or raise the limit with --timeout S to get the verdict.")
