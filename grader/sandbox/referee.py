"""The parent's end of the worker's line (a thread of the trusted grading process): the worker
asks, the parent decides.

A socket pair, inherited by the worker (its end: grader.sandbox.worker_line; the forms of what
it says: grader.sandbox.protocol). The worker announces each case (and the baseline's time, from
which the parent sets the case's deadline), hands over each case's outputs and waits for the
verdict, asks whether to time at all, and during timing asks after every call whether to keep its
outputs. The parent side (`Referee`, a thread of the grading process) answers from what only it
knows: the deadlines, the checker's verdicts and the secret choice of which timed calls are
verified, drawn from the operating system's randomness in this process, never in the worker's.

Every question is answered once: a question asked twice (the submission reading ahead on the
worker's socket) voids the grade. The one exception is the parent's own: a timing it finds
suspect it answers with "again", and the case's timing questions start afresh, once.
"""

from __future__ import annotations

import json
import secrets
import socket
import threading
import time

from grader.kata.time_limits import CASE_CAP_S, case_limit_s, timing_limit_s
from grader.sandbox import protocol

SAMPLED = 3  # timed calls per bench case whose outputs are verified


# A task's remaining cases are not run once this many of its cases have failed (unless
# --keep-going): a wrong submission's verdict in seconds, with enough failures to diagnose.
FAILURES_PER_TASK = 3

# The forgery each op's request is named, out of turn or out of its op's form alike ("case" and
# "sample" say more: Referee._case_out_of_turn, _on_sample).
FORGED = {
    "env": "the worker's environment told twice, late or malformed",
    "sandbox": "the worker's lockdown told twice, late or malformed",
    "timing": "timing of {key} announced twice or malformed",
    "samples": "the kept timed outputs of {key} are not the ones the grader chose",
    "timed": "the timing of {key} told twice, out of turn or malformed",
    "anatomy": "the anatomy of {key} told twice, out of turn or malformed",
}


class Referee(threading.Thread):
    """The parent's end, serving one worker. `judge` has check_case(planned, result) and
    check_samples(planned, samples, method, n_sets); `progress(event)` hears what happens.
    `turns` (grader.grading.selftest.GpuTurns): grades sharing one GPU take turns to time.
    `mode` and `case_cap_s` (`--timeout`) set each case's deadline, which the Referee owns
    (grader.kata.time_limits): the worker tells only the baseline's time it measured."""

    def __init__(self, sock: socket.socket, judge, plan: list[dict], *, fail_fast: bool = False,
                 keep_going: bool = False, progress=None, sampled: int = SAMPLED,
                 turns=None, mode: str = "interpret", case_cap_s: float | None = None):
        super().__init__(daemon=True, name="kata-referee")
        self.sock, self.judge = sock, judge
        self.plan = {p["key"]: p for p in plan}
        self.fail_fast, self.keep_going = fail_fast, keep_going
        self.progress = progress or (lambda event: None)
        self.sampled = sampled
        self.verdicts: dict[str, dict] = {}
        self.timeline: list[tuple[float, str, str]] = []  # (when, op, key): where a grade's time goes
        self.timing_failures: dict[str, dict] = {}
        self.forgeries: list[str] = []
        self.errors: list[str] = []  # the checker's own failures (a fault of the kata or grader)
        self.stopped_at: str | None = None  # the failing case --fail-fast stopped at
        # Tasks given up on after FAILURES_PER_TASK failing cases: {task: failures}.
        self.given_up: dict[str, int] = {}
        self._failures: dict[str, int] = {}
        self.timing_skipped = False
        self.current: dict | None = None  # the case in flight: key, phase, started, limit_s
        self._anatomies: set[str] = set()  # the timed cases whose anatomy was told
        self._chosen: dict[str, dict[int, int]] = {}
        self._asked: dict[str, set[int]] = {}
        self._change_keys: dict[str, list[int]] = {}  # per case, the key sent for each timed call
        self._timing_calls: dict[str, int] = {}  # per case, the timed calls announced
        # Cases whose kept timed outputs were handed over (every case the worker times hands
        # them over, none or some): a timing reported for any other case was not the worker's.
        self.timed: set[str] = set()
        # Each timed case's outcome as the worker told it, {"timing": {...}} or {"error": {message,
        # cheat}}: the parent reads these, not the events file, which the submission can rewrite.
        self.timing_reports: dict[str, dict] = {}
        self._timing_started: set[str] = set()
        # What the worker measured and ran on, told before it imported the submission.
        self.env: dict | None = None
        self.sandbox: dict | None = None  # and how it was locked down (grader.sandbox.lockdown)
        self._random = secrets.SystemRandom()
        self._lock = threading.Lock()
        self._turns, self._timing_held, self._in_case = turns, False, False
        # Hooks of the grade's compile-ahead helpers (grader.grading.compile_ahead): told of each
        # checked case the worker starts, and called before timing, which needs the GPU alone.
        self.case_started = lambda key: None
        self.before_timing = lambda: None
        # Evidence from timings must reproduce (docs/SCORING.md, "Evidence from timings"): the
        # grading parent's `suspect(key, timing)` says what a timing would accuse the submission
        # of, ((reason, message) or None), and a suspect timing is timed again before anything is
        # named. `retimed` keeps each first suspect timing: {key: {reason, message, timing}};
        # `remeasured` the ceilings the checker measured again before a floor was re-judged.
        self.suspect = lambda key, timing: None
        self.retimed: dict[str, dict] = {}
        self.remeasured: list[dict] = []
        # Told when the GPU could be shared ("env", "time", "timed"): the parent looks for other
        # processes on it (grader.grading.gpu_sharing).
        self.look_at_gpu = lambda when: None
        self._timing_limits: dict[str, float] = {}
        self.mode, self.case_cap_s = mode, case_cap_s
        self._limited_tasks: set[str] = set()  # tasks whose first case's limit was set (it compiles)

    # -- the thread ------------------------------------------------------------------------
    def run(self) -> None:
        reader, writer = self.sock.makefile("rb"), self.sock.makefile("wb")
        try:
            for line in reader:
                try:
                    request = json.loads(line)
                    answer = self.answer(request) if isinstance(request, dict) else None
                except (ValueError, TypeError):  # junk where a key or a number belongs
                    answer = None
                if answer is None:
                    self.forgeries.append("a malformed request on the grader's line")
                    answer = {}
                writer.write((json.dumps(answer) + "\n").encode())
                writer.flush()
        except OSError:
            pass

    def overdue(self, grace_s: float = 0.0) -> dict | None:
        """The case in flight, if it has run past its limit (lengthened by grace_s)."""
        with self._lock:
            current = self.current
        if current and time.monotonic() - current["started"] > current["limit_s"] + grace_s:
            return current
        return None

    def timed_calls(self, key: str) -> tuple[int, int] | None:
        """(timed calls the worker has asked about, calls announced) of a case being timed."""
        calls = self._timing_calls.get(key)
        return (len(self._asked.get(key, ())), calls) if calls else None

    # -- the answers -----------------------------------------------------------------------
    def answer(self, request: dict) -> dict | None:
        """The answer to a request (None: a malformed request). Each is read with its op's record
        (grader.sandbox.protocol); one not in its op's form gets `_out_of_form`'s answer."""
        op, key = request.get("op"), request.get("key")
        self.timeline.append((time.monotonic(), op, key))
        if op not in protocol.GRADE_OPS + protocol.CASE_OPS:
            return None
        if op not in protocol.GRADE_OPS and key not in self.plan:
            return None
        record = protocol.OPS[op].from_dict(request)
        if record is None:
            return self._out_of_form(op, key, request)
        return getattr(self, f"_on_{op}")(record)

    def _out_of_form(self, op: str, key, request: dict) -> dict | None:
        """A request not in its op's form (the submission's, which shares the worker's process):
        a forgery, named as its op's handler names one out of turn, and answered alike."""
        if op == "start":
            return None  # a malformed request
        if op == "case":
            result = request.get("result")
            self.forgeries.append(self._case_out_of_turn(key, result) or (
                # Only the checker says "pass", and the worker sends its result in one form.
                f"a result for {key} that the worker never sends (status {str(result.get('status'))[:40]!r})"))
            return {"ok": False, "stop": True}
        if op == "sample":
            return self._sample_refused(key, request.get("call"))
        if op == "samples":
            # The chosen calls first, as ever: sets that are not even a number leave the choice
            # unreadable (a TypeError: a malformed request).
            self._chosen_samples(key, request.get("method"), request.get("sets"))
        return self._refused(op, key)

    def _refused(self, op: str, key) -> dict:
        self.forgeries.append(FORGED[op].format(key=key))
        return {}

    def _limit_s(self, key: str, phase, baseline_s) -> float:
        """The case's deadline, worked out here: the timing's, the cap until the baseline's time is
        known, then the case's own (a task's first case compiles: it gets more). A worker's
        claim of the baseline's time is bounded by the cap (CASE_CAP_S, or `--timeout`)."""
        if phase == "timing":  # told without a baseline's time (protocol.StartOp)
            return timing_limit_s(self.case_cap_s)
        if baseline_s is None:
            return float(self.case_cap_s or CASE_CAP_S)
        task = self.plan[key].get("task")
        first = task not in self._limited_tasks
        self._limited_tasks.add(task)
        return case_limit_s(self.mode, first, float(baseline_s), self.case_cap_s)

    def _on_start(self, start: protocol.StartOp):
        key, phase = start.key, start.phase
        limit = self._limit_s(key, phase, start.baseline_s)
        if self._turns is not None and phase == "case" and not self._in_case:
            self._turns.case_begin()  # the case's clock starts once it has its turn
            self._in_case = True
        with self._lock:
            again = self.current is not None and (self.current["key"], self.current["phase"]) == (key, phase)
            if again:  # the limit, now known (the worker starts a case before it times the baseline)
                self.current["limit_s"] = float(limit)
            else:
                self.current = {"key": key, "phase": phase, "started": time.monotonic(),
                                "limit_s": float(limit)}
        if not again:
            self.progress({"type": "start", "key": key, "phase": phase})
            if phase == "case":
                self.case_started(key)
        if phase == "timing":
            self._timing_started.add(key)
            self._timing_limits[key] = float(limit)
        return {"limit_s": limit}

    def _on_env(self, env: protocol.EnvOp):
        if self.env is not None or len(self.timeline) > 1:
            return self._refused("env", None)
        self.env = env.heard()
        self.look_at_gpu("env")  # the ceilings were measured just now
        return {}

    def _on_sandbox(self, sandbox: protocol.SandboxOp):
        # Second on the line, right after the environment.
        if self.sandbox is not None or self.env is None or len(self.timeline) != 2:
            return self._refused("sandbox", None)
        self.sandbox = sandbox.status
        return {}

    def _on_timed(self, timed: protocol.TimedOp):
        key, timing, error = timed.key, timed.timing, timed.error
        # After the case's timing started; a timing also only once its kept outputs came.
        in_flight = key in self._timing_started and (timing is None or key in self.timed)
        if key in self.timing_reports or not in_flight:
            return self._refused("timed", key)
        if timing is not None:
            self.look_at_gpu("timed")
            if key not in self.retimed and self._retime(key, timing):
                return {"again": True}
        self.timing_reports[key] = {"timing": timing} if timing is not None else \
            {"error": {"message": error["message"], "cheat": error.get("cheat")}}
        if timing is None:  # else the timing's limit goes on through the anatomy's call (_on_anatomy)
            self._case_over(key)
        return {}

    def _on_anatomy(self, told: protocol.AnatomyOp):
        # Once per timed case, right after its final timing; attached to the timing as heard.
        key, anatomy = told.key, told.anatomy
        report = self.timing_reports.get(key) or {}
        if "timing" not in report or key in self._anatomies:
            return self._refused("anatomy", key)
        self._anatomies.add(key)
        if anatomy is not None:
            report["timing"] = dict(report["timing"], anatomy=anatomy)
        self._case_over(key)
        return {}

    def _case_over(self, key: str) -> None:
        with self._lock:
            if self.current is not None and self.current["key"] == key:
                self.current = None  # the case's timing is over

    def _retime(self, key: str, timing: dict) -> bool:
        """A first timing the parent finds suspect: keep it, re-measure the ceilings first where
        a floor is in question (in the checker, a trusted process, while the worker waits), and
        have the case timed afresh, from a new choice of kept calls and new input changes."""
        try:
            suspected = self.suspect(key, timing)
        except Exception as exc:  # noqa: BLE001 - the parent's own fault: judge it at the end
            self.errors.append(f"judging the timing of {key}: {type(exc).__name__}: {exc}")
            return False
        if not suspected:
            return False
        reason, message = suspected
        self.retimed[key] = {"reason": reason, "message": message, "timing": timing}
        if reason == "below_physical_floor":
            try:
                fresh = self.judge.measure_ceilings()
            except Exception as exc:  # noqa: BLE001 - the GPU full, say: the second timing still decides
                self.retimed[key]["ceilings_not_remeasured"] = f"{type(exc).__name__}: {exc}"[:300]
            else:
                if isinstance(fresh, dict):
                    self.remeasured.append(fresh)
        for kept in (self._chosen, self._asked, self._change_keys):
            kept.pop(key, None)
        with self._lock:  # the second timing gets the case's timing limit afresh
            self.current = {"key": key, "phase": "timing", "started": time.monotonic(),
                            "limit_s": self._timing_limits.get(key, 60.0)}
        self.progress({"type": "start", "key": key, "phase": "timing", "again": True})
        return True

    def _case_out_of_turn(self, key: str, result) -> str | None:
        """Why a case's result comes out of turn: a second one (or none at all), or one for
        another case than the one being run."""
        if key in self.verdicts or not isinstance(result, dict):
            return f"a second result for {key}"
        with self._lock:
            current = self.current
        if current is None or (current["key"], current["phase"]) != (key, "case"):
            return f"a result for {key}, which was not the case being run"
        return None

    def _on_case(self, case: protocol.CaseOp):
        key, result = case.key, case.result
        out_of_turn = self._case_out_of_turn(key, result)
        if out_of_turn:
            self.forgeries.append(out_of_turn)
            return {"ok": False, "stop": True}
        # Which case it is comes from the plan, never from the worker's message.
        planned = self.plan[key]
        result = dict(result, task=planned.get("task"), name=planned.get("case"),
                      dtype=planned.get("dtype"), hidden=bool(planned.get("hidden")))
        failures = len(self.errors)
        verdict = self._judge("check_case", key, planned, result)
        if verdict is None:
            why = self.errors[failures].splitlines()[0] if len(self.errors) > failures else "no verdict"
            verdict = dict(result, status="error", outputs=None,
                           message=f"the outputs of this case could not be checked: {why}")
        verdict.pop("outputs", None)
        self.verdicts[key] = verdict
        self._end_case()
        ok = verdict.get("status") == "pass"
        stop = self.fail_fast and not ok
        if stop:
            self.stopped_at = key
        skip_task = False
        if not ok and not self.keep_going:
            task = self.plan[key]["task"]
            self._failures[task] = self._failures.get(task, 0) + 1
            if self._failures[task] >= FAILURES_PER_TASK:
                # The verdict is in; more failing cases of this task cost seconds and say little.
                skip_task = True
                self.given_up[task] = self._failures[task]
        with self._lock:
            self.current = None
        self.progress({"type": "case", "key": key, "status": verdict.get("status")})
        return {"ok": ok, "stop": stop, "skip_task": skip_task}

    def _on_time(self, time_op: protocol.TimeOp):
        failed = [k for k, v in self.verdicts.items() if v.get("status") != "pass"]
        go = self.keep_going or not failed
        self.timing_skipped = not go
        self._end_case()
        if go:
            self.before_timing()
            self.look_at_gpu("time")
        if go and self._turns is not None and not self._timing_held:
            self.progress({"type": "start", "key": "(waiting for the GPU)", "phase": "timing"})
            self._turns.timing_begin()  # no other grade's cases run while this one times
            self._timing_held = True
        return {"time": go}

    def _end_case(self) -> None:
        if self._in_case:
            self._in_case = False
            self._turns.case_end()

    def release(self) -> None:
        """The worker is gone: give back whatever turn this grade held."""
        self._end_case()
        if self._timing_held:
            self._timing_held = False
            self._turns.timing_end()

    def _on_timing(self, timing: protocol.TimingOp):
        key, calls, sets = timing.key, timing.calls, timing.sets
        if key in self._chosen:
            return self._refused("timing", key)
        self._timing_calls[key] = calls
        picked = self._random.sample(range(calls), min(self.sampled, calls))
        self._chosen[key] = {call: self._random.randrange(sets) for call in picked}
        self._asked[key] = set()
        # Each call's input change is drawn here and sent one call ahead (grader.timing.perturb):
        # nothing in the worker's memory says what a later call's inputs will be.
        self._change_keys[key] = [self._random.getrandbits(63)]
        return {"change_key": self._change_keys[key][0]}

    def _on_sample(self, sample: protocol.SampleOp):
        key, call = sample.key, sample.call
        asked = self._asked.get(key)
        if asked is None or call in asked:
            return self._sample_refused(key, call)
        asked.add(call)
        self._change_keys[key].append(self._random.getrandbits(63))
        return {"set": self._chosen[key].get(call), "change_key": self._change_keys[key][-1]}

    def _chosen_samples(self, key: str, method, n_sets) -> set:
        """The (call, set) of each kept timed output the worker must hand over: the calls chosen
        and asked about. Call by call, a call runs on its own set (call % sets); a graph replay
        runs them all and the parent chose which set's outputs to keep."""
        chosen = self._chosen.get(key, {})
        asked = self._asked.get(key, set())
        return {(call, s if method == "cuda_graph" else call % max(1, n_sets or 1))
                for call, s in chosen.items() if call in asked}

    def _sample_refused(self, key: str, call) -> dict:
        self.forgeries.append(f"timed call {call} of {key} asked about twice, or out of turn")
        return {"set": None}

    def _on_samples(self, handed: protocol.SamplesOp):
        key, samples, method, n_sets = handed.key, handed.samples, handed.method, handed.sets
        expected = self._chosen_samples(key, method, n_sets)
        if {(s.get("call"), s.get("set")) for s in samples} != expected or len(samples) != len(expected):
            return self._refused("samples", key)
        self.timed.add(key)
        failure = self._judge("check_samples", key, self.plan[key], samples, method, n_sets,
                              self._change_keys.get(key))
        if failure:
            self.timing_failures[key] = failure
        # The case's limit stays in force until its timing is told ("timed"): the worker still
        # calls the submission once more, profiled (grader.timing.anatomy), before it tells it.
        self.progress({"type": "timed", "key": key})
        return {}

    def _judge(self, what: str, key: str, *args):
        try:
            return getattr(self.judge, what)(*args)
        except Exception as exc:  # noqa: BLE001 - the checker's fault, reported as an internal error
            self.errors.append(f"{what} {key}: {type(exc).__name__}: {exc}")
            return None
