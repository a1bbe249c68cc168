"""Grading a submission: spawn the worker, watch it, check its outputs, turn it all into results.

The submission never runs in this process: a crash, hang, os._exit or CUDA fault ends only the
worker, and what the worker reported before that is kept. The watchdog (grader.sandbox.watchdog)
holds the worker to its limits from outside; the checker (grader.judge.checker), which never imports
the submission, decides whether the values it produced are right.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

from grader import __version__
from grader.grading import compile_ahead, cuda_probe, gpu_sharing, timing_evidence, warm_start
from grader.grading.plan import PlannedCase, build_plan
from grader.judge import failure_codes, kernel_anatomy
from grader.kata.format import ITEMSIZE, Kata
from grader.kata.gpu_memory_fit import shortfall
from grader.paths import package_dir
from grader.results.schema import (ERROR, FAIL, NOT_RUN, PASS, SKIPPED, CaseResult, GradeResult, Mismatch,
                                   TaskResult)
from grader.results.scoring import PASS_CAP, geomean, meets_thresholds, score, summarise_task, tasks_correct
from grader.sandbox import progress, watchdog
from grader.sandbox.control import Referee
from grader.timing import ceilings as ceilings_cache
from grader.timing.ceilings import floor_ms
from grader.timing.evidence import spread, unsteady

OUTPUT_LIMIT = 8000  # characters of the submission's stdout/stderr kept in a report
OUTPUT_CAP_BYTES = 8 << 20  # printing more than this ends the grade
MAX_PROCESSES = 64  # the worker, Triton's compiler processes, and nothing like a fork bomb
GPU_MEMORY_FRACTION = 0.9
# Variables that point at the user's results or configuration: the worker never sees them.
PRIVATE_ENV = ("KATA_DB", "KATA_DATA_DIR", "KATA_HANDLE")
# Nor credentials, by the usual names: the submission could print them into its report.
SECRET_ENV = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|API_?KEY|ACCESS_KEY|PRIVATE_KEY|^AWS_|^SSH_AUTH_SOCK$"
                        r"|^GH_|^GITHUB_", re.I)
# Triton's crash reproducer (the compiler_error advice): the FILE asked for is out of the
# sandboxed worker's reach, so the worker writes it in its grade folder and it is copied out.
REPRODUCER_ENV, REPRODUCER_NAME = "TRITON_REPRODUCER_PATH", "triton-reproducer.mlir"


@dataclass
class WorkerRun:
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
    timing_reports: dict | None = None  # key -> {"timing": ...} or {"error": ...}, as the referee heard them
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

    @property
    def timed_out(self) -> bool:
        return self.breach is not None and self.breach.kind == "time"


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
    cases, even when cases failed (by default a task stops after control.FAILURES_PER_TASK
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
    result = _assemble(kata, submission, mode, seed, plan, run, limits)
    result.phases_s = phases(run.timeline, started, ended, timed=not run.timing_skipped)
    result.duration_s = round(time.monotonic() - started, 2)
    if only_cases:
        result.only_cases = sorted(set(only_cases))
    return result


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


def _worker_env(mode: str, tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in PRIVATE_ENV and not SECRET_ENV.search(k)}
    env.pop("TRITON_INTERPRET", None)
    env["TMPDIR"] = str(tmp)  # compilers' scratch files stay inside the grade's folder
    if mode == "interpret":
        env["TRITON_INTERPRET"] = "1"
    package_parent = str(package_dir().parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    # torch.compile off: a compiled function runs eagerly, where the op recorder sees its ops
    # (grader.sandbox.torch_compute.compile_evidence names a submission that switches it back on).
    env["TORCH_COMPILE_DISABLE"] = env["TORCHDYNAMO_DISABLE"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # keep the user's workspace free of __pycache__
    env.setdefault("KINETO_LOG_LEVEL", "5")  # the anatomy's profiler: no log lines in the output
    if env.get(REPRODUCER_ENV):
        env[REPRODUCER_ENV] = str(tmp / REPRODUCER_NAME)  # copied out by copy_reproducer
    return env


def copy_reproducer(worker_tmp: Path, wanted: str | None = None) -> str | None:
    """Triton's crash reproducer, written by the worker in its grade folder, copied to the file
    TRITON_REPRODUCER_PATH names (from this process's folder); where it went, or None. A plain
    file only, never a link."""
    wanted = wanted if wanted is not None else os.environ.get(REPRODUCER_ENV)
    written = worker_tmp / REPRODUCER_NAME
    if not wanted or written.is_symlink() or not written.is_file():
        return None
    target = Path(wanted).expanduser()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(written.read_bytes())
    except OSError:
        return None
    return str(target)


def _grade_folder() -> str | None:
    """Where a grade's files go: the default temp folder. Not /dev/shm, though it is faster: every
    worker may read there (PyTorch keeps the reference counts of CUDA IPC handles in it), so
    another grade's folder would be within a submission's reach (docs/SCORING.md, "The sandbox")."""
    return None


def _run_worker(kata: Kata, submission: Path, mode: str, seed: int, plan: list[PlannedCase],
                limits: watchdog.ResourceLimits, protected, options: dict) -> WorkerRun:
    with tempfile.TemporaryDirectory(prefix="kata-grade-", dir=_grade_folder()) as tmp:
        tmp_path = Path(tmp)
        for sub in ("work", "tmp", "outputs"):
            (tmp_path / sub).mkdir()
        workdir = tmp_path / "work"  # the submission's clean current directory
        results_path = tmp_path / "events.jsonl"
        plan_dicts = [dict(p.to_dict(), key=p.key) for p in plan]
        ours, theirs = socket.socketpair()
        request = {
            "kata_dir": str(kata.directory), "submission": str(submission), "mode": mode,
            "seed": seed, "results": str(results_path), "plan": plan_dicts,
            "grade_dir": str(tmp_path), "outputs": str(tmp_path / "outputs"),
            "gpu_memory_fraction": GPU_MEMORY_FRACTION, "control_fd": theirs.fileno(),
            "case_cap_s": options["case_cap_s"],
            "progress": str(progress.create(tmp_path / "progress.bin")),
            # The worker knows the device; it picks its own entry of the ceilings cache.
            "ceilings_cache": ceilings_cache.load_all() if mode == "gpu" else {},
        }
        if options.get("profile_dir") and mode == "gpu":
            # Written inside the grade's folder (the only place the sandbox may write), copied
            # out by this process once the worker is done.
            request["anatomy_dir"] = str(tmp_path / "anatomy")
        request_path = tmp_path / "request.json"
        request_path.write_text(json.dumps(request))
        output_path = tmp_path / "output.txt"
        before = _fingerprints(protected)
        seen: dict[int, int] = {}
        judge = _CheckerProcess(kata, mode, seed, plan_dicts, tmp_path)
        referee = Referee(ours, judge, plan_dicts, fail_fast=options["fail_fast"],
                          keep_going=options["keep_going"], progress=options["progress"],
                          turns=options["turns"])
        # The grader's own processes are never "another process on the GPU".
        started = [judge.proc.pid]
        gpu_sharing.register(judge.proc.pid)

        def start_registered(*args):
            proc = _start_worker(*args)
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
        helpers = compile_ahead.Helpers(runs, request, tmp_path, limits, start_registered,
                                        lambda folder: _worker_env(mode, folder), referee.timeline)
        referee.case_started, referee.before_timing = helpers.case_started, helpers.stop
        how_far = ("", None)
        try:
            with open(output_path, "wb") as output:
                proc = start_registered(request_path, workdir, _worker_env(mode, tmp_path / "tmp"),
                                        output, theirs)
                theirs.close()
                referee.start()
                try:
                    breach = watchdog.watch(proc, limits, output_path, seen,
                                            extra=lambda: _overdue(referee, plan_dicts, kata, tmp_path))
                    if breach is not None and breach.kind == "time" and breach.case is None:
                        how_far = _how_far(referee, tmp_path)
                finally:
                    helpers.stop()
                    watchdog.freeze(seen)
                    _kill_group(proc)
                    watchdog.kill_all(seen)
                    ours.shutdown(socket.SHUT_RDWR)
                    referee.join(timeout=60)
                    referee.release()
            changed = [str(p) for p, fp in _fingerprints(protected).items() if fp != before.get(p)]
            killed = breach is not None or proc.returncode is None or proc.returncode < 0
            events, corrupt = _read_events(results_path, killed)
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
                         _read_output(output_path), corrupt, changed, referee.verdicts,
                         referee.timing_failures, referee.stopped_at, referee.timing_skipped,
                         referee.timeline, referee.given_up, referee.timed, referee.env,
                         referee.sandbox, referee.timing_reports, referee.retimed,
                         referee.remeasured, watch.processes, watch.method, *how_far, copied)


def _start_worker(request_path: Path, workdir: Path, env: dict, output, control: socket.socket):
    """The worker: forked by the warm start when it runs (grader.grading.warm_start), else a fresh
    Python."""
    with open(os.devnull, "rb") as devnull:
        forked = warm_start.spawn("worker", request_path, cwd=workdir, env=env, new_session=True,
                                  fds={0: devnull.fileno(), 1: output.fileno(), 2: output.fileno(),
                                       control.fileno(): control.fileno()})
    if forked is not None:
        return forked
    return subprocess.Popen(
        [sys.executable, "-m", warm_start.ROLE_MODULES["worker"], str(request_path)],
        cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
        start_new_session=True, pass_fds=(control.fileno(),), preexec_fn=_dies_with_us())


def _dies_with_us():
    """A preexec_fn that has the kernel kill the worker if this process dies (a batch worker
    killed mid-grade): nobody would be left to watch it. Linux only; None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here, not after the fork
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def arm() -> None:
        prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # we died before it was armed
            os._exit(1)

    return arm


def _how_far(referee: Referee, grade_dir: Path) -> tuple[str, bool | None]:
    """How far the case in flight had got, from the worker's progress record (a sentence), and
    whether that shows a slow kernel (True), a hang (False) or cannot tell (None)."""
    current = referee.current
    timed = referee.timed_calls(current["key"]) if current else None
    return progress.describe(progress.read(grade_dir / "progress.bin"), progress.now(), timed)


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
        f"{how_far}{advice}").replace("  ", " ").strip(), case=current["key"])


class CheckerError(Exception):
    """The checker itself failed: a fault of the kata or the grader, reported as such."""


def _fingerprints(paths) -> dict[str, tuple | None]:
    prints = {}
    for path in paths:
        try:
            st = os.stat(path)
            prints[str(path)] = (st.st_size, st.st_mtime_ns, st.st_ino)
        except OSError:
            prints[str(path)] = None
    return prints


class _CheckerProcess:
    """The checker in a process of its own, started now so that its imports (and on a GPU, CUDA's
    start-up) overlap the worker's; asked case by case over its stdin and stdout. Forked by the
    warm start, it has torch imported already: a checker in this process would import it first,
    1-1.6 s that were most of a small CPU grade (docs/PERFORMANCE.md)."""

    def __init__(self, kata: Kata, mode: str, seed: int, plan: list[dict], tmp_path: Path):
        request = {"kata_dir": str(kata.directory), "seed": seed,
                   "device": "cuda" if mode == "gpu" else "cpu", "plan": plan}
        request_path = tmp_path / "check-request.json"
        request_path.write_text(json.dumps(request))
        self.stderr = open(tmp_path / "checker-stderr.txt", "w+")
        env = _worker_env(mode, tmp_path / "tmp")
        asks_r, asks_w = os.pipe()
        answers_r, answers_w = os.pipe()
        forked = warm_start.spawn("checker", request_path, cwd=tmp_path, env=env, new_session=False,
                                  fds={0: asks_r, 1: answers_w, 2: self.stderr.fileno()})
        if forked is not None:
            os.close(asks_r)
            os.close(answers_w)
            forked.stdin = open(asks_w, "w")
            forked.stdout = open(answers_r, "r")
            self.proc = forked
            return
        for fd in (asks_r, asks_w, answers_r, answers_w):
            os.close(fd)
        self.proc = subprocess.Popen([sys.executable, "-m", warm_start.ROLE_MODULES["checker"],
                                      str(request_path)], env=env, cwd=tmp_path,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr, text=True)

    def _ask(self, request: dict) -> dict:
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except OSError:
            line = ""
        if not line:
            self.stderr.seek(0)
            told = self.stderr.read()
            # Its last line (the exception) goes first: a case's message keeps only the first
            # line, and a CUDA out-of-memory there is the machine's state, not a grader bug.
            last = next((text.strip() for text in reversed(told.splitlines()) if text.strip()), "")
            raise CheckerError(f"the checker process ended: {last or self._how_it_ended()}\n"
                               f"{told[-4000:]}")
        return json.loads(line)

    def _how_it_ended(self) -> str:
        """A checker that said nothing: its exit status, and what a SIGKILL most often means."""
        try:
            code = self.proc.wait(timeout=5)
        except Exception:  # noqa: BLE001 - still running, or its status is lost: say nothing more
            return "it said nothing"
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            if -code == signal.SIGKILL:
                return (f"killed by {name}, without a word (the system's out-of-memory killer "
                        "does this when the machine runs out of CPU memory)")
            return f"killed by {name}"
        return f"it exited with status {code} without a word"

    def check_case(self, planned, result):
        return self._ask({"op": "case", "key": planned["key"], "result": result})["result"]

    def check_samples(self, planned, samples, method, n_sets, change_keys=None):
        return self._ask({"op": "samples", "key": planned["key"], "samples": samples,
                          "method": method, "sets": n_sets, "change_keys": change_keys})["failure"]

    def measure_ceilings(self) -> dict:
        """The device's ceilings measured again, here in the checker (it never imports the
        submission): the worker waits meanwhile, so the GPU holds only what else runs there."""
        return self._ask({"op": "ceilings"})["ceilings"]

    def close(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
        self.stderr.close()


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


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill the worker and anything it started (threads, forks, compile jobs)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _read_events(path: Path, killed: bool = False) -> tuple[list[dict], int]:
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


def _read_output(path: Path) -> str:
    """The tail of what the submission printed (it may have printed gigabytes)."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - OUTPUT_LIMIT))
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    text = kernel_anatomy.without_profiler_lines(text)
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


def _channel_forgeries(events: list[dict]) -> list[str]:
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


# What a worker's timing event holds (grader.sandbox.worker.CaseRunner.time_case) and the types
# it sends. The figures the parent can work out itself (the floor and the roofline) the worker
# does not send: the parent works them out (_parent_floor).
_TIMING_TYPES = {
    "time_ms": (int, float), "baseline_ms": (int, float), "speedup": (int, float),
    "timing_method": (str,), "calls_per_sample": (int,), "samples": (int,),
    "round_speedups": (list,), "host_syncs": (int,), "host_sync_at": (str,), "warmup_ms": (list,),
    # One profiled call's kernels (grader.timing.anatomy): advice only, read by
    # grader.judge.kernel_anatomy, which drops whatever is not in the worker's form.
    "anatomy": (dict,),
}


# The fields every timing of the worker has (its Timing's), the times a finite positive number.
_TIMING_REQUIRED = ("time_ms", "baseline_ms", "speedup", "timing_method", "calls_per_sample",
                    "samples", "round_speedups")
_TIMES = ("time_ms", "baseline_ms", "speedup")


def _typed(value, types) -> bool:
    return value is None or (isinstance(value, types) and not isinstance(value, bool))


def _finite_positive(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < math.inf


def _timing_forgeries(events: list[dict], timed: set, keys: set) -> list[str]:
    """Timing events the worker cannot have written: for a case whose kept timed outputs never
    reached the referee, or not in the shape the worker writes."""
    problems = []
    for event in (e for e in events if e["type"] == "timing"):
        key, timing = event.get("key"), event.get("timing")
        if not isinstance(key, str) or key not in keys:
            problems.append("a timing for a case that is not in the plan")
        elif key not in timed:
            problems.append(f"a timing of {key}, whose timed outputs were never handed over")
        elif not _timing_form(timing):
            problems.append(f"a timing of {key} in a form the worker never writes")
    return problems


def _canonical(value) -> str:
    # As JSON text: a NaN equals itself there, as it does not as a float.
    return json.dumps(value, sort_keys=True, default=str)


def _timing_form(timing) -> bool:
    """A timing in the form the worker writes it: the fields and types of _TIMING_TYPES, every
    field a Timing always has present, and its times finite and positive (a NaN or a missing
    time is no measurement: only a forgery holds one)."""
    return isinstance(timing, dict) and all(
        k in _TIMING_TYPES and _typed(v, _TIMING_TYPES[k]) for k, v in timing.items()) \
        and all(timing.get(k) is not None for k in _TIMING_REQUIRED) \
        and all(_finite_positive(timing[k]) for k in _TIMES) \
        and all(_finite_positive(r) for r in timing["round_speedups"]) \
        and all(_finite_positive(t) or t == 0 for t in timing.get("warmup_ms") or [])


# The other events the parent reads (grader.sandbox.worker.main): the field each has, and the
# types of the fields the worker writes.
_EVENT_TYPES = {
    "start": ("key", {"key": (str,), "phase": (str,)}),
    "load_error": ("message", {"kind": (str,), "message": (str,)}),
    "fatal": ("message", {"message": (str,), "cheat": (str,)}),
    "internal_error": ("message", {"message": (str,)}),
    "timing_error": ("key", {"key": (str,), "message": (str,), "cheat": (str, type(None))}),
}


def _malformed(event: dict) -> bool:
    """An event of a kind the parent reads, not in the form the worker writes it."""
    kind = event["type"] if isinstance(event["type"], str) else None
    if kind not in _EVENT_TYPES:
        return False
    needed, types = _EVENT_TYPES[kind]
    return not isinstance(event.get(needed), str) or any(
        k != "type" and (k not in types or not isinstance(v, types[k])) for k, v in event.items())


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


def _assemble(kata: Kata, submission: Path, mode: str, seed: int, plan: list[PlannedCase],
              run: WorkerRun, limits: watchdog.ResourceLimits) -> GradeResult:
    # Events the worker never writes in that form are forgeries (named below), never read.
    malformed = [e for e in run.events if _malformed(e)]
    events = [e for e in run.events if not _malformed(e)]
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
    if run.timing_reports is not None:
        # Each timed case's outcome as the referee heard it: the submission can rewrite the events
        # file (an earlier case's speedup, a timing error it would rather hide), not the line.
        timings = {k: r["timing"] for k, r in run.timing_reports.items() if "timing" in r}
        timing_errors = {k: dict(r["error"], type="timing_error", key=k)
                         for k, r in run.timing_reports.items() if "error" in r}
    else:  # a run put together without a referee (tests)
        timing_errors = {e["key"]: e for e in events
                         if e["type"] == "timing_error" and isinstance(e.get("key"), str)}
        # Only timings of cases the referee saw timed count (the rest are forgeries, named below).
        timings = {e.get("key"): e["timing"] for e in events if e["type"] == "timing"
                   and isinstance(e.get("key"), str) and e["key"] in run.timed and isinstance(e.get("timing"), dict)}
    done = any(e["type"] == "done" for e in events)
    starts = [e for e in events if e["type"] == "start"]
    # The case the worker was on when it stopped without finishing (crash, hang, CUDA fault).
    in_progress = starts[-1] if starts and not done and not load_error else None

    grade_cheat = (fatal or {}).get("cheat")
    message = (load_error or fatal or {}).get("message", "")
    if not message and not done:
        message = _stopped_early_message(run, in_progress, bool(env), limits)
    forgeries = [f"a '{e['type']}' event in a form the worker never writes" for e in malformed] \
        + _channel_forgeries(events) + _timing_forgeries(events, run.timed, {p.key for p in plan}) \
        + [f"a timing of {key} in a form the worker never sends" for key, t in timings.items()
           if not _timing_form(t)] \
        + [f"a timing of {e['key']} in the events file other than the one the worker told"
           for e in events if e["type"] == "timing" and run.timing_reports is not None
           and e.get("key") in timings and _canonical(e.get("timing")) != _canonical(timings[e["key"]])]
    # A timing not in the worker's form measured nothing: no case takes its figures.
    timings = {key: t for key, t in timings.items() if _timing_form(t)}
    shared = gpu_shared(run, timings)
    if run.env is not None and not shared:  # nothing measured beside another process is kept
        key = ceilings_cache.cache_key(env["device"], env["versions"])
        for measured in ([env["ceilings"]] if env.get("ceilings_measured") and env.get("ceilings") else []) \
                + run.remeasured:
            ceilings_cache.save(key, measured)
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
    stop_named = False
    tasks = []
    for task in kata.tasks:
        cases = []
        for planned in (p for p in plan if p.task == task.name):
            raw = run.verdicts.get(planned.key)
            case = _case_result(planned, raw, timings.get(planned.key))
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
                detail = failure_codes.Diagnosis(stop_code, failure_codes.first_line(message)).to_dict()
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
    hidden = failure_codes.hidden_only([c for t in tasks for c in t.cases])
    if hidden:
        found, failed = hidden
        findings.diagnosis(found, _label(failed[0]), count=len(failed))
    if grade_cheat:
        findings.cheat(grade_cheat, None, message, first=True)
    elif load_error:
        findings.diagnosis(failure_codes.Diagnosis("load_error", failure_codes.first_line(message)), None)
    elif (fatal or not done) and not stop_named:
        findings.diagnosis(failure_codes.Diagnosis(stop_code, failure_codes.first_line(message)), None)
    failure_codes.attach_compiler_lines([c for t in tasks for c in t.cases], findings.diagnoses, run.output)
    cheats = findings.cheats

    speed_measured = mode == "gpu" and any(c.timed for t in tasks for c in t.cases)
    correct = not message and not cheats and tasks_correct(tasks)
    status, message = _verdict(tasks, mode, correct, message)
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


def _reject_impossible(case: CaseResult, ceilings: dict | None) -> None:
    """A time below the physical floor is a broken timer or a cheat, never a fast kernel.
    `ceilings`: the physical ones (grader.timing.ceilings.physical), never one measurement."""
    if case.cheat or not case.timed:
        return
    below = timing_evidence.impossible(case.time_ms, case.nbytes, case.flops, ceilings)
    if below:
        case.status, case.cheat, case.message = FAIL, "below_physical_floor", below


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
    # Without a referee (a run put together in tests) there was nobody to time it again.
    reproduced = suspected is not None and (
        run.timing_reports is None or (first is not None and first["reason"] == suspected[0]))
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


def _verdict(tasks: list[TaskResult], mode: str, correct: bool, message: str) -> tuple[str, str]:
    """(status, the paragraph that explains it)."""
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
    if mode == "gpu" and not meets_thresholds(tasks):
        slow = [t for t in tasks if t.pass_speedup is None or t.pass_speedup < t.threshold]
        return FAIL, "; ".join(
            f"{t.name}: speedup {t.pass_speedup:.2f}x (geomean, each case capped at "
            f"{PASS_CAP:g}x the threshold) is below the threshold {t.threshold:g}x"
            if t.pass_speedup else f"{t.name}: not timed" for t in slow)
    return PASS, ""


def _case_result(planned: PlannedCase, raw: dict | None, timing: dict | None) -> CaseResult:
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
    if timing and case.status == PASS:  # a timing in the worker's form (_assemble kept no other)
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
