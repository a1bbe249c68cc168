"""The learner's progress: what each workspace remembers, and each kata's status for `kata list`.

A workspace keeps its own record in WORKSPACE/.kata/:

    progress.json     hints taken, the reference revealed or not, a summary of every grade, the best
    last_grade.json   the last grade's full JSON (docs/RESULTS.md) plus `graded_at`

Status per kata, best first: the results store (grader.store.database, when it is installed and its
database exists), else the workspace record. Writing is atomic (temporary file + rename), so a
crash never leaves half a record; a damaged record is reported, never overwritten.
"""

from __future__ import annotations

import importlib

import json
import os
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from grader.kata.format import Kata
from grader.learner.clock import format_time
from grader.results.schema import PASS, GradeResult

RECORD_DIR = ".kata"
RECORD_FILE = "progress.json"
LAST_GRADE_FILE = "last_grade.json"
RECORD_SCHEMA = "triton-kata/workspace/1"
MAX_GRADES = 500  # grade summaries kept per workspace (the best one is kept apart)

NOT_STARTED, FAILING, PASSING, FAST = "not started", "failing", "passing", "fast"


class RecordError(Exception):
    """A workspace record that cannot be read; the message names the file."""


@dataclass
class WorkspaceRecord:
    kata: str
    hints: list[dict] = field(default_factory=list)  # {level, at}, in the order taken
    revealed_at: str | None = None  # when the reference solution was shown before a pass
    grades: list[dict] = field(default_factory=list)  # grade summaries, oldest first
    best: dict | None = None  # the best grade summary (see is_better)

    @property
    def hints_taken(self) -> int:
        return len(self.hints)

    @property
    def passed(self) -> bool:
        return bool(self.best and self.best["status"] == PASS)

    def to_dict(self) -> dict[str, Any]:
        return dict(schema=RECORD_SCHEMA, **asdict(self))


def record_path(workspace: Path) -> Path:
    return Path(workspace) / RECORD_DIR / RECORD_FILE


def load_record(workspace: Path, kata_name: str) -> WorkspaceRecord:
    """The workspace's record; an empty one when it has none yet."""
    path = record_path(workspace)
    if not path.is_file():
        return WorkspaceRecord(kata=kata_name)
    try:
        raw = json.loads(path.read_text())
        record = WorkspaceRecord(kata=raw["kata"], hints=list(raw.get("hints", [])),
                                 revealed_at=raw.get("revealed_at"), grades=list(raw.get("grades", [])),
                                 best=raw.get("best"))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RecordError(f"{path} is damaged ({exc}); it was left as it is. Move it aside to "
                          "start a fresh record (hints and grade history are then forgotten).") from None
    if record.kata != kata_name:
        raise RecordError(f"{path} belongs to the kata '{record.kata}', not '{kata_name}'.")
    return record


def save_record(workspace: Path, record: WorkspaceRecord) -> Path:
    path = record_path(workspace)
    write_json_atomic(path, record.to_dict())
    return path


def write_json_atomic(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # A per-process temporary name keeps the usual file permissions (mkstemp would make it 0600).
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(data, indent=2, default=str) + "\n")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def grade_summary(result: GradeResult, graded_at: datetime) -> dict[str, Any]:
    """The figures of a grade that progress, interviews and debriefs need."""
    breakdown = result.score_breakdown
    return {
        "graded_at": format_time(graded_at),
        "status": result.status,
        "correct": result.correct,
        "score": result.score,
        "max_possible": breakdown.max_possible if breakdown else None,
        "speedup": result.speedup,
        "threshold": result.threshold,
        "roofline": result.roofline,
        "speed_measured": result.speed_measured,
        "mode": result.mode,
        "message": (result.message or "")[:400],
        "submission_sha256": result.submission_sha256,
    }


def is_better(candidate: dict, best: dict | None) -> bool:
    """A pass beats any non-pass; then the higher score; then the later grade."""
    if best is None:
        return True
    key = lambda g: (g["status"] == PASS, g["score"], g["graded_at"])  # noqa: E731
    return key(candidate) >= key(best)


def record_grade(workspace: Path, result: GradeResult, graded_at: datetime) -> WorkspaceRecord:
    """Add a grade to the workspace's record and keep its full JSON as last_grade.json."""
    record = load_record(workspace, result.kata)
    summary = grade_summary(result, graded_at)
    record.grades = (record.grades + [summary])[-MAX_GRADES:]
    if is_better(summary, record.best):
        record.best = summary
    save_record(workspace, record)
    write_json_atomic(Path(workspace) / RECORD_DIR / LAST_GRADE_FILE,
                      dict(result.to_dict(), graded_at=summary["graded_at"]))
    return record


# --- status per kata (kata list, interview selection) -------------------------------------------

@dataclass
class KataProgress:
    kata: str
    status: str  # not started | failing | passing | fast
    best_score: float | None = None
    best_mode: str | None = None
    source: str | None = None  # "store" | "workspace" | None


def status_from_best(status: str | None, mode: str | None, speedup: float | None,
                     threshold: float) -> str:
    """fast: a pass on a GPU whose geomean speedup reaches the kata's threshold; passing: any
    other pass (under the interpreter speed is not measured); failing: graded, never passed."""
    if status is None:
        return NOT_STARTED
    if status != PASS:
        return FAILING
    if mode == "gpu" and speedup is not None and speedup >= threshold:
        return FAST
    return PASSING


def store_bests() -> tuple[dict[str, Any], str | None]:
    """The results store's best grade per kata, or ({}, None) when there is no store.

    The store (grader.store.database) is optional: when the module or its database is absent the
    workspace records are the only source. The second value is a warning to show, if any.
    """
    try:
        # import_module consults sys.modules first (the package attribute may be stale).
        store = importlib.import_module("grader.store.database")
    except ImportError:
        return {}, None
    try:
        db_path = Path(store.default_db_path())
        if not db_path.is_file():
            return {}, None
        return dict(store.best_by_kata(db_path)), None
    except Exception as exc:  # the store is another module's concern: never let it break `kata list`
        return {}, f"results store unreadable ({exc}); showing workspace records only"


def progress_by_kata(katas: list[Kata], directory: Path,
                     bests: dict[str, Any] | None = None) -> tuple[dict[str, KataProgress], list[str]]:
    """Each kata's status and best score; workspaces are looked for as DIR/KATA and DIR itself.

    Returns (progress by kata name, warnings). `bests` is the store's answer (store_bests() when
    None), passed in by tests.
    """
    from grader.learner.workspace import workspace_kata_name

    warnings: list[str] = []
    if bests is None:
        bests, warning = store_bests()
        if warning:
            warnings.append(warning)
    directory = Path(directory)
    here = workspace_kata_name(directory)
    progress = {}
    for kata in katas:
        best = bests.get(kata.name)
        if best is not None:
            progress[kata.name] = KataProgress(
                kata.name, status_from_best(best.status, best.mode, best.speedup, kata.threshold),
                best.score, best.mode, "store")
            continue
        progress[kata.name] = KataProgress(kata.name, NOT_STARTED)
        for workspace in (directory / kata.name, directory if here == kata.name else None):
            if workspace is None or not record_path(workspace).is_file():
                continue
            try:
                record = load_record(workspace, kata.name)
            except RecordError as exc:
                warnings.append(str(exc))
                continue
            if record.best:
                b = record.best
                progress[kata.name] = KataProgress(
                    kata.name, status_from_best(b["status"], b["mode"], b["speedup"], kata.threshold),
                    b["score"], b["mode"], "workspace")
                break
    return progress, warnings
