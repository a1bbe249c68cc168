"""The results store: every grade appended to an embedded SQLite database (docs/STORE.md).

WAL mode, and each grade written in one IMMEDIATE transaction, so grades recorded by several
processes at once lose nothing and a crash mid-write leaves no partial row. The schema version
lives in PRAGMA user_version and migrates forward, one step at a time, on open.

The store keeps the full grade JSON (whatever fields it has) beside the columns it queries.
It never prints; errors are StoreError.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

from grader import __version__
from grader.paths import data_dir
from grader.results.schema import GradeResult
from grader.store.handle import resolve_handle

SCHEMA_VERSION = 2
BUSY_TIMEOUT_S = 30.0  # how long a writer waits for another process's transaction
PRACTICE = "practice"  # the label of a plain `kata grade`; interview mode passes its own
LOCAL, IMPORTED = "local", "import"  # where a row came from
LABEL_PATTERN = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")  # a label travels in exported files


class StoreError(Exception):
    """The store cannot be opened, read or written; the message says which and why."""


class ImportConflictError(StoreError):
    """An imported result has the id of one already stored (or imported) but other content."""


@dataclass(frozen=True)
class BestScore:
    """A handle's best attempt at one kata (by score, then speedup, then the earliest)."""
    kata: str
    score: float
    status: str
    speedup: float | None
    mode: str  # gpu | interpret
    graded_at: str


@dataclass(frozen=True)
class Attempt:
    """One stored grade: the queried columns (the full JSON stays in the store)."""
    row_id: int
    attempt_id: str
    handle: str
    kata: str
    graded_at: str  # ISO 8601, UTC
    mode: str  # gpu | interpret
    label: str  # practice, interview, ...
    status: str
    correct: bool
    score: float
    speedup: float | None
    roofline: float | None
    threshold: float | None
    device: str | None
    torch_version: str | None
    triton_version: str | None
    grader_version: str | None
    submission_sha256: str | None
    cases_passed: int
    cases_total: int  # cases that ran (skipped ones not counted)
    origin: str  # local | import
    # The GPU was shared while it ran (the grade JSON's gpu_shared): its speed is unreliable and
    # leaderboards do not rank it. Read from the stored JSON, so older stores need no migration.
    gpu_shared: bool = False


@dataclass(frozen=True)
class StoredGrade:
    """One attempt as it travels between machines: who, when, in what setting, the full grade."""
    attempt_id: str
    handle: str
    graded_at: str
    label: str
    grade: dict[str, Any]

    def digest(self) -> str:
        """sha256 of the canonical JSON of every field: equal digests, equal attempts."""
        return hashlib.sha256(canonical_json({
            "id": self.attempt_id, "handle": self.handle, "graded_at": self.graded_at,
            "label": self.label, "grade": self.grade}).encode()).hexdigest()


@dataclass(frozen=True)
class ImportSummary:
    added: int
    already_present: int


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def default_db_path() -> Path:
    """KATA_DB, else results.sqlite in the user's data folder."""
    if os.environ.get("KATA_DB"):
        return Path(os.environ["KATA_DB"]).expanduser()
    return data_dir() / "results.sqlite"


def ranking_key(score: float, speedup: float | None, graded_at: str) -> tuple:
    """Sorts best first: higher score, then higher speedup (none counts as 0), then earlier."""
    return (-score, -(speedup or 0.0), graded_at)


# ---- schema and migrations -------------------------------------------------------------------
# MIGRATIONS[i] takes a database from version i to i + 1; a new database runs them all. Never
# edit a shipped step: add one.

def _create_v1(conn: sqlite3.Connection) -> None:
    """Version 1: one row per grade, the queried columns plus the full result JSON."""
    conn.execute("""
        CREATE TABLE grades (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            attempt_id TEXT NOT NULL UNIQUE,
            handle TEXT NOT NULL,
            kata TEXT NOT NULL,
            graded_at TEXT NOT NULL,
            mode TEXT NOT NULL,
            status TEXT NOT NULL,
            correct INTEGER NOT NULL,
            score REAL NOT NULL,
            speedup REAL,
            threshold REAL,
            device TEXT,
            torch_version TEXT,
            triton_version TEXT,
            grader_version TEXT,
            submission_sha256 TEXT,
            result_json TEXT NOT NULL
        )""")
    conn.execute("CREATE INDEX grades_by_handle_kata ON grades (handle, kata)")


def _add_tasks_v2(conn: sqlite3.Connection) -> None:
    """Version 2: roofline, label (practice/interview) and origin (local/import) columns, and
    per-task figures in their own table; both filled in for existing rows from their JSON."""
    conn.execute("ALTER TABLE grades ADD COLUMN roofline REAL")
    conn.execute(f"ALTER TABLE grades ADD COLUMN label TEXT NOT NULL DEFAULT '{PRACTICE}'")
    conn.execute(f"ALTER TABLE grades ADD COLUMN origin TEXT NOT NULL DEFAULT '{LOCAL}'")
    conn.execute("""
        CREATE TABLE grade_tasks (
            grade_id INTEGER NOT NULL REFERENCES grades (id) ON DELETE CASCADE,
            task TEXT NOT NULL,
            correct INTEGER NOT NULL,
            speedup REAL,
            roofline REAL,
            threshold REAL,
            cases_passed INTEGER NOT NULL,
            cases_failed INTEGER NOT NULL,
            cases_skipped INTEGER NOT NULL,
            cases_total INTEGER NOT NULL,
            PRIMARY KEY (grade_id, task)
        )""")
    for row_id, text in conn.execute("SELECT id, result_json FROM grades").fetchall():
        grade = json.loads(text)
        conn.execute("UPDATE grades SET roofline = ? WHERE id = ?", (_number(grade.get("roofline")), row_id))
        _insert_tasks(conn, row_id, grade)


MIGRATIONS: list[Callable[[sqlite3.Connection], None]] = [_create_v1, _add_tasks_v2]
assert len(MIGRATIONS) == SCHEMA_VERSION


def _schema_version(conn: sqlite3.Connection) -> int:
    return conn.execute("PRAGMA user_version").fetchone()[0]


def _refuse_newer(version: int, db_path: Path) -> None:
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"The results store {db_path} has schema version {version}, newer than this "
            f"triton-kata knows ({SCHEMA_VERSION}): upgrade triton-kata, or choose another "
            "store with --db or KATA_DB.")


def _migrate(conn: sqlite3.Connection, db_path: Path) -> None:
    if _schema_version(conn) == SCHEMA_VERSION:
        return
    with _transaction(conn):
        version = _schema_version(conn)  # again, under the write lock: another process may have done it
        _refuse_newer(version, db_path)
        for step in MIGRATIONS[version:]:
            step(conn)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")  # part of the same transaction


# ---- connections ------------------------------------------------------------------------------

@contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    # IMMEDIATE takes the write lock up front, so two writers queue on busy_timeout instead of
    # deadlocking on a read lock each wants to upgrade.
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _retry_while_locked(action: Callable[[], Any]) -> Any:
    # Switching a new database to WAL needs an exclusive lock that does not always go through
    # the busy handler, so several processes creating the store at once retry here.
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            return action()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@contextmanager
def _open(db_path: Path) -> Iterator[sqlite3.Connection]:
    """A migrated connection in autocommit mode (transactions are explicit); errors become StoreError."""
    db_path = Path(db_path)
    conn = None
    try:
        db_path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(db_path), timeout=BUSY_TIMEOUT_S, isolation_level=None)
        _refuse_newer(_schema_version(conn), db_path)  # before anything writes to the file
        conn.execute("PRAGMA foreign_keys = ON")
        _retry_while_locked(lambda: conn.execute("PRAGMA journal_mode = WAL").fetchone())
        conn.execute("PRAGMA synchronous = FULL")  # a committed grade survives a power cut too
        _migrate(conn, db_path)
        yield conn
    except (sqlite3.Error, OSError) as exc:
        raise StoreError(f"Cannot use the results store {db_path}: {exc}") from exc
    finally:
        if conn is not None:
            conn.close()


# ---- writing ---------------------------------------------------------------------------------

def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _insert_tasks(conn: sqlite3.Connection, grade_id: int, grade: dict[str, Any]) -> None:
    for task in grade.get("tasks") or []:
        statuses = [c.get("status") for c in task.get("cases") or []]
        skipped = statuses.count("skipped")
        passed = statuses.count("pass")
        conn.execute(
            "INSERT INTO grade_tasks (grade_id, task, correct, speedup, roofline, threshold, "
            "cases_passed, cases_failed, cases_skipped, cases_total) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (grade_id, task.get("name"), int(bool(task.get("correct"))), _number(task.get("speedup")),
             _number(task.get("roofline")), _number(task.get("threshold")), passed,
             len(statuses) - skipped - passed, skipped, len(statuses) - skipped))


def _insert(conn: sqlite3.Connection, stored: StoredGrade, origin: str) -> int:
    grade = stored.grade
    env = grade.get("environment") or {}
    cursor = conn.execute(
        "INSERT INTO grades (attempt_id, handle, kata, graded_at, mode, label, origin, status, "
        "correct, score, speedup, roofline, threshold, device, torch_version, triton_version, "
        "grader_version, submission_sha256, result_json) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (stored.attempt_id, stored.handle, grade["kata"], stored.graded_at, grade["mode"],
         stored.label, origin, grade["status"], int(bool(grade["correct"])), float(grade["score"]),
         _number(grade.get("speedup")), _number(grade.get("roofline")), _number(grade.get("threshold")),
         grade.get("device"), env.get("torch"), env.get("triton"), env.get("grader"),
         grade.get("submission_sha256"), json.dumps(grade, ensure_ascii=True)))
    _insert_tasks(conn, cursor.lastrowid, grade)
    return cursor.lastrowid


def record_grade(result: GradeResult, db_path: Path, handle: str | None = None,
                 mode_label: str | None = None, attempt_id: str | None = None) -> int:
    """Append one grade; returns its row id. handle: --handle (else KATA_HANDLE, the config
    file, the OS user); mode_label: what the grade was part of ('practice' unless given).
    attempt_id: the caller's own id for the grade (32 hex digits; `kata batch` derives it from
    the batch and the submission), which makes the call idempotent: a grade already stored under
    that id is not stored again, and its row id is returned."""
    label = mode_label or PRACTICE
    if not LABEL_PATTERN.fullmatch(label):
        raise ValueError(f"Invalid mode label {label!r}: use a short lower-case word such as 'interview'.")
    if attempt_id is not None and not re.fullmatch(r"[0-9a-f]{32}", attempt_id):
        raise ValueError(f"Invalid attempt id {attempt_id!r}: use 32 lower-case hex digits.")
    grade = json.loads(json.dumps(result.to_dict(), default=str))  # exactly what --json prints
    grade.setdefault("environment", {}).setdefault("grader", __version__)
    stored = StoredGrade(attempt_id or uuid.uuid4().hex, resolve_handle(handle), utc_now(), label, grade)
    with _open(db_path) as conn, _transaction(conn):
        if attempt_id is not None:
            held = conn.execute("SELECT id FROM grades WHERE attempt_id = ?", (attempt_id,)).fetchone()
            if held:
                return held[0]
        return _insert(conn, stored, LOCAL)


def import_grades(db_path: Path, grades: list[StoredGrade]) -> ImportSummary:
    """Add the grades not stored yet, all in one transaction: on any conflict, none is added.

    An id already stored with the same content counts as present; with other content it is a
    conflict (a tampered or corrupted copy), raised as ImportConflictError.
    """
    unique: dict[str, StoredGrade] = {}
    for g in grades:
        seen = unique.setdefault(g.attempt_id, g)
        if seen.digest() != g.digest():
            raise ImportConflictError(
                f"Result {g.attempt_id} appears twice with different content.")
    added = present = 0
    with _open(db_path) as conn, _transaction(conn):
        for g in unique.values():
            row = conn.execute("SELECT attempt_id, handle, graded_at, label, result_json FROM grades "
                               "WHERE attempt_id = ?", (g.attempt_id,)).fetchone()
            if row is None:
                _insert(conn, g, IMPORTED)
                added += 1
            elif _stored_grade(row).digest() == g.digest():
                present += 1
            else:
                raise ImportConflictError(
                    f"Result {g.attempt_id} ({g.handle}, {g.grade.get('kata')}) is already in the "
                    "store with different content: one of the two copies was edited.")
    return ImportSummary(added, present)


# ---- reading ---------------------------------------------------------------------------------

def _stored_grade(row: tuple) -> StoredGrade:
    attempt_id, handle, graded_at, label, text = row
    return StoredGrade(attempt_id, handle, graded_at, label, json.loads(text))


def _where(kata: str | None, handle: str | None, everyone: bool) -> tuple[str, list]:
    clauses, params = [], []
    if not everyone:
        clauses.append("g.handle = ?")
        params.append(resolve_handle(handle))
    if kata:
        clauses.append("g.kata = ?")
        params.append(kata)
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


def attempts(db_path: Path, kata: str | None = None, handle: str | None = None,
             everyone: bool = False) -> list[Attempt]:
    """Stored grades, oldest first: one handle's (default: the configured one) or everyone's."""
    if not Path(db_path).exists():  # reading never creates a store
        return []
    where, params = _where(kata, handle, everyone)
    query = (
        "SELECT g.id, g.attempt_id, g.handle, g.kata, g.graded_at, g.mode, g.label, g.status, "
        "g.correct, g.score, g.speedup, g.roofline, g.threshold, g.device, g.torch_version, "
        "g.triton_version, g.grader_version, g.submission_sha256, "
        "COALESCE(SUM(t.cases_passed), 0), COALESCE(SUM(t.cases_total), 0), g.origin, "
        # A text search, not json_extract: a grade stored before results became strict JSON
        # may hold NaN, which SQLite's JSON functions refuse. In the JSON a submission's printed
        # output is escaped (\"), so it cannot spell the key's quotes.
        "(instr(g.result_json, '\"gpu_shared\": {') > 0 OR instr(g.result_json, '\"gpu_shared\":{') > 0) "
        f"FROM grades g LEFT JOIN grade_tasks t ON t.grade_id = g.id{where} "
        "GROUP BY g.id ORDER BY g.graded_at, g.id")
    with _open(db_path) as conn:
        rows = conn.execute(query, params).fetchall()
    return [Attempt(*row[:8], bool(row[8]), *row[9:-1], bool(row[-1])) for row in rows]


def best_by_kata(db_path: Path, handle: str | None = None) -> dict[str, BestScore]:
    """The handle's best attempt per kata (default: the configured handle), keyed by kata."""
    best: dict[str, Attempt] = {}
    for a in attempts(db_path, handle=handle):
        held = best.get(a.kata)
        if held is None or ranking_key(a.score, a.speedup, a.graded_at) < ranking_key(
                held.score, held.speedup, held.graded_at):
            best[a.kata] = a
    return {kata: BestScore(a.kata, a.score, a.status, a.speedup, a.mode, a.graded_at)
            for kata, a in sorted(best.items())}


def stored_grades(db_path: Path, kata: str | None = None, handle: str | None = None,
                  everyone: bool = False) -> list[StoredGrade]:
    """Full stored grades, oldest first, for export."""
    if not Path(db_path).exists():
        return []
    where, params = _where(kata, handle, everyone)
    with _open(db_path) as conn:
        rows = conn.execute("SELECT g.attempt_id, g.handle, g.graded_at, g.label, g.result_json "
                            f"FROM grades g{where} ORDER BY g.graded_at, g.id", params).fetchall()
    return [_stored_grade(row) for row in rows]
