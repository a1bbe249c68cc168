"""The verdict: from what the worker and the Referee reported (a WorkerRun) to a GradeResult.

A pure function of what was reported: it starts nothing and reads no file. The worker's events
are believed only in the form the worker writes them (grader.sandbox.protocol); what the Referee
heard on the line comes first where both tell the same thing. A cheat is named only on evidence
an honest kernel cannot produce, else the failure gets a diagnosis (grader.judge.failure_codes).
"""

from __future__ import annotations

import hashlib
import re
import signal
from dataclasses import dataclass, field, fields
from pathlib import Path

from grader import __version__
from grader.grading import cuda_probe, timing_evidence
from grader.grading.plan import PlannedCase
from grader.judge import failure_codes, kernel_anatomy
from grader.kata.format import ITEMSIZE, Kata
from grader.kata.gpu_memory_fit import shortfall
from grader.results.schema import (ERROR, FAIL, NOT_RUN, PASS, SKIPPED, CaseResult, GradeResult, Mismatch,
                                   TaskResult)
from grader.results.scoring import PASS_CAP, geomean, meets_thresholds, score, summarise_task, tasks_correct
from grader.sandbox import protocol, watchdog
from grader.timing import ceilings as ceilings_cache
from grader.timing.ceilings import floor_ms
from grader.timing.evidence import spread, unsteady


@dataclass
class WorkerRun:
    """What was reported of a grade: the worker's events (the Referee's own findings first), how
    it ended, and what the Referee heard on the line, which counts over the events file."""

    events: list[dict]
    returncode: int | None
    breach: watchdog.Breach | None
    output: str
    corrupt_lines: int
    protected_changed: list[str]
    verdicts: dict  # key -> the checker's case result
    timing_failures: dict  # key -> {"message", and "cheat" or "diagnosis"}
    stopped_at: str | None = None  # the failing case --fail-fast stopped at
    timing_skipped: bool = False  # a case failed, so the bench cases were not timed
    timeline: list = field(default_factory=list)  # the referee's (when, op, key)
    given_up: dict[str, int] = field(default_factory=dict)  # tasks stopped after their failures
    timed: set = field(default_factory=set)  # keys whose kept timed outputs the referee received
    env: dict | None = None  # the worker's environment as the referee heard it, before the import
    sandbox: dict | None = None  # and its lockdown, likewise
    timing_reports: dict = field(default_factory=dict)  # key -> {"timing": ...} or {"error": ...}, as the referee heard them
    # Timing evidence (grader.grading.timing_evidence): each first timing the referee found
    # suspect and had timed again ({key: {reason, message, timing}}), the ceilings the checker
    # measured again meanwhile, and the other processes seen on the GPU.
    retimed: dict = field(default_factory=dict)
    remeasured: list = field(default_factory=list)
    gpu_processes: list = field(default_factory=list)
    gpu_watch: str | None = None  # how other processes were looked for: nvml, nvidia-smi, unavailable
    how_far: str = ""  # where a worker stopped by the whole grade's time limit had got (grader.sandbox.progress)
    how_far_slow: bool | None = None  # and whether that showed a slow kernel (True) or a hang (False)
    profile_files: dict = field(default_factory=dict)  # `--profile`: file name -> where it was copied
    compile_s: float | None = None  # the grade's compiling and autotuning, as the worker's record claims

    @property
    def timed_out(self) -> bool:
        return self.breach is not None and self.breach.kind == "time"


# What PyTorch and the CUDA caching allocator say when the device's memory is exhausted.
GPU_MEMORY_EXHAUSTED = re.compile(r"OutOfMemoryError|CUDA out of memory|CUDA error: out of memory")
GPU_BUSY_MESSAGE = ("The GPU ran out of memory while the grader itself worked (checking outputs; "
                    "not your fault): another grade or program is probably using this GPU. Grade "
                    "again when it is free; nvidia-smi lists what runs there. If nothing else runs "
                    "there, this kata's largest cases need more memory than this GPU has (the "
                    "catalogue's largest grades peak near 72 GB on an 80 GB H100: adamw, "
                    "cross_entropy, paged_decode; docs/PERFORMANCE.md).\n")


def gpu_busy_message(kata: Kata, mode: str, error: str) -> str:
    """The grader's own work found the GPU full: another grade or program shares it, or the GPU
    is smaller than the kata's grade needs (its declared peak, grader.kata.gpu_memory_fit, says so
    first)."""
    too_small = shortfall(kata, cuda_probe.total_memory_bytes()) if mode == "gpu" else None
    return (f"{too_small}.\n" if too_small else "") + GPU_BUSY_MESSAGE + error


def _signal_name(code: int) -> str:
    try:
        name = signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"
    meaning = {"SIGSEGV": "segmentation fault", "SIGABRT": "aborted", "SIGKILL": "killed",
               "SIGBUS": "bus error", "SIGFPE": "floating-point exception",
               "SIGILL": "illegal instruction"}.get(name)
    return f"{name} ({meaning})" if meaning else name


def _parent_floor(case: CaseResult, kata: Kata, planned: PlannedCase, ceilings: dict | None) -> None:
    """The case's roofline floor and fraction, from the kata's declared cost and the ceilings
    the worker told before the import (the worker sends no floor of its own)."""
    case.floor_ms = case.roofline = case.nbytes = case.flops = None
    if not case.timed or not ceilings or planned.dtype not in ITEMSIZE:
        return
    nbytes, flops = timing_evidence.cost(kata, planned)
    try:
        floor = floor_ms(nbytes, flops, ceilings)
    except (KeyError, TypeError, ValueError, ZeroDivisionError):  # ceilings of another shape
        return
    if floor:
        case.floor_ms, case.nbytes, case.flops = floor, nbytes, flops
        case.roofline = floor / case.time_ms if case.time_ms else None


def verdict(kata: Kata, submission: Path, mode: str, seed: int, plan: list[PlannedCase],
            run: WorkerRun, limits: watchdog.ResourceLimits) -> GradeResult:
    """The grade, from what was reported: the worker's events, the Referee's record of the line,
    the checker's verdicts and the watchdog's breach. Starts nothing, reads and writes no file."""
    # Events the worker never writes in that form are forgeries (named below), never read.
    malformed = [e for e in run.events if protocol.malformed(e)]
    events = [e for e in run.events if not protocol.malformed(e)]
    # The referee's copy where there is one (always, for a worker that got that far): the events
    # file is open to the submission once it is imported.
    env = run.env if run.env is not None else next((e for e in events if e["type"] == "env"), {})
    # Two ceilings (grader.timing.ceilings): the best measured this grade for roofline credit,
    # those raised to the datasheet peaks for the cheat floor.
    ceilings = ceilings_cache.best(env.get("ceilings"), *run.remeasured)
    physical = ceilings_cache.physical(ceilings, env.get("device"))
    sandbox_status = run.sandbox if run.sandbox is not None else \
        next((e for e in events if e["type"] == "sandbox"), {})
    load_error = next((e for e in events if e["type"] == "load_error"), None)
    fatal = next((e for e in events if e["type"] in ("fatal", "internal_error")), None)
    if fatal and fatal["type"] == "internal_error":
        if GPU_MEMORY_EXHAUSTED.search(fatal["message"]):
            # The error's first line names it; the checker's traceback would only be noise here.
            first_line = fatal["message"].splitlines()[0]
            fatal = {"message": gpu_busy_message(kata, mode, first_line), "code": "gpu_busy"}
        else:
            fatal = {"message": "Internal grader error (not your fault; please report it):\n"
                                + fatal["message"], "code": "internal_error"}
    # Each timed case's outcome as the referee heard it: the submission can rewrite the events
    # file (an earlier case's speedup, a timing error it would rather hide), not the line.
    timings = {k: r["timing"] for k, r in run.timing_reports.items() if "timing" in r}
    timing_errors = {k: dict(r["error"], type="timing_error", key=k)
                     for k, r in run.timing_reports.items() if "error" in r}
    done = any(e["type"] == "done" for e in events)
    starts = [e for e in events if e["type"] == "start"]
    # The case the worker was on when it stopped without finishing (crash, hang, CUDA fault).
    in_progress = starts[-1] if starts and not done and not load_error else None

    grade_cheat = (fatal or {}).get("cheat")
    message = (load_error or fatal or {}).get("message", "")
    if not message and not done:
        message = _stopped_early_message(run, in_progress, bool(env), limits)
    forgeries = [f"a '{e['type']}' event in a form the worker never writes" for e in malformed] \
        + protocol.channel_forgeries(events) + protocol.timing_forgeries(events, run.timed, {p.key for p in plan}) \
        + [f"a timing of {key} in a form the worker never sends" for key, t in timings.items()
           if not protocol.timing_form(t)] \
        + [f"a timing of {e['key']} in the events file other than the one the worker told"
           for e in events if e["type"] == "timing"
           and isinstance(e.get("key"), str) and e["key"] in timings and protocol.canonical(e.get("timing")) != protocol.canonical(timings[e["key"]])]
    # A timing not in the worker's form measured nothing: no case takes its figures.
    timings = {key: t for key, t in timings.items() if protocol.timing_form(t)}
    shared = gpu_shared(run, timings)
    disturbed: list[dict] = []
    if run.corrupt_lines or forgeries:
        what = f"{run.corrupt_lines} line(s) it did not write" if run.corrupt_lines else forgeries[0]
        grade_cheat = grade_cheat or "fake_result"
        message = (f"The grader's result channel held {what}: the submission wrote to it, so no "
                   "result can be trusted. " + message).strip()
    # Under Landlock the submission cannot write those files: a change there is another
    # process's (a concurrent grade recording into the same store), not evidence of a cheat.
    if run.protected_changed and not sandbox_status.get("filesystem_restricted"):
        grade_cheat = grade_cheat or "protected_path_written"
        message = (f"The submission wrote to {', '.join(run.protected_changed)} (the results store "
                   "or a report), which the grader alone may write. " + message).strip()

    findings = failure_codes.Findings()
    if fatal and not grade_cheat:
        stop_code = fatal.get("code", "cuda_fault")
    else:
        stop_code = _stop_code(run)
    stop_advice = _stop_advice(run) if stop_code == "time_limit" else ""
    stop_named = False
    tasks = []
    for task in kata.tasks:
        cases = []
        for planned in (p for p in plan if p.task == task.name):
            raw = run.verdicts.get(planned.key)
            case = case_result(planned, raw, timings.get(planned.key))
            _parent_floor(case, kata, planned, ceilings)
            kernel_anatomy.attach(case, (timings.get(planned.key) or {}).get("anatomy"),
                                  ceilings, mode, run.profile_files)
            detail = (raw or {}).get("diagnosis") if case.status in (FAIL, ERROR) else None
            failure = timing_errors.get(planned.key) or run.timing_failures.get(planned.key)
            if failure:
                detail = _timing_failure(case, failure)
            _judge_timing(case, kata, planned, timings.get(planned.key), run, physical, shared, disturbed)
            if in_progress and in_progress["key"] == planned.key and case.status == NOT_RUN:
                case.status, case.message = ERROR, message
                if grade_cheat:  # named once, for the whole grade
                    cases.append(case)
                    continue
                detail = failure_codes.Diagnosis(stop_code, failure_codes.first_line(message), stop_advice).to_dict()
                stop_named = True
            elif run.stopped_at and case.status == NOT_RUN:
                case.message = "not run: --fail-fast stopped at the first failing case"
            elif task.name in run.given_up and case.status == NOT_RUN:
                case.message = (f"not run: {run.given_up[task.name]} cases of {task.name} already "
                                "failed; fix those first (--keep-going runs every case)")
            _name_findings(case, detail, findings)
            cases.append(case)
        tasks.append(TaskResult(name=task.name, threshold=task.threshold,
                                baseline=task.baseline_name, cases=cases, correct=False))
    for t in tasks:
        summarise_task(t, kata.roofline_target)
    # A case the whole grade's time limit stopped was only the one in flight: no edge case of its.
    stopped_by_grade_limit = in_progress["key"] if in_progress and run.timed_out and not run.breach.case else None
    hidden = failure_codes.hidden_only([c for t in tasks for c in t.cases if _label(c) != stopped_by_grade_limit])
    if hidden:
        found, failed = hidden
        findings.diagnosis(found, _label(failed[0]), count=len(failed))
    if grade_cheat:
        findings.cheat(grade_cheat, None, message, first=True)
    elif load_error:
        findings.diagnosis(failure_codes.Diagnosis("load_error", failure_codes.first_line(message)), None)
    elif (fatal or not done) and not stop_named:
        findings.diagnosis(failure_codes.Diagnosis(stop_code, failure_codes.first_line(message), stop_advice), None)
    failure_codes.attach_compiler_lines([c for t in tasks for c in t.cases], findings.diagnoses, run.output)
    cheats = findings.cheats

    speed_measured = mode == "gpu" and any(c.timed for t in tasks for c in t.cases)
    correct = not message and not cheats and tasks_correct(tasks)
    # A task none of whose planned cases is a bench case (a partial grade of checked cases, or
    # bench cases the kata skips in this mode) cannot be timed: its speed is not judged, not failed.
    untimeable = {t.name for t in kata.tasks
                  if not any(p.bench and not p.skip_reason for p in plan if p.task == t.name)}
    status, message = grade_status(tasks, mode, correct, message, untimeable)
    if run.timing_skipped and status != PASS:
        message += ("\nSpeed not measured: fix correctness first (--keep-going times the bench "
                    "cases anyway).")
    if cheats and status == PASS:  # a cheat seen only while timing
        status, message = FAIL, cheats[0]["message"]
    breakdown = score(tasks, speed_measured, correct)

    all_speedups = [c.speedup for t in tasks for c in t.cases if c.timed]
    return GradeResult(
        kata=kata.name, title=kata.title, submission=str(submission),
        submission_sha256=_sha256(submission), mode=mode, status=status, correct=correct,
        score=breakdown.total, speedup=geomean(all_speedups), threshold=kata.threshold,
        roofline=geomean(c.roofline for t in tasks for c in t.cases if c.timed),
        tasks=tasks, message=message, score_breakdown=breakdown,
        skipped=[{"task": p.task, "case": p.case, "dtype": p.dtype, "reason": p.skip_reason}
                 for p in plan if p.skip_reason],
        output=run.output, device=env.get("device"),
        environment=_environment(env, ceilings, physical, run),
        gpu_shared=shared, timings_disturbed=disturbed,
        seed=seed, speed_measured=speed_measured,
        cheat=cheats[0]["reason"] if cheats else None, cheats=cheats, diagnoses=findings.diagnoses,
        # Advice on speed is for honest work: a grade named a cheat gets none.
        advice=[] if cheats else failure_codes.speed_advice([c for t in tasks for c in t.cases]),
        sandbox=dict({k: v for k, v in sandbox_status.items() if k != "type"}, limits=limits.describe()),
    )


def _label(case: CaseResult) -> str:
    return f"{case.task}/{case.name}/{case.dtype}"


def _stop_code(run: WorkerRun) -> str:
    """The diagnosis of a worker that stopped before it finished."""
    if run.timed_out:
        return "time_limit"
    return "limit_exceeded" if run.breach else "crashed"


def _stop_advice(run: WorkerRun) -> str:
    """What to do about a time limit, where how far the worker had got showed it still working
    (compiling, autotuning, a slow kernel); "" leaves the advice for a hang."""
    slow = run.breach.slow if run.breach.case else run.how_far_slow
    if not slow:
        return ""
    return ("it was still working, not hung (the message says at what): make that faster, or raise "
            "the limit with --timeout S to get the verdict")


def _timing_failure(case: CaseResult, failure: dict) -> dict | None:
    """A failure seen while timing (the worker's, or the checker's on sampled timed outputs):
    the case fails with it; returns its diagnosis, if it is not a cheat."""
    case.message, case.cheat = str(failure.get("message", "")), failure.get("cheat")
    if failure.get("diagnosis") or case.cheat:
        case.status = FAIL
        return failure.get("diagnosis")
    case.status = ERROR  # the submission raised while timed
    return failure_codes.Diagnosis("failed_while_timed", failure_codes.first_line(case.message)).to_dict()


def _name_findings(case: CaseResult, detail: dict | None, findings: failure_codes.Findings) -> None:
    """A failed case named: a cheat only on evidence an honest kernel cannot produce
    (grader.judge.failure_codes.CHEATS), else a diagnosis of what went wrong."""
    if case.status not in (FAIL, ERROR):
        return
    if case.cheat:
        kind, code = failure_codes.classify(case.cheat, case.message)
        if kind == "cheat":
            findings.cheat(code, _label(case), case.message)
            return
        case.cheat = None
        detail = failure_codes.Diagnosis(code, failure_codes.first_line(case.message)).to_dict()
    if not detail:
        detail = failure_codes.from_message(case.message, case.status).to_dict()
    case.diagnosis = detail["code"]
    findings.diagnosis(detail, _label(case))


def gpu_shared(run: WorkerRun, timings: dict) -> dict | None:
    """What showed that the GPU was shared while this grade ran, or None: other processes seen on
    it, and timed cases whose rounds disagreed far more than a steady GPU allows."""
    rounds = [(key, t.get("round_speedups")) for key, t in timings.items()] + \
        [(key, (r.get("timing") or {}).get("round_speedups")) for key, r in run.retimed.items()
         if isinstance(r.get("timing"), dict)]
    unsteady_cases = {}
    for key, ratios in rounds:
        if unsteady(ratios):
            unsteady_cases[key] = max(unsteady_cases.get(key, 0.0), round(spread(ratios), 2))
    if not run.gpu_processes and not unsteady_cases:
        return None
    return {"processes": list(run.gpu_processes),
            "unsteady_cases": [{"case": key, "spread": value} for key, value in unsteady_cases.items()]}


def _judge_timing(case: CaseResult, kata: Kata, planned: PlannedCase, timing: dict | None, run: WorkerRun,
                  physical: dict | None, shared: dict | None, disturbed: list[dict]) -> None:
    """Name a timing-based cheat only on evidence that reproduced on a quiet GPU: the referee
    timed a suspect case again (WorkerRun.retimed), and this second timing shows it too. Else no
    cheat: an impossible time is not counted, and the grade says the timings were disturbed."""
    if case.cheat or not case.timed or timing is None:
        return
    first = run.retimed.get(planned.key)
    suspected = timing_evidence.suspicion(kata, planned, timing, physical, None)
    reproduced = suspected is not None and first is not None and first["reason"] == suspected[0]
    if suspected and reproduced and not shared:
        reason, message = suspected
        case.status, case.cheat, case.message = FAIL, reason, message
        return
    if suspected:
        why = "the GPU was shared (gpu_shared)" if shared else "a second timing did not show it"
        disturbed.append({"case": planned.key, "reason": suspected[0], "message": suspected[1],
                          "outcome": f"no cheat named: {why}" + (
                              "; the time is not counted" if suspected[0] == "below_physical_floor" else "")})
        if suspected[0] == "below_physical_floor":
            case.time_ms = case.baseline_ms = case.speedup = case.roofline = case.floor_ms = None
            case.round_speedups = case.timing_method = None
            case.message = f"time not counted: {suspected[1]}; {why}"
    elif first is not None:
        disturbed.append({"case": planned.key, "reason": first["reason"], "message": first["message"],
                          "outcome": "timed again: the second timing did not show it, so no cheat is "
                                     "named and the second timing counts"})


def _environment(env: dict, ceilings: dict | None, physical: dict | None, run: WorkerRun) -> dict:
    """The JSON's environment: versions, the ceilings of the credit and of the cheat floor."""
    found = dict(env.get("versions", {}), grader=__version__, ceilings=ceilings)
    if physical and physical != ceilings:
        found["physical_ceilings"] = {k: physical[k] for k in ceilings_cache.RATES if k in physical}
    if env.get("ceilings_note"):
        found["ceilings_note"] = env["ceilings_note"]
    if run.remeasured:
        found["ceilings_remeasured"] = run.remeasured
    if run.gpu_watch:
        found["gpu_processes_seen_by"] = run.gpu_watch
    return found


def _stopped_early_message(run: WorkerRun, in_progress: dict | None, started: bool,
                           limits: watchdog.ResourceLimits) -> str:
    """Why the worker stopped before reporting 'done', and where it was."""
    where = ""
    if in_progress:
        phase = " (timing it)" if in_progress.get("phase") == "timing" else ""
        where = f" while running case {in_progress['key']}{phase}"
    elif not started:
        where = " before the grader could start"
    if run.timed_out and run.breach.case:
        return run.breach.message
    if run.timed_out:
        how_far = f" {run.how_far}" if run.how_far else ""
        if run.how_far_slow is not None:  # the sentence says which it was, and what to do
            return f"{run.breach.message}{where}.{how_far}"
        return (f"{run.breach.message}{where}.{how_far} Look for an infinite loop in the launcher "
                "or a kernel loop that never ends (raise the limit with --timeout if it is just slow).")
    if run.breach:
        return f"{run.breach.message}{where}; the grading process was stopped."
    if run.returncode is not None and run.returncode < 0:
        return f"The grading process was killed by {_signal_name(run.returncode)}{where}."
    return (f"The grading process exited with code {run.returncode}{where} before grading "
            "finished: does the submission call os._exit() or sys.exit()?")


def grade_status(tasks: list[TaskResult], mode: str, correct: bool, message: str,
                 untimeable: set[str] | frozenset = frozenset()) -> tuple[str, str]:
    """(status, the paragraph that explains it). untimeable: the tasks with no bench case in the
    plan, whose speed is not judged."""
    if message:
        return ERROR, message
    if not correct:
        failing = ([c for t in tasks for c in t.cases if c.status in (FAIL, ERROR)]
                   or [c for t in tasks for c in t.cases if c.status == NOT_RUN])
        if not failing:
            return FAIL, "no case could run in this mode"
        # A case named a cheat leads: it is the verdict that matters, whatever case came first.
        cheat = next((c for c in failing if c.cheat), None)
        first = cheat or failing[0]
        return FAIL, (f"{len(failing)} case(s) failed; {'named a cheat' if cheat else 'first'}: "
                      f"{first.task}/{first.name} [{first.dtype}]: {first.message}")
    timeable = [t for t in tasks if t.name not in untimeable]
    if mode == "gpu" and not meets_thresholds(timeable):
        slow = [t for t in timeable if t.pass_speedup is None or t.pass_speedup < t.threshold]
        return FAIL, "; ".join(
            f"{t.name}: speedup {t.pass_speedup:.2f}x (geomean, each case capped at "
            f"{PASS_CAP:g}x the threshold) is below the threshold {t.threshold:g}x"
            if t.pass_speedup else f"{t.name}: not timed" for t in slow)
    return PASS, ""


def case_result(planned: PlannedCase, raw: dict | None, timing: dict | None) -> CaseResult:
    if planned.skip_reason:
        return CaseResult(task=planned.task, name=planned.case, dtype=planned.dtype, shape=None,
                          hidden=planned.hidden, status=SKIPPED, message=planned.skip_reason)
    if raw is None:
        return CaseResult(task=planned.task, name=planned.case, dtype=planned.dtype, shape=None,
                          hidden=planned.hidden, status=NOT_RUN, message="not run")
    raw = dict(raw)
    raw.pop("diagnosis", None)  # a dict from the checker; named by _name_findings
    mismatches = [Mismatch(**m) for m in raw.pop("mismatches", None) or []]
    case = CaseResult(**{k: v for k, v in raw.items() if k in _CASE_FIELDS}, mismatches=mismatches)
    if case.status == "ran":  # the worker ran it but the checker never ruled on it
        case.status, case.message = ERROR, "the outputs of this case were never checked"
    if timing and case.status == PASS:  # a timing in the worker's form (verdict kept no other)
        for key, value in timing.items():
            if key in _CASE_FIELDS:
                setattr(case, key, value)
    return case


_CASE_FIELDS = {f.name for f in fields(CaseResult)} - {"mismatches"}


def _sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None
