"""Grading a submission, the grade's flow: plan, start the worker and the checker
(grader.grading.processes), referee and watch them, then the verdict (grader.grading.verdict).

The submission never runs in this process: a crash, hang, os._exit or CUDA fault ends only the
worker, and what the worker reported before that is kept. The watchdog (grader.sandbox.watchdog)
holds the worker to its limits from outside; the checker (grader.judge.checker), which never imports
the submission, decides whether the values it produced are right.
"""

from __future__ import annotations

import os
import secrets
import socket
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from grader.grading import compile_ahead, cuda_probe, gpu_sharing, timing_evidence
from grader.grading.plan import PlannedCase, build_plan
from grader.grading.processes import (GPU_MEMORY_FRACTION, MAX_PROCESSES, OUTPUT_CAP_BYTES, CheckerProcess,
                                      copy_reproducer, fingerprints, grade_folder, kill_group, read_output,
                                      start_worker, worker_env)
from grader.grading.verdict import WorkerRun, verdict
from grader.judge import kernel_anatomy
from grader.kata.format import Kata
from grader.results.schema import GradeResult
from grader.sandbox import progress, protocol, watchdog
from grader.sandbox.referee import Referee
from grader.timing import ceilings as ceilings_cache


def default_mode() -> str:
    from grader.grading.cuda_probe import cuda_available

    return "gpu" if cuda_available() else "interpret"


def grade(kata: Kata, submission: Path, mode: str | None = None, *, seed: int | None = None,
          timeout_s: float | None = None, memory_gib: float | None = None,
          protected: list[Path] = (), fail_fast: bool = False, keep_going: bool = False,
          progress=None, case_timeout_s: float | None = None, turns=None,
          only_cases: Sequence[str] | None = None, profile_dir: Path | None = None) -> GradeResult:
    """Grade `submission`; `protected` are paths (results store, report) it must not touch.

    fail_fast: stop at the first failing case. keep_going: run every case, and time the bench
    cases, even when cases failed (by default a task stops after referee.FAILURES_PER_TASK
    failing cases, and a wrong submission is not timed). progress(event): told of each
    case as it starts and ends ({"type": "start"|"case", "key", "phase", "status"}).
    only_cases: run only the cases of these names (in every task that has one), to rerun a
    failing case in seconds; such a grade is partial (result.only_cases says so). An unknown
    name raises ValueError. profile_dir: on a GPU, each timed case's Chrome trace of one call and
    its longest Triton kernel's IR and PTX are copied there (grader.timing.anatomy).
    """
    submission = Path(submission).resolve()
    mode = mode or default_mode()
    seed = secrets.randbits(32) if seed is None else seed
    limits = watchdog.ResourceLimits(
        wall_s=timeout_s or kata.time_limit_s[mode],
        memory_bytes=int(memory_gib * watchdog.GIB) if memory_gib else watchdog.default_memory_bytes(),
        processes=MAX_PROCESSES, output_bytes=OUTPUT_CAP_BYTES)
    plan = build_plan(kata, mode)
    if only_cases:
        plan = select_cases(kata, plan, only_cases)
    started = time.monotonic()
    options = {"fail_fast": fail_fast, "keep_going": keep_going, "progress": progress,
               "case_cap_s": case_timeout_s or timeout_s, "turns": turns, "profile_dir": profile_dir}
    run = _run_worker(kata, submission, mode, seed, plan, limits, protected, options)
    ended = time.monotonic()
    if os.environ.get("KATA_TRACE"):  # where the time went: the worker's questions, in order
        with open(os.environ["KATA_TRACE"], "a") as trace:
            for when, op, key in run.timeline:
                trace.write(f"{when - started:8.3f} {op} {key or ''}\n")
            trace.write(f"{ended - started:8.3f} end\n")
    result = verdict(kata, submission, mode, seed, plan, run, limits)
    keep_ceilings(run, result)
    result.phases_s = phases(run.timeline, started, ended, timed=not run.timing_skipped)
    result.compile_s = run.compile_s
    result.duration_s = round(time.monotonic() - started, 2)
    if only_cases:
        result.only_cases = sorted(set(only_cases))
    return result


def keep_ceilings(run: WorkerRun, result: GradeResult) -> None:
    """The ceilings the worker measured before the import (as the referee heard them), and those
    the checker measured again, kept in the cache for the next grades on this device; nothing
    measured beside another process is kept."""
    env = run.env
    if env is None or result.gpu_shared:
        return
    key = ceilings_cache.cache_key(env["device"], env["versions"])
    for measured in ([env["ceilings"]] if env.get("ceilings_measured") and env.get("ceilings") else []) \
            + run.remeasured:
        ceilings_cache.save(key, measured)


def phases(timeline: list, started: float, ended: float, timed: bool) -> dict[str, float]:
    """Where a grade's time went, from the referee's timeline: `start_up` (until the first case
    starts: processes, imports, CUDA), `checked_cases` (every checked call, compiling and
    checking included), `timing` (the bench cases timed, and their kept calls checked). A phase
    the grade never reached is left out."""
    first = next((when for when, op, _ in timeline if op == "start"), None)
    if first is None:
        return {"start_up": round(ended - started, 2)}
    asked = next((when for when, op, _ in timeline if op == "time"), None)
    found = {"start_up": round(first - started, 2),
             "checked_cases": round((asked if asked is not None else ended) - first, 2)}
    if asked is not None and timed and any(op == "timing" for _, op, _ in timeline):
        found["timing"] = round(ended - asked, 2)
    return found


def select_cases(kata: Kata, plan: list[PlannedCase], names: Sequence[str]) -> list[PlannedCase]:
    """The planned cases named in `names`; ValueError naming the kata's cases for a name it lacks."""
    known = {c.name for t in kata.tasks for c in t.cases}
    unknown = sorted(set(names) - known)
    if unknown:
        raise ValueError(f"{kata.name} has no case named {', '.join(unknown)}; its cases: "
                         f"{', '.join(sorted(known))}")
    return [p for p in plan if p.case in set(names)]


def _run_worker(kata: Kata, submission: Path, mode: str, seed: int, plan: list[PlannedCase],
                limits: watchdog.ResourceLimits, protected, options: dict) -> WorkerRun:
    with tempfile.TemporaryDirectory(prefix="kata-grade-", dir=grade_folder()) as tmp:
        tmp_path = Path(tmp)
        for sub in ("work", "tmp", "outputs"):
            (tmp_path / sub).mkdir()
        workdir = tmp_path / "work"  # the submission's clean current directory
        results_path = tmp_path / "events.jsonl"
        plan_dicts = [dict(p.to_dict(), key=p.key) for p in plan]
        ours, theirs = socket.socketpair()
        request = protocol.Request(
            kata_dir=str(kata.directory), submission=str(submission), mode=mode, seed=seed,
            results=str(results_path), plan=plan_dicts, grade_dir=str(tmp_path),
            outputs=str(tmp_path / "outputs"), gpu_memory_fraction=GPU_MEMORY_FRACTION,
            control_fd=theirs.fileno(),
            progress=str(progress.create(tmp_path / "progress.bin")),
            # The worker knows the device; it picks its own entry of the ceilings cache.
            ceilings_cache=ceilings_cache.load_all() if mode == "gpu" else {})
        if options.get("profile_dir") and mode == "gpu":
            # Written inside the grade's folder (the only place the sandbox may write), copied
            # out by this process once the worker is done.
            request.anatomy_dir = str(tmp_path / "anatomy")
        request_path = request.write(tmp_path / "request.json")
        output_path = tmp_path / "output.txt"
        before = fingerprints(protected)
        seen: dict[int, int] = {}
        judge = CheckerProcess(kata, mode, seed, plan_dicts, tmp_path)
        referee = Referee(ours, judge, plan_dicts, fail_fast=options["fail_fast"],
                          keep_going=options["keep_going"], progress=options["progress"],
                          turns=options["turns"], mode=mode, case_cap_s=options["case_cap_s"])
        # The grader's own processes are never "another process on the GPU".
        started = [judge.proc.pid]
        gpu_sharing.register(judge.proc.pid)

        def start_registered(*args):
            proc = start_worker(*args)
            started.append(proc.pid)
            gpu_sharing.register(proc.pid)
            return proc

        watch = gpu_sharing.Watch(gpu_uuid=lambda: (referee.env or {}).get("gpu_uuid"))
        if mode == "gpu":
            referee.look_at_gpu = watch.look
        by_key = {p.key: p for p in plan}
        referee.suspect = lambda key, timing: timing_evidence.suspicion(
            kata, by_key[key], timing, ceilings_cache.best((referee.env or {}).get("ceilings"), *referee.remeasured),
            (referee.env or {}).get("device"))
        runs = compile_ahead.shares(kata, plan_dicts,
                                    compile_ahead.helper_count(mode, options["turns"] is not None),
                                    cuda_probe.total_memory_bytes() if mode == "gpu" else None)
        helpers = compile_ahead.Helpers(runs, request.to_dict(), tmp_path, limits, start_registered,
                                        lambda folder: worker_env(mode, folder), referee.timeline)
        referee.case_started, referee.before_timing = helpers.case_started, helpers.stop
        how_far = ("", None)
        try:
            with open(output_path, "wb") as output:
                proc = start_registered(request_path, workdir, worker_env(mode, tmp_path / "tmp"),
                                        output, theirs)
                theirs.close()
                referee.start()
                try:
                    breach = watchdog.watch(proc, limits, output_path, seen,
                                            extra=lambda: _overdue(referee, plan_dicts, kata, tmp_path),
                                            lengthen=lambda: grade_compile_credit(tmp_path, limits.wall_s))
                    if breach is not None and breach.kind == "time" and breach.case is None:
                        how_far = _how_far(referee, tmp_path, grade_limit_s=limits.wall_s)
                finally:
                    helpers.stop()
                    watchdog.freeze(seen)
                    kill_group(proc)
                    watchdog.kill_all(seen)
                    ours.shutdown(socket.SHUT_RDWR)
                    referee.join(timeout=60)
                    referee.release()
            changed = [str(p) for p, fp in fingerprints(protected).items() if fp != before.get(p)]
            compiled = progress.read(tmp_path / "progress.bin")
            compile_s = round(compiled.grade_compiling(progress.now()), 2) if compiled else None
            killed = breach is not None or proc.returncode is None or proc.returncode < 0
            events, corrupt = protocol.read_events(results_path, killed)
            copied = kernel_anatomy.copy_files(tmp_path / "anatomy", options.get("profile_dir"))
            copy_reproducer(tmp_path / "tmp")
        finally:
            ours.close()
            judge.close()
            for pid in started:
                gpu_sharing.unregister(pid)
        # What the referee saw goes first: the worker's own events may end with "done".
        seen_by_referee = []
        if referee.forgeries:
            seen_by_referee.append({"type": "fatal", "cheat": "fake_result", "message": (
                "The grader's line to the worker was used out of turn (" + referee.forgeries[0]
                + "): the submission talked to the grader, so no result can be trusted.")})
        seen_by_referee += [{"type": "internal_error", "message": f"the output checker failed: {m}"}
                            for m in referee.errors]
        events = seen_by_referee + events
        return WorkerRun(events, None if breach else proc.returncode, breach,
                         read_output(output_path), corrupt, changed, referee.verdicts,
                         referee.timing_failures, referee.stopped_at, referee.timing_skipped,
                         referee.timeline, referee.given_up, referee.timed, referee.env,
                         referee.sandbox, referee.timing_reports, referee.retimed,
                         referee.remeasured, watch.processes, watch.method, *how_far, copied, compile_s)


def grade_compile_credit(grade_dir: Path, limit_s: float) -> float:
    """The seconds the whole grade's limit is lengthened by: the grade's compiling and
    autotuning as the worker's progress record claims them, capped (grader.sandbox.progress)."""
    snapshot = progress.read(grade_dir / "progress.bin")
    return snapshot.grade_compile_credit(progress.now(), limit_s) if snapshot else 0.0


def _how_far(referee: Referee, grade_dir: Path, grade_limit_s: float | None = None) -> tuple[str, bool | None]:
    """How far the case in flight had got, from the worker's progress record (a sentence), and
    whether that shows a slow kernel (True), a hang (False) or cannot tell (None). grade_limit_s:
    the whole grade's limit fired, so say too when compiling and autotuning took more than the
    lengthening they get."""
    current = referee.current
    timed = referee.timed_calls(current["key"]) if current else None
    snapshot, now = progress.read(grade_dir / "progress.bin"), progress.now()
    compiling = progress.describe_grade(snapshot, now, grade_limit_s) if grade_limit_s else ""
    text, slow = progress.describe(snapshot, now, timed, conclude=not compiling)
    if compiling:  # time spent compiling is no hang, nor a slow kernel
        text, slow = f"{text} {compiling}".strip(), True
    return text, slow


def _overdue(referee: Referee, plan: list[dict], kata: Kata, grade_dir: Path) -> watchdog.Breach | None:
    """A case past its own limit, lengthened by the time its calls spent compiling (as the
    worker's progress record claims it, capped): stop now, naming it, its shape and how far it
    had got."""
    late = referee.overdue()
    if late is None:
        return None
    snapshot, now = progress.read(grade_dir / "progress.bin"), progress.now()
    credit = snapshot.compile_credit(now) if snapshot else 0.0
    # Under the interpreter, programs still starting one after another are a slow kernel, not a
    # hang: it gets up to its limit again (a hang starts nothing new, and stops at its limit).
    advancing = late["limit_s"] * progress.ADVANCING_GRACE if snapshot and snapshot.programs_advancing(now) else 0.0
    current = referee.overdue(grace_s=credit + advancing)
    if current is None:
        return None
    planned = next(p for p in plan if p["key"] == current["key"])
    task = next(t for t in kata.tasks if t.name == planned["task"])
    case = next(c for c in task.cases if c.name == planned["case"])
    shape = ", ".join(f"{k}={v}" for k, v in case.params.items() if not isinstance(v, (list, dict)))
    what = "timing it" if current["phase"] == "timing" else "its checked calls"
    compiling = f", {credit:.0f} s of it compiling" if credit >= 1 else ""
    how_far, slow = _how_far(referee, grade_dir)
    if slow:
        advice = ""
    elif slow is False:
        advice = (" Look for a loop bound or index that does not advance, in the kernel or in its "
                  "launcher.")
    else:
        advice = (" Likely causes: a loop that never ends (a loop bound or index that does not "
                  "advance), or a block far too large for the row (a BLOCK of next_power_of_2(N) on "
                  "a very long row compiles and runs slowly: loop over the row in blocks). "
                  "--timeout S raises the limit if it is just slow.")
    return watchdog.Breach("time", (
        f"Time limit exceeded: case {planned['task']}/{planned['case']} [{planned['dtype']}] "
        f"({shape}) ran for more than {current['limit_s'] + credit + advancing:.0f} s ({what}{compiling}). "
        f"{how_far}{advice}").replace("  ", " ").strip(), case=current["key"], slow=slow)


