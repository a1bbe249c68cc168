"""The grading worker: a child process that imports the submission and runs the planned cases.

Started by grader.grading.runner as `python -m grader.sandbox.worker REQUEST.json`. Before the
submission is imported it measures the device, snapshots the grader (grader.sandbox.integrity),
wraps Triton's launchers (grader.sandbox.launches) and locks itself down
(grader.sandbox.lockdown). Then, per case, it calls the submission twice (fresh inputs, then new
contents in the same buffers), checks what only a live process can see (exceptions, forbidden ops,
kernel launches, threads and streams, output types, aliasing, changed inputs, guard bands) and saves
the outputs; whether the values are right is decided by grader.judge.checker, which never imports
the submission. On a GPU it then times the submission against the baseline (grader.timing.timer) and
saves the outputs of sampled timed calls. What it does in one case is grader.sandbox.case_runner's;
what it says to the parent, and in what form, grader.sandbox.protocol's.

It reports through a results file named in the request, one JSON event per line, flushed as it
goes, so the parent knows how far it got if the submission crashes or hangs the process. The
submission's own stdout and stderr go to a file the parent shows as "output"; never parsed.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import sys
import time
import traceback
from pathlib import Path

import torch
import triton

from grader.kata import memory_budget
from grader.kata.format import load_kata
from grader.kata.gpu_memory_fit import shortfall
from grader.profiling import run_maybe_profiled
from grader.sandbox import integrity, interpreter_autotune, launches, lockdown, progress, protocol
from grader.sandbox.case_runner import (CaseProblem, CaseRunner, FatalCudaError, TamperingError, is_cuda_fault,
                                        user_traceback)
from grader.sandbox.torch_compute import install_op_checks
from grader.sandbox.worker_line import ParentGone, ParentLine
from grader.timing import sizing
from grader.timing.ceilings import cache_key, far_off
from grader.timing.timer import measure_ceilings


RETIME_PAUSE_S = 0.5  # the idle time before a suspect case is timed again


class Reporter:
    def __init__(self, path: str):
        # Opened before the submission is imported. Its path is in the request file, which the
        # submission could read: the runner voids a grade whose events it did not write itself.
        self._file = open(path, "a", buffering=1)

    def emit(self, event: protocol.Event) -> None:
        self._file.write(json.dumps(event.to_dict(), default=str) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())


def load_submission(path: Path):
    """Import the submission as module 'solution'; raises SubmissionLoadError with a clear text."""
    spec = importlib.util.spec_from_file_location("solution", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["solution"] = module
    sys.path.insert(0, str(path.parent))  # let it import helpers that sit beside it
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        where = f"{Path(exc.filename or path).name}, line {exc.lineno}"
        detail = f"\n    {exc.text.rstrip()}" if exc.text else ""
        if exc.text and exc.offset:
            detail += "\n    " + " " * (exc.offset - 1 - (len(exc.text) - len(exc.text.lstrip()))) + "^"
        raise SubmissionLoadError("syntax", f"Syntax error in {where}: {exc.msg}{detail}") from None
    except BaseException as exc:  # noqa: BLE001 - anything the import raises is the user's
        if isinstance(exc, SystemExit):
            raise SubmissionLoadError("import", f"{path.name} called sys.exit({exc.code}) while being imported") from None
        raise SubmissionLoadError(
            "import", f"Importing {path.name} raised an exception:\n{user_traceback(exc, path)}"
        ) from None
    return module


class SubmissionLoadError(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message


def check_entry(module, task, path: Path):
    fn = getattr(module, task.name, None)
    if fn is None:
        defined = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
                         and getattr(v, "__module__", None) == "solution")
        found = f" It defines: {', '.join(defined)}." if defined else ""
        raise SubmissionLoadError(
            "missing_entry",
            f"{path.name} has no function '{task.name}': the kata calls {task.signature}.{found}")
    if not callable(fn) or isinstance(fn, type):
        raise SubmissionLoadError("missing_entry", f"'{task.name}' in {path.name} is not a function")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return fn
    try:
        sig.bind(*task.args)
    except TypeError as exc:
        raise SubmissionLoadError(
            "signature",
            f"{task.name}{sig} in {path.name} has the wrong signature: the kata calls "
            f"{task.signature}, passing {len(task.args)} positional argument(s) "
            f"({', '.join(task.args)}); Python says: {exc}") from None
    return fn


def _lock_down(request: protocol.Request, device: str) -> dict:
    """The sandbox, in force from here on for this process and its children: what held and how
    (grader.sandbox.confine)."""
    from grader.sandbox import confine

    if device == "cuda":
        lockdown.limit_gpu_memory(request.gpu_memory_fraction)
    status = confine.lock_down(Path(request.grade_dir), Path(request.submission), device)
    if device == "cuda":
        status["gpu_memory_fraction"] = request.gpu_memory_fraction
    return status


def main(request_path: str) -> int:
    request = protocol.Request.read(request_path)
    reporter = Reporter(request.results)
    line = ParentLine(int(request.control_fd))
    submission = Path(request.submission)
    mode = request.mode
    device = "cuda" if mode == "gpu" else "cpu"
    if device == "cpu":
        # The checker runs beside this process, on the same cores: torch's default of a thread per
        # core each makes their threads wait on one another (a warm softmax grade took 2-7x the
        # time on a busy 2-core machine). The interpreter's cases are small: one thread each.
        torch.set_num_threads(1)
    versions = {"python": sys.version.split()[0], "torch": torch.__version__, "triton": triton.__version__}
    device_name = torch.cuda.get_device_name(0) if device == "cuda" else "CPU (Triton interpreter)"
    ceilings, measured = None, False
    # A compile-ahead helper (grader.grading.compile_ahead): it runs cases only to fill Triton's
    # cache, and nobody reads its results; it measures nothing and runs no baseline.
    warm_up = bool(request.warm_up)
    note, cache = None, {}
    if device == "cuda":
        cache = (request.ceilings_cache or {})
        ceilings = cache.get(cache_key(device_name, versions))
        off = far_off(ceilings, device_name, cache)
        if off and not warm_up:  # measured on a busy GPU, most likely: not this device's ceilings
            note = f"the cached ceilings were far below what this device reaches ({'; '.join(off)}): measured again"
            ceilings = None
    if device == "cuda" and not ceilings and not warm_up:
        # Measured before the submission is imported, so nothing it does can skew them.
        ceilings, measured = measure_ceilings(), True
        still = far_off(ceilings, device_name, cache)
        if still:  # said in the report; the parent keeps nothing measured on a shared GPU
            note = ((note + "; ") if note else "") + (
                f"measured now, still far below ({'; '.join(still)}): something else is probably using the GPU")
    env = {"device": device_name, "versions": versions, "ceilings": ceilings, "ceilings_measured": measured}
    if device == "cuda":  # which GPU: the parent looks for other processes on it
        env["gpu_uuid"] = str(getattr(torch.cuda.get_device_properties(0), "uuid", "") or "") or None
    if note:
        env["ceilings_note"] = note
    # Told to the parent on the line before the submission is imported: the events file is open
    # to the submission later, the line's past is not, and the roofline floor rests on these.
    line.ask(protocol.EnvOp(**env))
    reporter.emit(protocol.Env(env))

    kata = load_kata(Path(request.kata_dir))
    too_small = shortfall(kata, torch.cuda.get_device_properties(0).total_memory) if device == "cuda" else None
    spec_module = _import_path("kata_spec", kata.spec_path)
    if request.progress and not warm_up:
        progress.record.open(request.progress)
    progress.install()  # before launches: its wrappers go on top, where it checks for them
    launches.install()
    if device == "cpu":  # no driver to time configurations with: the first one runs
        interpreter_autotune.install()
    install_op_checks()
    from triton.runtime.autotuner import Autotuner
    memory_budget.exclude_from_meter(Autotuner, "_bench")  # autotuning is Triton's, not the design
    snapshot = integrity.Snapshot()
    snapshot.watch("the worker's line to the grader", line)
    snapshot.watch("the worker's events file", reporter)
    sandbox = _lock_down(request, device)
    line.ask(protocol.SandboxOp(sandbox))  # before the import, like the environment
    reporter.emit(protocol.Sandbox(sandbox))
    try:
        module = load_submission(submission)
        entries = {t.name: check_entry(module, t, submission) for t in kata.tasks}
    except SubmissionLoadError as exc:
        reporter.emit(protocol.LoadError(exc.kind, exc.message))
        return 0

    outdir = Path(request.outputs)
    runners = {t.name: CaseRunner(spec_module, t, entries[t.name], submission, device,
                                  request.seed, outdir, snapshot, too_small) for t in kata.tasks}
    for runner in runners.values():
        runner.anatomy_dir = request.anatomy_dir
    plan = [p for p in request.plan if not p["skip_reason"]]
    failed_tasks: set[str] = set()
    try:
        given_up: set[str] = set()  # tasks whose remaining cases the parent said to skip
        for planned in plan:
            if planned["task"] in given_up:
                continue
            runner = runners[planned["task"]]
            reporter.emit(protocol.Start(planned["key"]))
            progress.record.begin(progress.BASELINE)
            # The case's turn on the GPU starts before the baseline is run to set its limit: a
            # grade timing beside this one (selftest) must not share the GPU with it either. The
            # limit is the parent's to set (grader.sandbox.referee), from the baseline's time.
            line.ask(protocol.StartOp(planned["key"], "case"))
            if not warm_up:
                line.ask(protocol.StartOp(planned["key"], "case", baseline_s=runner.baseline_s(planned)))
            result = runner.run_case(planned)
            if result["status"] != "ran":
                failed_tasks.add(planned["task"])
            reporter.emit(protocol.Case(planned["key"], result))
            answer = line.ask(protocol.CaseOp(planned["key"], result))
            runner.release(result.get("outputs") or {})
            if answer.get("stop"):
                break
            if answer.get("skip_task"):  # never with --keep-going, so nothing is timed after it
                given_up.add(planned["task"])
        # Correctness first: a submission that is already wrong is not timed (unless asked).
        if device == "cuda" and line.ask(protocol.TimeOp()).get("time"):
            budget_ms = sizing.case_budget_ms(sum(1 for p in plan if p["bench"] and p["task"] not in failed_tasks))
            for planned in plan:
                if planned["bench"] and planned["task"] not in failed_tasks:
                    reporter.emit(protocol.Start(planned["key"], "timing"))
                    limit_s = line.ask(protocol.StartOp(planned["key"], "timing")).get("limit_s")
                    # Each outcome goes to the parent on the line first: the events file is open
                    # to the submission, which could rewrite an earlier case's timing there.
                    try:
                        started = time.perf_counter()
                        timing = runners[planned["task"]].time_case(planned, line, budget_ms, limit_s)
                        # A timing the parent finds suspect is timed again before it names anything.
                        while line.ask(protocol.TimedOp(planned["key"], timing=timing)).get("again"):
                            # Under the first timing's conditions: it followed a pause (the checked
                            # calls, the parent's checks), so a stall a pause sets off shows again.
                            time.sleep(RETIME_PAUSE_S)
                            started = time.perf_counter()
                            timing = runners[planned["task"]].time_case(planned, line, budget_ms, limit_s)
                    except CaseProblem as problem:
                        error = {"message": problem.message, "cheat": problem.cheat}
                        line.ask(protocol.TimedOp(planned["key"], error=error))
                        reporter.emit(protocol.TimingError(planned["key"], **error))
                        continue
                    except (TamperingError, FatalCudaError, ParentGone):
                        raise
                    except Exception as exc:  # noqa: BLE001 - the submission failed while timed
                        text = user_traceback(exc, submission)
                        if is_cuda_fault(exc):
                            raise FatalCudaError(text) from None
                        error = {"message": f"failed while being timed:\n{text}", "cheat": None}
                        line.ask(protocol.TimedOp(planned["key"], error=error))
                        reporter.emit(protocol.TimingError(planned["key"], **error))
                        continue
                    # Then the anatomy of the final timing (advice only), within the timing's limit.
                    found = runners[planned["task"]].anatomy_of(planned, timing["time_ms"], limit_s,
                                                                time.perf_counter() - started)
                    line.ask(protocol.AnatomyOp(planned["key"], found))
                    if found is not None:
                        timing = dict(timing, anatomy=found)
                    reporter.emit(protocol.Timing(planned["key"], timing))
    except FatalCudaError as exc:
        reporter.emit(protocol.Fatal(f"CUDA fault (the GPU context is lost, so the "
                                     f"remaining cases could not run):\n{exc}"))
        return 0
    except ParentGone:
        return 0
    except TamperingError as exc:
        reporter.emit(protocol.Fatal(
            "The submission patched the grader, its timer or its checker: " + ", ".join(exc.changed[:8])
            + (" ..." if len(exc.changed) > 8 else "") + ". Nothing it reported can be trusted.", cheat="tampering"))
        return 0
    reporter.emit(protocol.Done())
    return 0


def _import_path(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_process(request_path: str) -> int:
    """The worker process's whole life (`python -m grader.sandbox.worker REQUEST`, or forked by the
    warm start): the exit code is 0 unless the process died first; what happened is in the events."""
    results = protocol.Request.read(request_path).results  # unreadable after the lockdown
    try:
        code = run_maybe_profiled(lambda: main(request_path), "KATA_WORKER_PROFILE")
    except Exception:  # noqa: BLE001 - a fault of the grader or the kata, not of the submission
        Reporter(results).emit(protocol.InternalError(traceback.format_exc()))
        code = 0
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: a submission's atexit hooks or threads must not change the verdict.
    os._exit(code)


if __name__ == "__main__":
    run_process(sys.argv[1])
