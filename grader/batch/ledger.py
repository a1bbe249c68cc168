"""A batch in the results store: its label, each submission's attempt id, what a resume skips.

Every grade of a batch is recorded with the label `batch-<source digest>-<run>` (the store's
label column: what a grade was part of) and an attempt id derived from the batch and the
submission: sha256(label, handle, kata, the submission's sha256). The store takes an attempt id
once (grader.store.database.record_grade), so a result recorded twice, by a resume or by two drivers of
one batch, is still one row: nothing is counted twice. A run of the same SOURCE (same mode and
--kata) without --resume is a new run: run + 1, a new label, every submission graded again.

Only the driver writes: the grading processes send their results back to it.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from grader.grading.plan import build_plan
from grader.judge import failure_codes
from grader.kata.format import Kata
from grader.results.schema import ERROR, NOT_RUN, SKIPPED, CaseResult, GradeResult, TaskResult
from grader.results.scoring import score, summarise_task
from grader.store.database import attempts, record_grade

LABEL_PREFIX = "batch-"


@dataclass(frozen=True)
class Batch:
    label: str  # batch-<8 hex>-<run>
    run: int
    resumed: bool  # --resume found an earlier run to continue
    recorded: frozenset[str] = field(default_factory=frozenset)  # attempt ids stored under label
    earlier: int = 0  # results of the previous run (when not resuming it)


def family(source: Path, mode: str, kata: str | None) -> str:
    """The label's stem for a SOURCE graded in a mode (and only one kata's submissions, if so)."""
    text = f"{Path(source).resolve()}\0{mode}\0{kata or ''}"
    return LABEL_PREFIX + hashlib.sha256(text.encode()).hexdigest()[:8]


def open_batch(db: Path, source: Path, mode: str, kata: str | None, resume: bool) -> Batch:
    """The batch to record into: the latest run of this SOURCE when resuming (a fresh run when
    there is none), else a new run. Raises grader.store.StoreError."""
    stem = family(source, mode, kata)
    pattern = re.compile(re.escape(stem) + r"-(\d+)$")
    runs: dict[int, set[str]] = {}
    for a in attempts(db, everyone=True):
        match = pattern.fullmatch(a.label)
        if match:
            runs.setdefault(int(match.group(1)), set()).add(a.attempt_id)
    last = max(runs, default=0)
    if resume and last:
        return Batch(f"{stem}-{last}", last, True, frozenset(runs[last]))
    return Batch(f"{stem}-{last + 1}", last + 1, False, earlier=len(runs.get(last, ())))


def attempt_id(label: str, handle: str, kata: str, sha256: str) -> str:
    """The submission's key in its batch: 32 hex digits, an attempt id of the store."""
    return hashlib.sha256(f"{label}\0{handle}\0{kata}\0{sha256}".encode()).hexdigest()[:32]


def record(db: Path, label: str, handle: str, key: str, result: GradeResult) -> int:
    """Store one result of the batch under its key (idempotent); raises StoreError."""
    return record_grade(result, db, handle=handle, mode_label=label, attempt_id=key)


def batch_attempts(db: Path, label: str) -> list:
    """Everything recorded under the batch's label, oldest first (grader.store.Attempt)."""
    return [a for a in attempts(db, everyone=True) if a.label == label]


def lost_result(kata: Kata, path: str, sha256: str, mode: str, reason: str, tries: int) -> GradeResult:
    """The record of a submission that could not be graded: every try died (or the grader failed).
    An error with the reason, scored 0, so that the batch accounts for every submission; a later
    batch (or `kata grade`) grades it again."""
    message = (f"Not graded: {reason}" + (f" (tried {tries} times)" if tries > 1 else "")
               + ". The grading machine failed, not the submission: grade it again.")
    tasks = []
    plan = build_plan(kata, mode)
    for task in kata.tasks:
        cases = [CaseResult(task=p.task, name=p.case, dtype=p.dtype, shape=None, hidden=p.hidden,
                            status=SKIPPED if p.skip_reason else NOT_RUN,
                            message=p.skip_reason or "not run")
                 for p in plan if p.task == task.name]
        tasks.append(TaskResult(name=task.name, threshold=task.threshold, baseline=task.baseline_name,
                                cases=cases, correct=False))
        summarise_task(tasks[-1], kata.roofline_target)
    findings = failure_codes.Findings()
    findings.diagnosis(failure_codes.Diagnosis("internal_error", message.splitlines()[0]), None)
    return GradeResult(
        kata=kata.name, title=kata.title, submission=path, submission_sha256=sha256, mode=mode,
        status=ERROR, correct=False, score=0.0, speedup=None, threshold=kata.threshold, roofline=None,
        tasks=tasks, message=message, score_breakdown=score(tasks, False, False),
        skipped=[{"task": p.task, "case": p.case, "dtype": p.dtype, "reason": p.skip_reason}
                 for p in plan if p.skip_reason],
        diagnoses=findings.diagnoses)
