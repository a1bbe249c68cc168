"""The results file that `kata export` writes and `kata import` reads (docs/STORE.md).

Reading validates everything before anything is stored: the envelope, every record's checksum,
the grade's documented fields and their consistency. Unknown fields inside a grade are kept
(newer graders add some); unknown fields anywhere else are an error.
"""

from __future__ import annotations

import json
import math
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from grader import __version__
from grader.store.database import LABEL_PATTERN, StoredGrade, utc_now
from grader.store.handle import HANDLE_PATTERN

SCHEMA = "triton-kata/results/1"
SCHEMA_PREFIX = "triton-kata/results/"
# Every grade schema this triton-kata imports: 1 (cheats once per case, no diagnoses) and 2
# (docs/RESULTS.md). Older grades are stored as they are; readers tolerate the missing fields.
GRADE_SCHEMAS = ("triton-kata/grade/1", "triton-kata/grade/2")

ENVELOPE_FIELDS = {"schema", "exported_at", "exported_by", "grader_version", "count", "results"}
RECORD_FIELDS = {"id", "handle", "graded_at", "label", "grade", "sha256"}
ID_PATTERN = re.compile(r"^[0-9a-f]{32}$")
SHA256_PATTERN = re.compile(r"^[0-9a-f]{64}$")
KATA_PATTERN = re.compile(r"^[\w.-]{1,100}$")
# Exactly what store.utc_now writes: the time is hashed, so it is never rewritten on import.
TIME_PATTERN = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00$")
CASE_STATUSES = ("pass", "fail", "error", "skipped", "not_run")


class ExchangeError(ValueError):
    """A results file that cannot be imported; the message names the file and the record."""


def export_document(grades: list[StoredGrade], exported_by: str) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "exported_at": utc_now(),
        "exported_by": exported_by,
        "grader_version": __version__,
        "count": len(grades),
        "results": [{"id": g.attempt_id, "handle": g.handle, "graded_at": g.graded_at,
                     "label": g.label, "grade": g.grade, "sha256": g.digest()} for g in grades],
    }


def read_results_file(path: Path) -> list[StoredGrade]:
    """Parse and validate one exported file; raises ExchangeError saying what is wrong."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ExchangeError(f"{path}: cannot read it: {exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ExchangeError(f"{path}: not valid JSON ({exc}).") from exc
    return parse_document(data, str(path))


def parse_document(data: Any, source: str) -> list[StoredGrade]:
    def fail(message: str):
        raise ExchangeError(f"{source}: {message}")

    if not isinstance(data, dict):
        fail("expected a JSON object written by `kata export`.")
    schema = data.get("schema")
    if isinstance(schema, str) and schema.startswith(SCHEMA_PREFIX) and schema != SCHEMA:
        fail(f"schema '{schema}' is not one this triton-kata reads ({SCHEMA}); "
             "a newer triton-kata may have written it.")
    if schema != SCHEMA:
        fail(f"not a triton-kata results file (schema must be '{SCHEMA}', got {schema!r}).")
    _exact_fields(data, ENVELOPE_FIELDS, "the file", fail)
    _check(isinstance(data["exported_at"], str) and _is_time(data["exported_at"]),
           "exported_at must be a UTC time such as 2026-01-31T12:00:00+00:00.", fail)
    _check(isinstance(data["exported_by"], str) and HANDLE_PATTERN.fullmatch(data["exported_by"]),
           "exported_by must be a handle.", fail)
    _check(isinstance(data["grader_version"], str), "grader_version must be a string.", fail)
    results = data["results"]
    _check(isinstance(results, list), "results must be a list.", fail)
    _check(type(data["count"]) is int and data["count"] == len(results),
           f"count says {data['count']!r} but the file holds {len(results)} results: it was cut "
           "short or edited.", fail)
    grades, by_id = [], {}
    for index, record in enumerate(results):
        grade = _parse_record(record, f"results[{index}]", fail)
        earlier = by_id.setdefault(grade.attempt_id, grade)
        if earlier is not grade and earlier.digest() != grade.digest():
            fail(f"results[{index}]: id {grade.attempt_id} appears twice with different content.")
        grades.append(grade)
    return grades


def _check(ok: Any, message: str, fail) -> None:
    if not ok:
        fail(message)


def _exact_fields(obj: dict, fields: set[str], where: str, fail) -> None:
    missing = sorted(fields - obj.keys())
    unknown = sorted(obj.keys() - fields)
    if missing:
        fail(f"{where} lacks {', '.join(missing)}.")
    if unknown:
        fail(f"{where} has unknown field(s) {', '.join(unknown)}.")


def _is_time(value: str) -> bool:
    if not TIME_PATTERN.fullmatch(value):
        return False
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return False
    return True


def _parse_record(record: Any, where: str, fail) -> StoredGrade:
    if not isinstance(record, dict):
        fail(f"{where} must be an object.")
    _exact_fields(record, RECORD_FIELDS, where, fail)
    checks = [
        (isinstance(record["id"], str) and ID_PATTERN.fullmatch(record["id"]), "id must be 32 hex digits."),
        (isinstance(record["handle"], str) and HANDLE_PATTERN.fullmatch(record["handle"]), "handle is not a valid handle."),
        (isinstance(record["graded_at"], str) and _is_time(record["graded_at"]),
         "graded_at must be a UTC time such as 2026-01-31T12:00:00+00:00."),
        (isinstance(record["label"], str) and LABEL_PATTERN.fullmatch(record["label"]), "label must be a short lower-case word."),
        (isinstance(record["sha256"], str) and SHA256_PATTERN.fullmatch(record["sha256"]), "sha256 must be 64 hex digits."),
        (isinstance(record["grade"], dict), "grade must be an object."),
    ]
    for ok, message in checks:
        _check(ok, f"{where}: {message}", fail)
    stored = StoredGrade(record["id"], record["handle"], record["graded_at"], record["label"], record["grade"])
    who = f"{where} ({stored.handle}, {stored.grade.get('kata', '?')})"
    _check(stored.digest() == record["sha256"],
           f"{who} does not match its sha256: the record was edited or damaged after export.", fail)
    for problem in grade_problems(stored.grade):
        fail(f"{who}: {problem}")
    return stored


# ---- the grade inside a record (docs/RESULTS.md) ------------------------------------------------

def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _optional(check):
    return lambda v: v is None or check(v)


_GRADE_FIELDS = {
    "schema": lambda v: v in GRADE_SCHEMAS,
    "kata": lambda v: isinstance(v, str) and bool(KATA_PATTERN.fullmatch(v)),
    "title": lambda v: isinstance(v, str),
    "submission": lambda v: isinstance(v, str),
    "submission_sha256": _optional(lambda v: isinstance(v, str) and bool(SHA256_PATTERN.fullmatch(v))),
    "mode": lambda v: v in ("gpu", "interpret"),
    "status": lambda v: v in ("pass", "fail", "error"),
    "correct": lambda v: isinstance(v, bool),
    "score": lambda v: _is_number(v) and 0 <= v <= 100,
    "speedup": _optional(lambda v: _is_number(v) and v > 0),
    "threshold": lambda v: _is_number(v) and v > 0,
    "roofline": _optional(lambda v: _is_number(v) and v >= 0),
    "speed_measured": lambda v: isinstance(v, bool),
    "message": lambda v: isinstance(v, str),
    "tasks": lambda v: isinstance(v, list),
    "device": _optional(lambda v: isinstance(v, str)),
    "environment": lambda v: isinstance(v, dict),
}
_TASK_FIELDS = {
    "name": lambda v: isinstance(v, str),
    "correct": lambda v: isinstance(v, bool),
    "cases": lambda v: isinstance(v, list),
    "speedup": _optional(lambda v: _is_number(v) and v > 0),
    "roofline": _optional(lambda v: _is_number(v) and v >= 0),
}
_CASE_FIELDS = {
    "name": lambda v: isinstance(v, str),
    "status": lambda v: v in CASE_STATUSES,
}


def _field_problems(obj: Any, fields: dict, where: str) -> list[str]:
    if not isinstance(obj, dict):
        return [f"{where} must be an object."]
    problems = []
    for name, valid in fields.items():
        if name not in obj:
            problems.append(f"{where} lacks '{name}'.")
        elif not valid(obj[name]):
            problems.append(f"{where} has an invalid '{name}': {obj[name]!r:.80}.")
    return problems


def grade_problems(grade: Any) -> list[str]:
    """What is wrong with a grade dict: missing or ill-typed documented fields, or figures that
    contradict each other. Extra fields are fine."""
    problems = _field_problems(grade, _GRADE_FIELDS, "the grade")
    if problems:
        return problems
    for i, task in enumerate(grade["tasks"]):
        problems += _field_problems(task, _TASK_FIELDS, f"tasks[{i}]")
        if not problems:
            for j, case in enumerate(task["cases"]):
                problems += _field_problems(case, _CASE_FIELDS, f"tasks[{i}].cases[{j}]")
    if problems:
        return problems
    # Consistency: the rules the grader itself follows (docs/SCORING.md).
    ran = [c["status"] for t in grade["tasks"] for c in t["cases"] if c["status"] != "skipped"]
    if grade["status"] == "pass" and not grade["correct"]:
        problems.append("status is pass but the grade is not correct.")
    if not grade["correct"] and grade["score"] != 0:
        problems.append(f"score is {grade['score']:g} but an incorrect grade scores 0.")
    if grade["correct"] and (not ran or any(s != "pass" for s in ran)):
        problems.append("the grade is marked correct but not every case that ran passed.")
    if grade["mode"] == "interpret" and (grade["speed_measured"] or grade["speedup"] is not None):
        problems.append("speed cannot be measured under the interpreter.")
    if not grade["speed_measured"] and grade["speedup"] is not None:
        problems.append("a speedup is given but speed_measured is false.")
    breakdown = grade.get("score_breakdown")
    if isinstance(breakdown, dict) and _is_number(breakdown.get("total")):
        if abs(breakdown["total"] - grade["score"]) > 1e-6:
            problems.append(f"score is {grade['score']:g} but score_breakdown.total is {breakdown['total']:g}.")
        if _is_number(breakdown.get("max_possible")) and grade["score"] > breakdown["max_possible"] + 1e-6:
            problems.append(f"score {grade['score']:g} exceeds the most possible ({breakdown['max_possible']:g}).")
    return problems
