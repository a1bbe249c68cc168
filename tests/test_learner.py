"""The learner's loop: kata hint, watch, reset, solution, and kata list's status column.

Most tests grade with fakes.fake_grade (grader.grading.runner.grade replaced): a real interpreter grade
takes seconds. test_real_grade_unlocks_the_solution_and_shows_in_list grades for real.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import types
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from click.testing import CliRunner
from fakes import PASS_MARK, fake_grade, fake_result

from grader.cli import learner as cli_interview
from grader.cli.main import main
from grader.kata.catalog import get_kata
from grader.learner.progress import (FAILING, FAST, NOT_STARTED, PASSING, load_record, record_grade,
                                     record_path, status_from_best)
from grader.learner.watch import countdown, watch_file

T0 = datetime(2026, 1, 5, 10, 0, tzinfo=timezone.utc)
REPO = Path(__file__).resolve().parent.parent


def invoke(*args, input=None, env=None):
    return CliRunner().invoke(main, [str(a) for a in args], input=input, env=env, catch_exceptions=False)


@pytest.fixture()
def fake_grading(monkeypatch):
    monkeypatch.setattr("grader.grading.runner.grade", fake_grade)


@pytest.fixture()
def workspace(tmp_path):
    assert invoke("new", "vector_add", "--dir", tmp_path).exit_code == 0
    return tmp_path / "vector_add"


def run_kata(*args, env_extra=None, cwd=None):
    """`kata ARGS` in a new Python process (what survives has to be on disk)."""
    env = dict(os.environ, **(env_extra or {}))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return subprocess.run([sys.executable, "-m", "grader", *map(str, args)], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=120)


@pytest.mark.parametrize("command", [["hint"], ["watch"], ["reset"], ["solution"], ["interview"],
                                     ["interview", "start"], ["interview", "status"],
                                     ["interview", "submit"], ["interview", "abandon"]])
def test_new_commands_have_help(command):
    result = invoke(*command, "--help")
    assert result.exit_code == 0 and "Usage:" in result.output


# --- kata hint ------------------------------------------------------------------------------

def test_hints_come_one_level_at_a_time_and_are_remembered_across_processes(workspace):
    hints = get_kata("vector_add").hints
    first = invoke("hint", "vector_add", "--dir", workspace.parent)
    assert first.exit_code == 0
    assert "Hint 1/3 (nudge)" in first.output and hints[0] in first.output and hints[1] not in first.output

    second = run_kata("hint", "--dir", workspace)  # another process, the kata from the marker
    assert second.returncode == 0, second.stderr
    assert "Hint 2/3 (approach)" in second.stdout and hints[1] in second.stdout

    third = invoke("hint", "vector_add", "--dir", workspace.parent)
    assert "Hint 3/3 (near-solution)" in third.output and hints[2] in third.output
    assert "again for the next" not in third.output

    fourth = invoke("hint", "vector_add", "--dir", workspace.parent)
    assert fourth.exit_code == 0 and "All 3 hints" in fourth.output
    assert all(h in fourth.output for h in hints)
    assert [h["level"] for h in load_record(workspace, "vector_add").hints] == [1, 2, 3]


def test_hint_from_inside_the_workspace(workspace, monkeypatch):
    monkeypatch.chdir(workspace)
    result = invoke("hint")
    assert result.exit_code == 0 and "Hint 1/3" in result.output


def test_hint_without_a_workspace_is_a_usage_error(tmp_path):
    result = CliRunner().invoke(main, ["hint", "softmax", "--dir", str(tmp_path)])
    assert result.exit_code == 2 and "kata new softmax" in result.output
    result = CliRunner().invoke(main, ["hint", "--dir", str(tmp_path)])
    assert result.exit_code == 2 and "not a kata workspace" in result.output
    assert not (tmp_path / ".kata").exists()


def test_a_damaged_record_is_reported_and_kept(workspace):
    path = record_path(workspace)
    path.parent.mkdir()
    path.write_text("{not json")
    result = CliRunner().invoke(main, ["hint", "vector_add", "--dir", str(workspace.parent)])
    assert result.exit_code == 2 and str(path) in result.output and "damaged" in result.output
    assert path.read_text() == "{not json"


# --- the grade record and kata list ---------------------------------------------------------

def test_grade_keeps_the_last_grade_and_the_best_in_the_workspace(workspace, fake_grading):
    solution = workspace / "solution.py"
    solution.write_text(PASS_MARK + "\n")
    assert invoke("grade", workspace, "--interpret", env={"KATA_NOW": "2026-01-05T10:00:00Z"}).exit_code == 0
    solution.write_text("# broken now\n")
    assert invoke("grade", workspace, "--interpret", env={"KATA_NOW": "2026-01-05T10:05:00Z"}).exit_code == 1
    last = json.loads((workspace / ".kata" / "last_grade.json").read_text())
    assert last["status"] == "fail" and last["graded_at"] == "2026-01-05T10:05:00+00:00"
    assert last["schema"] == "triton-kata/grade/2"
    record = load_record(workspace, "vector_add")
    assert [g["status"] for g in record.grades] == ["pass", "fail"]
    assert record.best["status"] == "pass" and record.passed  # a later failure does not undo a pass


def test_grading_a_file_outside_a_workspace_records_nothing(tmp_path, fake_grading):
    loose = tmp_path / "try.py"
    loose.write_text(PASS_MARK + "\n")
    assert invoke("grade", loose, "--kata", "vector_add", "--interpret").exit_code == 0
    assert not (tmp_path / ".kata").exists()


def _list_rows(output: str) -> dict[str, tuple[str, str]]:
    """kata -> (status, best) from `kata list`'s table."""
    rows = {}
    for line in output.splitlines()[2:]:
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) >= 3:
            rows[cells[0]] = (cells[-2], cells[-1])
    return rows


def test_list_shows_status_and_best_score_from_the_workspaces(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "grader.store.database", None)  # no results store: workspaces only
    for name in ("vector_add", "softmax", "rms_norm"):
        invoke("new", name, "--dir", tmp_path)
    record_grade(tmp_path / "vector_add", fake_result("vector_add", "fail"), T0)
    record_grade(tmp_path / "vector_add", fake_result("vector_add", "pass"), T0 + timedelta(minutes=1))
    record_grade(tmp_path / "softmax", fake_result("softmax", "fail"), T0)
    rows = _list_rows(invoke("list", "--dir", tmp_path).output)
    assert rows["vector_add"] == ("passing", "50")
    assert rows["softmax"] == ("failing", "0")
    assert rows["rms_norm"] == ("not started", "-")

    # A GPU pass at or above the threshold is "fast", and outranks the interpreter's 50.
    record_grade(tmp_path / "vector_add",
                 fake_result("vector_add", "pass", "gpu", score=93.5, speedup=0.97, roofline=0.9),
                 T0 + timedelta(minutes=2))
    rows = _list_rows(invoke("list", "--dir", tmp_path).output)
    assert rows["vector_add"] == ("fast", "93.5")


def test_list_reads_the_workspace_it_is_run_in(workspace, monkeypatch):
    monkeypatch.setitem(sys.modules, "grader.store.database", None)
    record_grade(workspace, fake_result("vector_add", "pass"), T0)
    monkeypatch.chdir(workspace)
    assert _list_rows(invoke("list").output)["vector_add"] == ("passing", "50")


@pytest.mark.parametrize("status, mode, speedup, expected", [
    (None, None, None, NOT_STARTED),
    ("fail", "gpu", 2.0, FAILING),
    ("error", "interpret", None, FAILING),
    ("pass", "interpret", None, PASSING),
    ("pass", "gpu", 0.89, PASSING),
    ("pass", "gpu", 0.9, FAST),
])
def test_status_rules(status, mode, speedup, expected):
    assert status_from_best(status, mode, speedup, threshold=0.9) == expected


@dataclass
class BestScore:  # the shape grader.store.database.best_by_kata returns
    kata: str
    score: float
    status: str
    speedup: float | None
    mode: str
    graded_at: str


def fake_store(db_path: Path, bests: dict | Exception) -> types.ModuleType:
    store = types.ModuleType("grader.store.database")
    store.default_db_path = lambda: db_path

    def best_by_kata(path, handle=None):
        assert Path(path) == db_path
        if isinstance(bests, Exception):
            raise bests
        return bests

    store.best_by_kata = best_by_kata
    return store


def test_list_prefers_the_results_store_and_falls_back_to_the_workspace(tmp_path, monkeypatch):
    for name in ("vector_add", "softmax"):
        invoke("new", name, "--dir", tmp_path)
    record_grade(tmp_path / "softmax", fake_result("softmax", "fail"), T0)
    record_grade(tmp_path / "vector_add", fake_result("vector_add", "pass"), T0)
    db = tmp_path / "results.db"
    store = fake_store(db, {"softmax": BestScore("softmax", 91.0, "pass", 1.2, "gpu", "2026-01-05T10:00:00+00:00")})
    monkeypatch.setitem(sys.modules, "grader.store.database", store)

    rows = _list_rows(invoke("list", "--dir", tmp_path).output)
    assert rows["softmax"] == ("failing", "0")  # the store's database does not exist yet
    db.write_bytes(b"")
    rows = _list_rows(invoke("list", "--dir", tmp_path).output)
    assert rows["softmax"] == ("fast", "91")  # the store wins where it knows the kata
    assert rows["vector_add"] == ("passing", "50")  # the workspace fills in the rest


def test_list_survives_a_broken_store_with_a_warning(tmp_path, monkeypatch):
    db = tmp_path / "results.db"
    db.write_bytes(b"")
    monkeypatch.setitem(sys.modules, "grader.store.database", fake_store(db, RuntimeError("database is locked")))
    result = CliRunner().invoke(main, ["list", "--dir", str(tmp_path)])
    assert result.exit_code == 0 and "database is locked" in result.output
    assert _list_rows(result.output.split("Warning")[0])["softmax"] == ("not started", "-")


# --- kata reset -----------------------------------------------------------------------------

def test_reset_asks_then_restores_the_stub_keeping_every_backup(workspace):
    stub = get_kata("vector_add").stub_path.read_text()
    solution = workspace / "solution.py"
    solution.write_text("# attempt one\n")
    declined = CliRunner().invoke(main, ["reset", "vector_add", "--dir", str(workspace.parent)], input="n\n")
    assert declined.exit_code == 1 and "Nothing changed" in declined.output
    assert solution.read_text() == "# attempt one\n" and not list(workspace.glob("solution.bak*"))

    accepted = invoke("reset", "vector_add", "--dir", workspace.parent, input="y\n")
    assert accepted.exit_code == 0 and "solution.bak1.py" in accepted.output
    assert solution.read_text() == stub
    assert (workspace / "solution.bak1.py").read_text() == "# attempt one\n"

    solution.write_text("# attempt two\n")
    again = invoke("reset", "vector_add", "--dir", workspace, "--yes")  # --dir may be the workspace
    assert again.exit_code == 0 and solution.read_text() == stub
    assert (workspace / "solution.bak1.py").read_text() == "# attempt one\n"
    assert (workspace / "solution.bak2.py").read_text() == "# attempt two\n"

    unchanged = invoke("reset", "vector_add", "--dir", workspace)
    assert unchanged.exit_code == 0 and "nothing to do" in unchanged.output
    assert not (workspace / "solution.bak3.py").exists()


def test_reset_without_a_workspace_is_a_usage_error(tmp_path):
    result = CliRunner().invoke(main, ["reset", "vector_add", "--dir", str(tmp_path), "--yes"])
    assert result.exit_code == 2 and "kata new vector_add" in result.output


# --- kata solution --------------------------------------------------------------------------

def test_solution_needs_a_pass_or_force_which_is_recorded(workspace, monkeypatch):
    monkeypatch.setitem(sys.modules, "grader.store.database", None)
    reference = get_kata("vector_add").reference_path.read_text()
    refused = CliRunner().invoke(main, ["solution", "vector_add", "--dir", str(workspace.parent)])
    assert refused.exit_code == 1 and "--force" in refused.output and reference not in refused.output
    assert load_record(workspace, "vector_add").revealed_at is None

    forced = CliRunner().invoke(main, ["solution", "vector_add", "--dir", str(workspace.parent), "--force"],
                                env={"KATA_NOW": "2026-01-05T11:00:00Z"})
    assert forced.exit_code == 0 and reference in forced.output and "revealed" in forced.output
    assert load_record(workspace, "vector_add").revealed_at == "2026-01-05T11:00:00+00:00"


def test_solution_after_a_pass_is_not_a_reveal(workspace, monkeypatch):
    monkeypatch.setitem(sys.modules, "grader.store.database", None)
    record_grade(workspace, fake_result("vector_add", "pass"), T0)
    shown = CliRunner().invoke(main, ["solution", "vector_add", "--dir", str(workspace.parent)])
    assert shown.exit_code == 0 and get_kata("vector_add").reference_path.read_text() in shown.output
    assert load_record(workspace, "vector_add").revealed_at is None


def test_solution_after_a_pass_recorded_in_the_store(tmp_path, monkeypatch):
    db = tmp_path / "results.db"
    db.write_bytes(b"")
    store = fake_store(db, {"softmax": BestScore("softmax", 50.0, "pass", None, "interpret", "x")})
    monkeypatch.setitem(sys.modules, "grader.store.database", store)
    shown = CliRunner().invoke(main, ["solution", "softmax", "--dir", str(tmp_path)])
    assert shown.exit_code == 0 and "def softmax" in shown.output
    refused = CliRunner().invoke(main, ["solution", "rms_norm", "--dir", str(tmp_path)])
    assert refused.exit_code == 1


# --- kata watch -----------------------------------------------------------------------------

def test_watch_grades_on_every_content_change_only(tmp_path):
    path = tmp_path / "solution.py"
    path.write_text("v1\n")
    grades = []

    def edit(step):
        if step == 1:
            os.utime(path, ns=(1, 1))  # touched: same content, new mtime
        elif step == 2:
            path.write_text("v2 longer\n")
        elif step == 3:
            path.unlink()  # an editor's save: gone for a moment...
        elif step == 4:
            path.write_text("v3\n")  # ...then back with new content
        elif step == 6:
            path.write_text("v4!\n")

    steps = iter(range(1, 8))
    stop = {"now": False}

    def fake_sleep(seconds):
        step = next(steps)
        edit(step)
        stop["now"] = step == 7

    calls = watch_file(path, lambda: grades.append(path.read_text()), sleep=fake_sleep,
                       should_stop=lambda: stop["now"])
    assert grades == ["v1\n", "v2 longer\n", "v3\n", "v4!\n"] and calls == 4


def test_watch_command_regrades_on_save_and_stops_on_ctrl_c(workspace, fake_grading, monkeypatch):
    solution = workspace / "solution.py"
    naps = []

    def fake_sleep(seconds):
        naps.append(seconds)
        if len(naps) == 1:
            solution.write_text(PASS_MARK + "\n")
        elif len(naps) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(cli_interview, "sleep", fake_sleep)
    result = invoke("watch", workspace, "--interpret", "--interval", "0.1")
    assert result.exit_code == 0
    out = result.output
    assert out.index("vector_add FAIL") < out.index("vector_add PASS") < out.index("Stopped watching")
    assert out.count("vector_add PASS") == 1  # the third check saw no change: no grade
    assert naps == [0.1, 0.1, 0.1]
    assert [g["status"] for g in load_record(workspace, "vector_add").grades] == ["fail", "pass"]


def test_countdown_ticks_until_the_deadline():
    clock = {"t": T0}
    ticks = []

    def fake_sleep(seconds):
        clock["t"] += timedelta(seconds=seconds)

    countdown(T0 + timedelta(seconds=2.5), ticks.append, now=lambda: clock["t"], sleep=fake_sleep)
    assert ticks == [2.5, 1.5, 0.5, 0.0]


# --- for real -------------------------------------------------------------------------------

def test_real_grade_unlocks_the_solution_and_shows_in_list(workspace, monkeypatch):
    monkeypatch.setitem(sys.modules, "grader.store.database", None)
    shutil.copyfile(get_kata("vector_add").reference_path, workspace / "solution.py")
    assert invoke("grade", workspace, "--interpret").exit_code == 0
    assert _list_rows(invoke("list", "--dir", workspace.parent).output)["vector_add"] == ("passing", "50")
    shown = invoke("solution", "vector_add", "--dir", workspace.parent)
    assert shown.exit_code == 0 and "revealed" not in shown.output
