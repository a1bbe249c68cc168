"""Grading a submission: spawn the worker, enforce the time limit, turn its events into results.

The submission never runs in this process: a crash, hang, os._exit or CUDA fault ends only the
worker, and what the worker reported before that is kept.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from grader import __version__, ceilings as ceilings_cache
from grader.kata import Kata
from grader.plan import PlannedCase, build_plan
from grader.results import (ERROR, FAIL, NOT_RUN, PASS, SKIPPED, CaseResult, GradeResult,
                            Mismatch, TaskResult)
from grader.scoring import geomean, meets_thresholds, score, summarise_task

OUTPUT_LIMIT = 8000  # characters of the submission's stdout/stderr kept in a report


@dataclass
class WorkerRun:
    events: list[dict]
    returncode: int | None
    timed_out: bool
    output: str
    corrupt_lines: int


def default_mode() -> str:
    import torch

    return "gpu" if torch.cuda.is_available() else "interpret"


def grade(kata: Kata, submission: Path, mode: str | None = None, *, seed: int | None = None,
          timeout_s: float | None = None) -> GradeResult:
    submission = Path(submission).resolve()
    mode = mode or default_mode()
    seed = secrets.randbits(32) if seed is None else seed
    timeout_s = timeout_s or kata.time_limit_s[mode]
    plan = build_plan(kata, mode)
    started = time.monotonic()
    run = _run_worker(kata, submission, mode, seed, plan, timeout_s)
    result = _assemble(kata, submission, mode, seed, plan, run, timeout_s)
    result.duration_s = round(time.monotonic() - started, 2)
    return result


def _worker_env(mode: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    if mode == "interpret":
        env["TRITON_INTERPRET"] = "1"
    package_parent = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # keep the user's workspace free of __pycache__
    return env


def _run_worker(kata: Kata, submission: Path, mode: str, seed: int,
                plan: list[PlannedCase], timeout_s: float) -> WorkerRun:
    with tempfile.TemporaryDirectory(prefix="kata-grade-") as tmp:
        tmp_path = Path(tmp)
        workdir = tmp_path / "work"  # the submission's clean current directory
        workdir.mkdir()
        results_path = tmp_path / "events.jsonl"
        request = {
            "kata_dir": str(kata.directory), "submission": str(submission), "mode": mode,
            "seed": seed, "results": str(results_path),
            "plan": [dict(p.to_dict(), key=p.key) for p in plan],
            # The worker knows the device; it picks its own entry of the ceilings cache.
            "ceilings_cache": ceilings_cache.load_all() if mode == "gpu" else {},
        }
        request_path = tmp_path / "request.json"
        request_path.write_text(json.dumps(request))
        output_path = tmp_path / "output.txt"
        with open(output_path, "wb") as output:
            proc = subprocess.Popen(
                [sys.executable, "-m", "grader.worker", str(request_path)],
                cwd=workdir, env=_worker_env(mode), stdin=subprocess.DEVNULL,
                stdout=output, stderr=subprocess.STDOUT, start_new_session=True,
            )
            timed_out = False
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                _kill_group(proc)
        events, corrupt = _read_events(results_path)
        return WorkerRun(events, None if timed_out else proc.returncode, timed_out,
                         _read_output(output_path), corrupt)


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill the worker and anything it started (threads, forks, compile jobs)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _read_events(path: Path) -> tuple[list[dict], int]:
    events, corrupt = [], 0
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return [], 0
    for line in lines:
        try:
            event = json.loads(line)
            if not isinstance(event, dict) or "type" not in event:
                raise ValueError
            events.append(event)
        except ValueError:
            corrupt += 1
    return events, corrupt


def _read_output(path: Path) -> str:
    """The tail of what the submission printed (it may have printed gigabytes)."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - OUTPUT_LIMIT))
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    if size > OUTPUT_LIMIT:
        text = f"... ({size - OUTPUT_LIMIT} bytes trimmed)\n" + text
    return text


def _signal_name(code: int) -> str:
    try:
        name = signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"
    meaning = {"SIGSEGV": "segmentation fault", "SIGABRT": "aborted", "SIGKILL": "killed",
               "SIGBUS": "bus error", "SIGFPE": "floating-point exception",
               "SIGILL": "illegal instruction"}.get(name)
    return f"{name} ({meaning})" if meaning else name


def _assemble(kata: Kata, submission: Path, mode: str, seed: int, plan: list[PlannedCase],
              run: WorkerRun, timeout_s: float) -> GradeResult:
    env = next((e for e in run.events if e["type"] == "env"), {})
    if env.get("ceilings_measured") and env.get("ceilings"):
        ceilings_cache.save(ceilings_cache.cache_key(env["device"], env["versions"]), env["ceilings"])
    load_error = next((e for e in run.events if e["type"] == "load_error"), None)
    fatal = next((e for e in run.events if e["type"] in ("fatal", "internal_error")), None)
    if fatal and fatal["type"] == "internal_error":
        fatal = {"message": "Internal grader error (not your fault; please report it):\n" + fatal["message"]}
    timing_errors = {e["key"]: e["message"] for e in run.events if e["type"] == "timing_error"}
    done = any(e["type"] == "done" for e in run.events)
    case_events = {e["key"]: e["result"] for e in run.events if e["type"] == "case"}
    timings = {e["key"]: e["timing"] for e in run.events if e["type"] == "timing"}
    starts = [e for e in run.events if e["type"] == "start"]
    # The case the worker was on when it stopped without finishing (crash, hang, CUDA fault).
    in_progress = starts[-1] if starts and not done and not load_error else None

    message = (load_error or fatal or {}).get("message", "")
    if not message and not done:
        message = _stopped_early_message(run, in_progress, bool(env), timeout_s)
    if run.corrupt_lines:
        message = ("The grader's result channel held lines it did not write: the submission "
                   "tampered with it, so no result can be trusted. " + message).strip()

    tasks = []
    for task in kata.tasks:
        cases = []
        for planned in (p for p in plan if p.task == task.name):
            case = _case_result(planned, case_events.get(planned.key), timings.get(planned.key))
            if planned.key in timing_errors:
                case.status, case.message = ERROR, timing_errors[planned.key]
            if in_progress and in_progress["key"] == planned.key and case.status == NOT_RUN:
                case.status, case.message = ERROR, message
            cases.append(case)
        tasks.append(TaskResult(name=task.name, threshold=task.threshold,
                                baseline=task.baseline_name, cases=cases, correct=False))
    for t in tasks:
        summarise_task(t)

    speed_measured = mode == "gpu" and any(c.timed for t in tasks for c in t.cases)
    correct = not message and all(t.correct for t in tasks)
    status, message = _verdict(tasks, mode, correct, message)
    breakdown = score(tasks, speed_measured, kata.roofline_target, correct)

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
        environment=dict(env.get("versions", {}), grader=__version__, ceilings=env.get("ceilings")),
        seed=seed, speed_measured=speed_measured,
    )


def _stopped_early_message(run: WorkerRun, in_progress: dict | None, started: bool,
                           timeout_s: float) -> str:
    """Why the worker stopped before reporting 'done', and where it was."""
    where = ""
    if in_progress:
        phase = " (timing it)" if in_progress.get("phase") == "timing" else ""
        where = f" while running case {in_progress['key']}{phase}"
    elif not started:
        where = " before the grader could start"
    if run.timed_out:
        return (f"Time limit exceeded: the submission ran for more than {timeout_s:g} s{where}. "
                "Look for an infinite loop in the launcher or a kernel loop that never ends "
                "(raise the limit with --timeout if it is just slow).")
    if run.returncode is not None and run.returncode < 0:
        return f"The grading process was killed by {_signal_name(run.returncode)}{where}."
    return (f"The grading process exited with code {run.returncode}{where} before grading "
            "finished: does the submission call os._exit() or sys.exit()?")


def _verdict(tasks: list[TaskResult], mode: str, correct: bool, message: str) -> tuple[str, str]:
    """(status, the paragraph that explains it)."""
    if message:
        return ERROR, message
    if not correct:
        failing = [c for t in tasks for c in t.cases if c.status in (FAIL, ERROR, NOT_RUN)]
        if not failing:
            return FAIL, "no case could run in this mode"
        first = failing[0]
        return FAIL, (f"{len(failing)} case(s) failed; first: {first.task}/{first.name} "
                      f"[{first.dtype}]: {first.message}")
    if mode == "gpu" and not meets_thresholds(tasks):
        slow = [t for t in tasks if t.speedup is None or t.speedup < t.threshold]
        return FAIL, "; ".join(
            f"{t.name}: speedup {t.speedup:.2f}x is below the threshold {t.threshold:g}x"
            if t.speedup else f"{t.name}: not timed" for t in slow)
    return PASS, ""


def _case_result(planned: PlannedCase, raw: dict | None, timing: dict | None) -> CaseResult:
    if planned.skip_reason:
        return CaseResult(task=planned.task, name=planned.case, dtype=planned.dtype, shape=None,
                          hidden=planned.hidden, status=SKIPPED, message=planned.skip_reason)
    if raw is None:
        return CaseResult(task=planned.task, name=planned.case, dtype=planned.dtype, shape=None,
                          hidden=planned.hidden, status=NOT_RUN, message="not run")
    mismatches = [Mismatch(**m) for m in raw.pop("mismatches", [])]
    case = CaseResult(**raw, mismatches=mismatches)
    if timing:
        for key, value in timing.items():
            setattr(case, key, value)
    return case


def _sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None
