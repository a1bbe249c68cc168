"""The results store: round-trips, handles, best scores, concurrency, crashes and migration."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grade_factory import H100, make_grade
from grader.results.schema import GradeResult
from grader.store import database as store
from grader.store.handle import HandleError, resolve_handle

TESTS = Path(__file__).parent


def rows(db: Path, table: str = "grades") -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]


def test_a_recorded_grade_round_trips_with_its_columns_and_full_json(tmp_path):
    db = tmp_path / "deep" / "er" / "results.sqlite"  # folders are made as needed
    result = make_grade("softmax", speedup=1.7, roofline=0.62)
    row_id = store.record_grade(result, db, handle="alice", mode_label="interview")
    assert row_id == 1
    [a] = store.attempts(db, handle="alice")
    assert (a.handle, a.kata, a.mode, a.label, a.status, a.correct, a.origin) == (
        "alice", "softmax", "gpu", "interview", "pass", True, "local")
    assert (a.score, a.speedup, a.roofline, a.threshold) == (result.score, 1.7, 0.62, 1.2)
    assert (a.device, a.torch_version, a.triton_version, a.grader_version) == (H100, "2.13.0", "3.9.0", "0.1.0")
    assert a.submission_sha256 == "ab" * 32
    assert (a.cases_passed, a.cases_total) == (3, 3)  # the skipped bf16 case is not counted
    assert len(a.attempt_id) == 32 and a.graded_at.endswith("+00:00")
    [stored] = store.stored_grades(db, handle="alice")
    assert stored.grade == json.loads(json.dumps(result.to_dict()))


def test_a_grade_with_diagnoses_is_stored_whole(tmp_path):
    diagnosis = {"code": "tail_wrong", "count": 2, "first_case": "vector_add/case0/float32",
                 "message": "elements 768..999 were never written", "advice": "does your grid cover the tail?"}
    result = make_grade(correct=False, diagnoses=[diagnosis])
    store.record_grade(result, tmp_path / "r.sqlite", handle="alice")
    [stored] = store.stored_grades(tmp_path / "r.sqlite", handle="alice")
    assert stored.grade["schema"] == "triton-kata/grade/2"
    assert stored.grade["diagnoses"] == [diagnosis] and stored.grade["cheats"] == []


def test_a_mode_label_must_be_a_short_word(tmp_path):
    with pytest.raises(ValueError, match="Invalid mode label"):
        store.record_grade(make_grade(), tmp_path / "r.sqlite", handle="alice", mode_label="Mock interview")
    assert not (tmp_path / "r.sqlite").exists()


def test_unknown_fields_a_newer_grader_adds_are_kept(tmp_path):
    class WithCheat(GradeResult):
        def to_dict(self):
            return dict(super().to_dict(), cheat="computed with torch.softmax")

    result = make_grade(correct=False)
    result.__class__ = WithCheat
    store.record_grade(result, tmp_path / "r.sqlite", handle="bob")
    [stored] = store.stored_grades(tmp_path / "r.sqlite", handle="bob")
    assert stored.grade["cheat"] == "computed with torch.softmax"


def test_failed_case_counts(tmp_path):
    store.record_grade(make_grade(correct=False, cases=4), tmp_path / "r.sqlite", handle="bob")
    [a] = store.attempts(tmp_path / "r.sqlite", handle="bob")
    assert (a.correct, a.score, a.cases_passed, a.cases_total) == (False, 0.0, 3, 4)


def test_handle_comes_from_option_then_env_then_config_then_os_user(tmp_path, monkeypatch):
    config = tmp_path / "config.yaml"
    monkeypatch.setenv("KATA_CONFIG", str(config))
    monkeypatch.setattr("getpass.getuser", lambda: "Jane Doe")
    assert resolve_handle() == "Jane_Doe"  # made a valid handle
    config.write_text("handle: from-config\n")
    assert resolve_handle() == "from-config"
    monkeypatch.setenv("KATA_HANDLE", "from-env")
    assert resolve_handle() == "from-env"
    assert resolve_handle("explicit") == "explicit"
    for bad in ("<script>", "alice\n", "-dash-first", "x" * 65):
        with pytest.raises(HandleError, match="Invalid handle"):
            resolve_handle(bad)
    with pytest.raises(HandleError, match="Invalid handle"):
        store.record_grade(make_grade(), tmp_path / "r.sqlite", handle="x y")
    config.write_text("handle: [unclosed\n")
    monkeypatch.delenv("KATA_HANDLE")
    with pytest.raises(HandleError, match="config file"):
        resolve_handle()


def test_default_db_path_follows_kata_db_then_the_data_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("KATA_DATA_DIR")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert store.default_db_path() == tmp_path / "xdg" / "triton-kata" / "results.sqlite"
    monkeypatch.setenv("KATA_DATA_DIR", str(tmp_path / "kd"))
    assert store.default_db_path() == tmp_path / "kd" / "results.sqlite"
    monkeypatch.setenv("KATA_DB", str(tmp_path / "team.sqlite"))
    assert store.default_db_path() == tmp_path / "team.sqlite"


def test_best_by_kata_takes_score_then_speedup_per_handle(tmp_path, monkeypatch):
    db = tmp_path / "r.sqlite"
    monkeypatch.setenv("KATA_HANDLE", "alice")
    store.record_grade(make_grade("vector_add", speedup=1.0, roofline=0.5), db)
    store.record_grade(make_grade("vector_add", speedup=2.0, roofline=0.8), db)  # 100 points, 2.0x
    store.record_grade(make_grade("vector_add", speedup=3.0, roofline=0.8), db)  # 100 points, 3.0x: best
    store.record_grade(make_grade("vector_add", correct=False), db)
    store.record_grade(make_grade("softmax", mode="interpret"), db)
    store.record_grade(make_grade("rms_norm", speedup=9.0), db, handle="bob")  # not alice's
    best = store.best_by_kata(db)
    assert sorted(best) == ["softmax", "vector_add"]
    assert best["vector_add"] == store.BestScore("vector_add", 100.0, "pass", 3.0, "gpu",
                                                 best["vector_add"].graded_at)
    assert (best["softmax"].score, best["softmax"].mode, best["softmax"].speedup) == (50.0, "interpret", None)
    assert list(store.best_by_kata(db, handle="bob")) == ["rms_norm"]


def test_reading_a_missing_store_is_empty_and_creates_nothing(tmp_path):
    db = tmp_path / "none" / "results.sqlite"
    assert store.best_by_kata(db, handle="alice") == {}
    assert store.attempts(db, everyone=True) == []
    assert not db.parent.exists()


def test_store_uses_wal_and_the_current_schema_version(tmp_path):
    db = tmp_path / "r.sqlite"
    store.record_grade(make_grade(), db, handle="alice")
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION


def test_an_unusable_store_is_a_clear_error(tmp_path):
    not_a_db = tmp_path / "notes.sqlite"
    not_a_db.write_text("this is not a database\n" * 100)
    with pytest.raises(store.StoreError, match="notes.sqlite"):
        store.record_grade(make_grade(), not_a_db, handle="alice")
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    with pytest.raises(store.StoreError, match="Cannot use the results store"):
        store.record_grade(make_grade(), blocked / "results.sqlite", handle="alice")


# ---- several processes, crashes --------------------------------------------------------------

RECORDER = """
import os, sys, time
from pathlib import Path
from grade_factory import make_grade
from grader.store import database as store
db, index, go = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
Path(f"{go}.ready{index}").touch()
while not go.exists():  # all start writing at the same moment
    time.sleep(0.005)
store.record_grade(make_grade("vector_add", speedup=1.0 + index / 10), db, handle=f"user{index}")
"""


def _python(code: str, *args) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen([sys.executable, "-c", code, *map(str, args)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_eight_processes_recording_at_once_lose_nothing(tmp_path):
    db = tmp_path / "fresh.sqlite"  # not created yet: creation and migration race too
    go = tmp_path / "go"
    procs = [_python(RECORDER, db, i, go) for i in range(8)]
    deadline = time.monotonic() + 60
    while sum(Path(f"{go}.ready{i}").exists() for i in range(8)) < 8:
        assert time.monotonic() < deadline, "recorders did not start"
        assert all(p.poll() is None for p in procs), [p.communicate()[0] for p in procs if p.poll() is not None]
        time.sleep(0.01)
    go.touch()
    for p in procs:
        out, _ = p.communicate(timeout=60)
        assert p.returncode == 0, out
    everyone = store.attempts(db, everyone=True)
    assert sorted(a.handle for a in everyone) == [f"user{i}" for i in range(8)]
    assert len({a.attempt_id for a in everyone}) == 8
    assert rows(db, "grade_tasks") == 8
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


CRASHER = """
import os, sys
from pathlib import Path
from grade_factory import make_grade
from grader.store import database as store
def die(*args):  # the grade row is inserted, its tasks are not: the process dies here
    os._exit(7)
store._insert_tasks = die
store.record_grade(make_grade("softmax"), Path(sys.argv[1]), handle="crash")
"""


def test_a_crash_mid_insert_leaves_no_partial_row(tmp_path):
    db = tmp_path / "r.sqlite"
    store.record_grade(make_grade("vector_add"), db, handle="alice")
    proc = _python(CRASHER, db)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 7, out
    assert [a.handle for a in store.attempts(db, everyone=True)] == ["alice"]
    assert (rows(db), rows(db, "grade_tasks")) == (1, 1)
    store.record_grade(make_grade("softmax"), db, handle="bob")  # the store still works
    assert rows(db) == 2


# ---- migration -------------------------------------------------------------------------------

V1_SCHEMA = """
CREATE TABLE grades (
    id INTEGER PRIMARY KEY AUTOINCREMENT, attempt_id TEXT NOT NULL UNIQUE, handle TEXT NOT NULL,
    kata TEXT NOT NULL, graded_at TEXT NOT NULL, mode TEXT NOT NULL, status TEXT NOT NULL,
    correct INTEGER NOT NULL, score REAL NOT NULL, speedup REAL, threshold REAL, device TEXT,
    torch_version TEXT, triton_version TEXT, grader_version TEXT, submission_sha256 TEXT,
    result_json TEXT NOT NULL);
CREATE INDEX grades_by_handle_kata ON grades (handle, kata);
PRAGMA user_version = 1;
"""


def test_a_version_1_store_migrates_forward_and_keeps_its_rows(tmp_path):
    db = tmp_path / "old.sqlite"
    grade = json.loads(json.dumps(make_grade("softmax", speedup=2.0, roofline=0.7, cases=5).to_dict()))
    with sqlite3.connect(db) as conn:
        conn.executescript(V1_SCHEMA)
        conn.execute(
            "INSERT INTO grades (attempt_id, handle, kata, graded_at, mode, status, correct, score, "
            "speedup, threshold, device, torch_version, triton_version, grader_version, "
            "submission_sha256, result_json) VALUES (?, 'alice', 'softmax', '2025-12-01T09:00:00+00:00', "
            "'gpu', 'pass', 1, ?, 2.0, 1.2, ?, '2.9.0', '3.5.0', '0.0.9', ?, ?)",
            ("0" * 32, grade["score"], H100, "cd" * 32, json.dumps(grade)))
    conn.close()
    [old] = store.attempts(db, handle="alice")
    assert (old.kata, old.graded_at, old.speedup, old.torch_version) == (
        "softmax", "2025-12-01T09:00:00+00:00", 2.0, "2.9.0")
    # Filled in by the migration from the stored JSON, or defaulted:
    assert (old.roofline, old.cases_passed, old.cases_total, old.label, old.origin) == (
        0.7, 5, 5, "practice", "local")
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION
    conn.close()
    store.record_grade(make_grade("vector_add"), db, handle="alice")
    assert [a.kata for a in store.attempts(db, handle="alice")] == ["softmax", "vector_add"]


def test_a_store_from_a_newer_grader_is_refused_untouched(tmp_path):
    db = tmp_path / "future.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE grades (id INTEGER PRIMARY KEY, future TEXT)")
        conn.execute("PRAGMA user_version = 99")
    conn.close()
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    with pytest.raises(store.StoreError, match="newer"):
        store.record_grade(make_grade(), db, handle="alice")
    with pytest.raises(store.StoreError, match="upgrade triton-kata"):
        store.attempts(db, everyone=True)
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


def test_eight_real_grades_at_once_make_eight_rows(tmp_path):
    # Eight `kata grade` processes, each grading for real (under the interpreter) and recording
    # into the same store at about the same time.
    db = tmp_path / "results.sqlite"
    reference = Path(__file__).resolve().parents[1] / "reference" / "vector_add.py"
    env = dict(os.environ, KATA_DB=str(db), KATA_HANDLE="octo")
    procs = [subprocess.Popen([sys.executable, "-m", "grader", "grade", str(reference), "--kata",
                               "vector_add", "--interpret", "--json", "--seed", str(i)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for i in range(8)]
    outputs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [(out.decode()[-300:], err.decode()[-300:])
                                                   for out, err in outputs]
    rows = store.attempts(db, handle="octo")
    assert len(rows) == 8 and {r.status for r in rows} == {"pass"}
    assert sorted(json.loads(out)["seed"] for out, _ in outputs) == list(range(8))
