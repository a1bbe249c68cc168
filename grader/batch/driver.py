"""The driver's loop: keep every slot busy, record each result the moment it arrives, retry a
grade whose process or node died (at most MAX_TRIES tries in all), and account for every job.

The driver is the one writer of the results store: the grading processes send their results
back, and `record` (grader.batch.ledger.record) stores each before the next is awaited. A grade
is recorded once, as a result or, when every try died or the grader itself failed, as an error
with the reason: nothing is lost, and nothing is counted twice.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass
from typing import Callable

from grader.batch.engine import Job
from grader.results.schema import GradeResult

MAX_TRIES = 3  # the first try and two retries
TICK_S = 0.5  # how often the progress line is redrawn while nothing finishes


@dataclass
class Finished:
    job: Job
    result: GradeResult
    tries: int
    lost: bool = False  # not graded: every try died, or the grader failed
    reason: str = ""  # why, when lost
    where: str = ""  # the GPU or node it ran on, when the engine knows


class Events:
    """What the driver tells the progress display; every method may be left as it is."""

    def started(self, job: Job, attempt: int) -> None: ...
    def retrying(self, job: Job, reason: str, attempt: int) -> None: ...
    def finished(self, item: Finished) -> None: ...
    def tick(self, running: int) -> None: ...


def run_batch(jobs: list[Job], engine, record: Callable[[Finished], None],
              lost: Callable[[Job, str, int], GradeResult], events: Events | None = None,
              max_tries: int = MAX_TRIES) -> list[Finished]:
    """Grade `jobs` on `engine` (grader.batch.engine: slots, submit, wait, close), at most
    engine.slots at a time. record(item) stores a finished job and may raise, which stops the
    batch; lost(job, reason, tries) builds the error result of a job that could not be graded.
    The engine is closed on the way out, whatever happens (Ctrl-C included)."""
    events = events or Events()
    pending = deque(jobs)
    tries: Counter[str] = Counter()
    running: dict = {}
    finished: list[Finished] = []
    try:
        while pending or running:
            while pending and len(running) < engine.slots:
                job = pending.popleft()
                tries[job.key] += 1
                running[engine.submit(job)] = job
                events.started(job, tries[job.key])
            for handle, outcome in engine.wait(TICK_S):
                job = running.pop(handle)
                if outcome.kind == "crash" and tries[job.key] < max_tries:
                    events.retrying(job, outcome.reason, tries[job.key] + 1)
                    pending.appendleft(job)  # next free slot: on a cluster, wherever Ray places it
                    continue
                if outcome.kind == "result":
                    item = Finished(job, outcome.result, tries[job.key], where=outcome.where)
                else:
                    item = Finished(job, lost(job, outcome.reason, tries[job.key]), tries[job.key],
                                    lost=True, reason=outcome.reason, where=outcome.where)
                record(item)
                finished.append(item)
                events.finished(item)
            events.tick(len(running))
    finally:
        engine.close()
    return finished
