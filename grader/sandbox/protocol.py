"""The worker's protocol with the grading parent, in one place: what the parent asks of the worker
(the request), what the worker writes to its events file (the events) and what it says on its
line to the parent (the ops), with the forms the worker writes them in.

The submission shares the worker's process: it can write anything the worker can. So whatever
the parent reads from the worker is checked against the one form the worker writes, and anything
else is a forgery (docs/SCORING.md, `fake_result`). The worker, the Referee (the parent's end of
the line) and the verdict (grader.grading.verdict) all take these forms from here: adding an
event or an op is a change to this module, and to the code that writes and reads it.

Two channels, on purpose (docs/ARCHITECTURE.md, "The worker's protocol"): the line is the
parent's record of what happened in turn, which the submission cannot rewrite once said; the
events file, fsynced line by line, is how far the worker got when it died, and what it says
after the import (a load error, a CUDA fault, tampering, "done") the line does not carry.
"""

from __future__ import annotations

import json
import math
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import ClassVar
from pathlib import Path


@dataclass
class Request:
    """What the parent asks of a worker (written to REQUEST.json, read by the worker before it
    imports anything of the submission's). `plan`: the planned cases as dicts, each with its key."""

    kata_dir: str
    submission: str
    mode: str  # "gpu" or "interpret"
    seed: int
    results: str  # the events file
    plan: list
    grade_dir: str
    outputs: str
    gpu_memory_fraction: float
    control_fd: int  # the worker's end of the line to the parent
    progress: str | None = None  # the progress record (grader.sandbox.progress)
    ceilings_cache: dict = field(default_factory=dict)  # the device picks its own entry
    anatomy_dir: str | None = None  # `--profile` on a GPU: where the anatomy's files go
    warm_up: bool = False  # a compile-ahead helper (grader.grading.compile_ahead)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Request":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps(self.to_dict()))
        return path

    @classmethod
    def read(cls, path) -> "Request":
        return cls.from_dict(json.loads(Path(path).read_text()))


# ---- the ops on the line ------------------------------------------------------------------------

# The statuses a worker reports for a case it ran: "ran" (its outputs await the checker), or
# "fail" / "error" (the live process saw something wrong). "pass" is the checker's word alone.
WORKER_STATUSES = ("ran", "fail", "error")
# The fields of the case result the worker sends (grader.sandbox.case_runner.CaseRunner.run_case)
# and their types: a failing result goes to the verdict as sent, so one in another form is forged.
RESULT_TYPES = {"task": (str,), "name": (str,), "dtype": (str,), "shape": (list, type(None)),
                "hidden": (bool,), "status": (str,), "message": (str,), "cheat": (str, type(None)),
                "launches": (int,), "outputs": (dict,)}


def result_form(result) -> bool:
    """A case result in the form the worker sends it ("pass" is never the worker's)."""
    return isinstance(result, dict) and result.get("status") in WORKER_STATUSES and not any(
        k not in RESULT_TYPES or not isinstance(v, RESULT_TYPES[k]) or (isinstance(v, bool) and k != "hidden")
        for k, v in result.items())


def timed_form(timing, error) -> bool:
    """A timed case's outcome ("timed"): a timing, or an error with a message (and a cheat or None).
    Whether a timing is in the worker's form the verdict checks (timing_form)."""
    return (isinstance(timing, dict) and error is None) or (
        timing is None and isinstance(error, dict) and isinstance(error.get("message"), str)
        and isinstance(error.get("cheat"), (str, type(None))))


def baseline_form(value) -> bool:
    """The baseline's time the worker measured for a case's limit: a finite time, zero or more."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < math.inf


def _written(record) -> dict:
    """A record's fields as written: those left None only where their metadata says
    `written_when_none`."""
    return {f.name: getattr(record, f.name) for f in fields(record)
            if getattr(record, f.name) is not None or f.metadata.get("written_when_none")}


@dataclass(frozen=True)
class Op:
    """A request the worker sends on its line (grader.sandbox.worker_line.ParentLine.ask), one
    JSON line {"op": OP, field: value, ...}, answered once by the Referee's `_on_<op>`. An
    optional field left None is not sent, unless its metadata says `written_when_none`; a field
    not sent reads back as its default (None for the others). `from_dict` gives the record, or
    None for a request not in the form the worker sends (`in_form`): which requests come in turn
    is the Referee's to judge, not the form's. Fields the op does not have are ignored."""

    OP: ClassVar[str] = ""

    def to_dict(self) -> dict:
        return {"op": self.OP, **_written(self)}

    @classmethod
    def from_dict(cls, data) -> "Op | None":
        if not isinstance(data, dict) or data.get("op") != cls.OP:
            return None
        record = cls(**{f.name: data.get(f.name, None if f.default is MISSING else f.default)
                        for f in fields(cls)})
        return record if record.in_form() else None

    def in_form(self) -> bool:
        return True


@dataclass(frozen=True)
class KeyedOp(Op):
    """An op of one planned case (whether its key is in the plan is the Referee's to check)."""
    key: str

    def in_form(self) -> bool:
        return isinstance(self.key, str)


@dataclass(frozen=True)
class EnvOp(Op):
    """The environment, told before the import: the device, versions and ceilings (measured now,
    or cached), and the optional gpu_uuid and ceilings_note as text."""
    OP: ClassVar[str] = "env"
    device: str
    versions: dict
    ceilings: dict | None = field(metadata={"written_when_none": True})  # None: none measured
    ceilings_measured: bool
    gpu_uuid: str | None = None
    ceilings_note: str | None = None

    def in_form(self) -> bool:
        return isinstance(self.device, str) and isinstance(self.versions, dict) \
            and isinstance(self.ceilings, (dict, type(None))) \
            and all(isinstance(v, (str, type(None))) for v in (self.gpu_uuid, self.ceilings_note))

    def heard(self) -> dict:
        """What the parent keeps of it: the four fields, and the optional ones that were told."""
        return {k: v for k, v in asdict(self).items()
                if v is not None or k not in ("gpu_uuid", "ceilings_note")}


@dataclass(frozen=True)
class SandboxOp(Op):
    """The lockdown, told before the import (grader.sandbox.lockdown)."""
    OP: ClassVar[str] = "sandbox"
    status: dict

    def in_form(self) -> bool:
        return isinstance(self.status, dict) and isinstance(self.status.get("filesystem_restricted"), bool)


@dataclass(frozen=True)
class TimeOp(Op):
    """Whether to time at all (no timing for a submission already wrong, unless --keep-going)."""
    OP: ClassVar[str] = "time"


@dataclass(frozen=True)
class StartOp(KeyedOp):
    """A phase of a case begins ("case" or "timing"); a case's start told again with the
    baseline's time the worker measured asks for its limit. The Referee answers the deadline."""
    OP: ClassVar[str] = "start"
    phase: str = "case"
    baseline_s: float | None = None

    def in_form(self) -> bool:
        # A timing's limit needs no baseline; a case's is worked out from a finite time. No other
        # phase exists: one would restart the case's clock (a new `current`) each time it was told.
        if self.phase == "timing":
            return super().in_form() and self.baseline_s is None
        return super().in_form() and self.phase == "case" \
            and (self.baseline_s is None or baseline_form(self.baseline_s))


@dataclass(frozen=True)
class CaseOp(KeyedOp):
    """A case's result, for the checker's verdict (result_form)."""
    OP: ClassVar[str] = "case"
    result: dict

    def in_form(self) -> bool:
        return super().in_form() and result_form(self.result)


@dataclass(frozen=True)
class TimingOp(KeyedOp):
    """A timing announced: how many timed calls, over how many input sets."""
    OP: ClassVar[str] = "timing"
    calls: int
    sets: int

    def in_form(self) -> bool:
        return super().in_form() and isinstance(self.calls, int) and isinstance(self.sets, int) \
            and self.calls >= 1 and self.sets >= 1


@dataclass(frozen=True)
class SampleOp(KeyedOp):
    """A timed call made: whether to keep its outputs (the Referee chose which, in secret)."""
    OP: ClassVar[str] = "sample"
    call: int

    def in_form(self) -> bool:
        return super().in_form() and isinstance(self.call, int)


@dataclass(frozen=True)
class SamplesOp(KeyedOp):
    """The kept timed outputs handed over: a list of {call, set, file}, the timing's method and
    its number of input sets; which calls and sets they must be is the Referee's to check (it
    chose them)."""
    OP: ClassVar[str] = "samples"
    samples: list
    method: str | None
    sets: int

    def in_form(self) -> bool:
        return super().in_form() and isinstance(self.samples, list) \
            and all(isinstance(s, dict) for s in self.samples) and isinstance(self.sets, int)


@dataclass(frozen=True)
class TimedOp(KeyedOp):
    """A timed case's outcome: a timing, or an error {message, cheat} (timed_form)."""
    OP: ClassVar[str] = "timed"
    timing: dict | None = None
    error: dict | None = None

    def in_form(self) -> bool:
        return super().in_form() and timed_form(self.timing, self.error)


@dataclass(frozen=True)
class AnatomyOp(KeyedOp):
    """A timed case's anatomy, after its final timing: a dict, or None where it is switched off.
    Its contents are advice, sanitized by grader.judge.kernel_anatomy, which believes none of them."""
    OP: ClassVar[str] = "anatomy"
    anatomy: dict | None = field(default=None, metadata={"written_when_none": True})

    def in_form(self) -> bool:
        return super().in_form() and isinstance(self.anatomy, (dict, type(None)))


# The ops of the grade as a whole, in this order before any case ("env" and "sandbox", told
# before the import; "time", whether to time at all) ...
GRADE_OP_CLASSES = (EnvOp, SandboxOp, TimeOp)
# ... and those of one planned case (its key must be in the plan), in the order a case's go.
CASE_OP_CLASSES = (StartOp, CaseOp, TimingOp, SampleOp, SamplesOp, TimedOp, AnatomyOp)
GRADE_OPS = tuple(cls.OP for cls in GRADE_OP_CLASSES)
CASE_OPS = tuple(cls.OP for cls in CASE_OP_CLASSES)
OPS = {cls.OP: cls for cls in GRADE_OP_CLASSES + CASE_OP_CLASSES}


# ---- the events file ---------------------------------------------------------------------------

def read_events(path: Path, killed: bool = False) -> tuple[list[dict], int]:
    """The events file's events, and how many lines in it the worker did not write. The worker
    writes each event as one line ending in a newline; a worker killed in the middle of writing
    one (a limit, a signal) leaves its start without the newline, which is no forgery."""
    events, corrupt = [], 0
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return [], 0
    lines = text.splitlines()
    torn = killed and bool(text) and not text.endswith("\n")
    for i, line in enumerate(lines):
        try:
            event = json.loads(line)
            if not isinstance(event, dict) or "type" not in event:
                raise ValueError
            events.append(event)
        except ValueError:
            if not (torn and i == len(lines) - 1):
                corrupt += 1
    return events, corrupt


def channel_forgeries(events: list[dict]) -> list[str]:
    """Signs of events the worker did not write: repeated cases, anything after 'done'."""
    problems, seen = [], set()
    done_at = next((i for i, e in enumerate(events) if e["type"] == "done"), None)
    if done_at is not None and done_at != len(events) - 1:
        problems.append("events after the end of the grade")
    for event in events:
        if event["type"] in ("case", "timing", "env", "sandbox"):
            marker = (event["type"], repr(event.get("key")))
            if marker in seen:
                problems.append(f"a second '{event['type']}' event for {event.get('key') or 'the grade'}")
            seen.add(marker)
    return problems


# What a worker's timing event holds (grader.sandbox.case_runner.CaseRunner.time_case) and the types
# it sends. The figures the parent can work out itself (the floor and the roofline) the worker
# does not send: the parent works them out (grader.grading.verdict).
TIMING_TYPES = {
    "time_ms": (int, float), "baseline_ms": (int, float), "speedup": (int, float),
    "timing_method": (str,), "calls_per_sample": (int,), "samples": (int,),
    "round_speedups": (list,), "host_syncs": (int,), "host_sync_at": (str,), "warmup_ms": (list,),
    # One profiled call's kernels (grader.timing.anatomy): advice only, read by
    # grader.judge.kernel_anatomy, which drops whatever is not in the worker's form.
    "anatomy": (dict,),
}


# The fields every timing of the worker has (its Timing's), the times a finite positive number.
TIMING_REQUIRED = ("time_ms", "baseline_ms", "speedup", "timing_method", "calls_per_sample",
                   "samples", "round_speedups")
TIMES = ("time_ms", "baseline_ms", "speedup")


def _typed(value, types) -> bool:
    return value is None or (isinstance(value, types) and not isinstance(value, bool))


def _finite_positive(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < math.inf


def timing_forgeries(events: list[dict], timed: set, keys: set) -> list[str]:
    """Timing events the worker cannot have written: for a case whose kept timed outputs never
    reached the referee, or not in the shape the worker writes."""
    problems = []
    for event in (e for e in events if e["type"] == "timing"):
        key, timing = event.get("key"), event.get("timing")
        if not isinstance(key, str) or key not in keys:
            problems.append("a timing for a case that is not in the plan")
        elif key not in timed:
            problems.append(f"a timing of {key}, whose timed outputs were never handed over")
        elif not timing_form(timing):
            problems.append(f"a timing of {key} in a form the worker never writes")
    return problems


def canonical(value) -> str:
    # As JSON text: a NaN equals itself there, as it does not as a float.
    return json.dumps(value, sort_keys=True, default=str)


def timing_form(timing) -> bool:
    """A timing in the form the worker writes it: the fields and types of TIMING_TYPES, every
    field a Timing always has present, and its times finite and positive (a NaN or a missing
    time is no measurement: only a forgery holds one)."""
    return isinstance(timing, dict) and all(
        k in TIMING_TYPES and _typed(v, TIMING_TYPES[k]) for k, v in timing.items()) \
        and all(timing.get(k) is not None for k in TIMING_REQUIRED) \
        and all(_finite_positive(timing[k]) for k in TIMES) \
        and all(_finite_positive(r) for r in timing["round_speedups"]) \
        and all(_finite_positive(t) or t == 0 for t in timing.get("warmup_ms") or [])


# ---- the events, as the worker writes them ------------------------------------------------------

@dataclass(frozen=True)
class Event:
    """An event of the worker's events file: {"type": TYPE, field: value, ...}, one JSON line.
    An optional field left None is not written, unless its metadata says `written_when_none`.
    FORM (for the events whose form the parent checks, `malformed`): the types of the fields the
    worker writes, and NEEDED the one the parent cannot read the event without."""

    TYPE: ClassVar[str] = ""
    NEEDED: ClassVar[str | None] = None
    FORM: ClassVar[dict | None] = None

    def to_dict(self) -> dict:
        return {"type": self.TYPE, **_written(self)}


@dataclass(frozen=True)
class Told(Event):
    """What the worker told the parent on its line before the import, copied to the file (the
    parent reads the line's copy: the Referee's `env` and `sandbox`)."""

    told: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"type": self.TYPE, **self.told}


@dataclass(frozen=True)
class Env(Told):
    TYPE: ClassVar[str] = "env"


@dataclass(frozen=True)
class Sandbox(Told):
    TYPE: ClassVar[str] = "sandbox"


@dataclass(frozen=True)
class LoadError(Event):
    """The submission could not be imported, or lacks an entry point."""
    TYPE: ClassVar[str] = "load_error"
    NEEDED: ClassVar[str] = "message"
    FORM: ClassVar[dict] = {"kind": (str,), "message": (str,)}
    kind: str
    message: str


@dataclass(frozen=True)
class Start(Event):
    """A planned case starts (phase None), or its timing does (phase "timing")."""
    TYPE: ClassVar[str] = "start"
    NEEDED: ClassVar[str] = "key"
    FORM: ClassVar[dict] = {"key": (str,), "phase": (str,)}
    key: str
    phase: str | None = None


@dataclass(frozen=True)
class Case(Event):
    """A case's result as the worker sent it (the Referee's copy, with the checker's verdict, counts)."""
    TYPE: ClassVar[str] = "case"
    key: str
    result: dict


@dataclass(frozen=True)
class Timing(Event):
    """A timed case's timing (TIMING_TYPES; the Referee's copy counts, and this one must match it)."""
    TYPE: ClassVar[str] = "timing"
    key: str
    timing: dict


@dataclass(frozen=True)
class TimingError(Event):
    """A timed case failed while timed: a CaseProblem (a cheat, or None) or an exception."""
    TYPE: ClassVar[str] = "timing_error"
    NEEDED: ClassVar[str] = "key"
    FORM: ClassVar[dict] = {"key": (str,), "message": (str,), "cheat": (str, type(None))}
    key: str
    message: str
    cheat: str | None = field(default=None, metadata={"written_when_none": True})


@dataclass(frozen=True)
class Fatal(Event):
    """The worker stopped: a CUDA fault, or tampering (its cheat)."""
    TYPE: ClassVar[str] = "fatal"
    NEEDED: ClassVar[str] = "message"
    FORM: ClassVar[dict] = {"message": (str,), "cheat": (str,)}
    message: str
    cheat: str | None = None


@dataclass(frozen=True)
class InternalError(Event):
    """The grader or the kata failed in the worker (written by run_process after main raised)."""
    TYPE: ClassVar[str] = "internal_error"
    NEEDED: ClassVar[str] = "message"
    FORM: ClassVar[dict] = {"message": (str,)}
    message: str


@dataclass(frozen=True)
class Done(Event):
    """Every planned case ran (or the parent said to stop): the last event."""
    TYPE: ClassVar[str] = "done"


EVENT_CLASSES = (Env, Sandbox, LoadError, Start, Case, Timing, TimingError, Fatal, InternalError, Done)
# What the worker writes to its events file (grader.sandbox.worker.main, run_process) ...
EVENTS = tuple(cls.TYPE for cls in EVENT_CLASSES)
# ... and, of those the parent reads beyond the Referee's copies, the field each must have and the
# types of the fields the worker writes.
EVENT_TYPES = {cls.TYPE: (cls.NEEDED, cls.FORM) for cls in EVENT_CLASSES if cls.FORM}


def event_from_dict(data: dict) -> Event:
    """The event a line of the events file holds; ValueError for one in a form the worker never
    writes."""
    cls = next((c for c in EVENT_CLASSES if isinstance(data, dict) and data.get("type") == c.TYPE), None)
    if cls is None or malformed(data):
        raise ValueError(f"not an event the worker writes: {str(data)[:80]}")
    body = {k: v for k, v in data.items() if k != "type"}
    if issubclass(cls, Told):
        return cls(body)
    try:
        return cls(**body)
    except TypeError as exc:
        raise ValueError(f"a '{cls.TYPE}' event in a form the worker never writes: {exc}") from None


def malformed(event: dict) -> bool:
    """An event of a kind the parent reads, not in the form the worker writes it."""
    kind = event["type"] if isinstance(event["type"], str) else None
    if kind not in EVENT_TYPES:
        return False
    needed, types = EVENT_TYPES[kind]
    return not isinstance(event.get(needed), str) or any(
        k != "type" and (k not in types or not isinstance(v, types[k])) for k, v in event.items())

