"""What a batch shows while it runs and when it ends.

On a terminal: one line per finished grade, and below them a live line rewritten in place
(done, running, failed, retried, time left). Elsewhere (a log, CI): the same finished lines and
nothing rewritten. At the end: a summary table (tabulate) and the totals.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from tabulate import tabulate

from grader.batch.driver import Events, Finished
from grader.batch.engine import Job
from grader.batch.estimate import Estimate

REDRAW_S = 0.5


def duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def describe(item: Finished) -> str:
    """alice/softmax: pass, score 82/100, 1.52x, NVIDIA H200, 14.2 s"""
    r = item.result
    if item.lost:
        return f"{item.job.name}: NOT GRADED ({item.reason})"
    parts = [r.status, f"score {r.score:g}/{r.score_breakdown.max_possible:g}" if r.score_breakdown
             else f"score {r.score:g}"]
    if r.speedup:
        parts.append(f"{r.speedup:.2f}x")
    if r.cheat:
        parts.append(f"cheat: {r.cheat}")
    parts.append(r.device or "no device")
    if r.duration_s is not None:
        parts.append(f"{r.duration_s:.1f} s")
    if item.tries > 1:
        parts.append(f"{item.tries} tries")
    return f"{item.job.name}: " + ", ".join(parts)


class Progress(Events):
    """The batch's progress. The time left comes from each kata's grade time (grader.batch.
    estimate: this batch's grades, the store's earlier ones, given as HISTORY); CLOCK is
    injectable for tests."""

    def __init__(self, total: int, stream: TextIO | None = None, live: bool | None = None,
                 jobs: list[Job] | None = None, slots: int = 1, history: dict | None = None,
                 clock=time.monotonic):
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self.total = total
        self.done = self.failed = self.retried = self.running = 0
        self.clock = clock
        self.started_at = clock()
        self._drawn = 0.0
        self.slots = slots
        self.estimate = Estimate(history)
        self.pending: dict[str, str] = {job.key: job.kata for job in jobs or ()}
        self.in_flight: dict[str, tuple[str, float]] = {}  # job key: (kata, started)

    def _print(self, line: str) -> None:
        if self.live:
            self.stream.write("\r\x1b[2K")
        self.stream.write(line + "\n")
        self.stream.flush()
        self._draw(force=True)

    def started(self, job: Job, attempt: int) -> None:
        self.running += 1
        self.pending.pop(job.key, None)
        self.in_flight[job.key] = (job.kata, self.clock())
        self._draw()

    def retrying(self, job: Job, reason: str, attempt: int) -> None:
        self.running -= 1
        self.retried += 1
        self.in_flight.pop(job.key, None)
        self.pending[job.key] = job.kata
        self._print(f"{job.name}: {reason}; retrying (try {attempt})")

    def finished(self, item: Finished) -> None:
        self.running -= 1
        self.done += 1
        self.failed += item.result.status != "pass"
        kata, started = self.in_flight.pop(item.job.key, (item.job.kata, None))
        if started is not None and not item.lost:
            self.estimate.ended(kata, self.clock() - started, item.result.device)
        self._print(f"[{self.done}/{self.total}] {describe(item)}")

    def tick(self, running: int) -> None:
        self.running = running
        self._draw()

    def time_left(self) -> float | None:
        """Seconds until the batch ends, or None while estimating."""
        if not self.pending and not self.in_flight:
            return None if self.done < self.total else 0.0  # no jobs given: nothing to go on
        now = self.clock()
        return self.estimate.left(list(self.pending.values()),
                                  [(kata, now - started) for kata, started in self.in_flight.values()],
                                  self.slots)

    def status(self) -> str:
        elapsed = self.clock() - self.started_at
        seconds = self.time_left()
        left = "estimating time left" if seconds is None else f"~{duration(seconds)} left"
        retried = f", {self.retried} retried" if self.retried else ""
        return (f"  {self.done}/{self.total} done, {self.running} running, {self.failed} failed"
                f"{retried}; {duration(elapsed)} elapsed, {left}")

    def _draw(self, force: bool = False) -> None:
        if not self.live or (not force and self.clock() - self._drawn < REDRAW_S):
            return
        self._drawn = self.clock()
        self.stream.write("\r\x1b[2K" + self.status()[:150])
        self.stream.flush()

    def close(self) -> None:
        if self.live:
            self.stream.write("\r\x1b[2K")
            self.stream.flush()


def summary_table(items: list[Finished]) -> str:
    rows = []
    for item in sorted(items, key=lambda i: (i.job.handle, i.job.kata)):
        r = item.result
        rows.append([item.job.handle, item.job.kata, "not graded" if item.lost else r.status,
                     f"{r.score:g}", f"{r.speedup:.2f}x" if r.speedup else "-",
                     f"{100 * r.roofline:.0f}%" if r.roofline else "-",
                     r.device or "-", "-" if r.duration_s is None else f"{r.duration_s:.1f}",
                     item.tries])
    return tabulate(rows, headers=["handle", "kata", "status", "score", "speedup", "roofline",
                                   "device", "seconds", "tries"])
