"""`kata history`, `export`, `import`, `leaderboard`, and `kata grade` recording into the store."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from grade_factory import make_grade
from grader.cli.main import main
from grader.store import database as store
from grader.store.database import StoredGrade

ROOT = Path(__file__).resolve().parent.parent


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def seeded_store(db: Path) -> None:
    store.record_grade(make_grade("vector_add", speedup=1.1, roofline=0.5), db, handle="alice")
    store.record_grade(make_grade("vector_add", speedup=2.0, roofline=0.9), db, handle="alice")
    store.record_grade(make_grade("softmax", mode="interpret"), db, handle="alice")
    store.record_grade(make_grade("softmax", speedup=1.4, roofline=0.7), db, handle="bob")


def snapshot(db: Path) -> list[str]:
    """Everything the store holds, as digests: equal snapshots, unchanged store."""
    return [g.digest() for g in store.stored_grades(db, everyone=True)]


@pytest.mark.parametrize("command", ["history", "export", "import", "leaderboard"])
def test_every_results_command_has_help(command):
    result = invoke(command, "--help")
    assert result.exit_code == 0 and "--db" in result.output


def test_history_lists_attempts_over_time_and_the_best_per_kata(tmp_path):
    db = tmp_path / "r.sqlite"
    seeded_store(db)
    result = invoke("history", "--db", db, "--handle", "alice")
    assert result.exit_code == 0, result.output
    attempts, best = result.stdout.split("Best per kata:")
    lines = [line for line in attempts.splitlines() if "practice" in line]
    assert [line.split()[2] for line in lines] == ["vector_add", "vector_add", "softmax"]  # oldest first
    assert "1.10x" in lines[0] and "2.00x" in lines[1] and "interpret" in lines[2]
    assert "bob" not in result.stdout
    best_rows = {line.split()[0]: line for line in best.splitlines() if line.split()[:1] in (["softmax"], ["vector_add"])}
    assert "2.00x" in best_rows["vector_add"] and "100" in best_rows["vector_add"]
    assert "50" in best_rows["softmax"]
    only = invoke("history", "softmax", "--db", db, "--handle", "alice")
    assert "vector_add" not in only.stdout and "softmax" in only.stdout


def test_history_of_an_empty_store_says_how_to_start(tmp_path):
    result = invoke("history", "--db", tmp_path / "none.sqlite", "--handle", "carol")
    assert result.exit_code == 0
    assert "No results recorded for carol" in result.output and "kata grade" in result.output


# ---- export and import -----------------------------------------------------------------------

def exported(tmp_path: Path, *extra) -> Path:
    db = tmp_path / "source.sqlite"
    if not db.exists():
        seeded_store(db)
    out = tmp_path / "export.json"
    result = invoke("export", "--db", db, "--out", out, *extra)
    assert result.exit_code == 0, result.output
    return out


def test_export_writes_the_documented_format(tmp_path, monkeypatch):
    monkeypatch.setenv("KATA_HANDLE", "alice")
    data = json.loads(exported(tmp_path).read_text())
    assert data["schema"] == "triton-kata/results/1" and data["exported_by"] == "alice"
    assert data["count"] == 3 == len(data["results"])
    assert {r["handle"] for r in data["results"]} == {"alice"}
    record = data["results"][0]
    assert set(record) == {"id", "handle", "graded_at", "label", "grade", "sha256"}
    assert record["grade"]["schema"] == "triton-kata/grade/2" and record["grade"]["kata"] == "vector_add"
    everyone = json.loads(exported(tmp_path, "--all").read_text())
    assert {r["handle"] for r in everyone["results"]} == {"alice", "bob"}
    stdout = invoke("export", "--db", tmp_path / "source.sqlite", "--kata", "softmax", "--all")
    assert [r["handle"] for r in json.loads(stdout.stdout)["results"]] == ["alice", "bob"]


def test_import_merges_once_and_a_second_import_adds_nothing(tmp_path):
    file = exported(tmp_path, "--all")
    team = tmp_path / "team.sqlite"
    store.record_grade(make_grade("rms_norm"), team, handle="carol")
    first = invoke("import", file, "--db", team)
    assert first.exit_code == 0, first.output
    assert "Imported 4 new result(s)" in first.output
    # Ordered by graded_at, carol's local grade may fall anywhere among the imported ones.
    imported = [g.digest() for g in store.stored_grades(team, everyone=True) if g.handle != "carol"]
    assert imported == snapshot(tmp_path / "source.sqlite")
    assert {a.origin for a in store.attempts(team, everyone=True)} == {"local", "import"}
    again = invoke("import", file, file, "--db", team)
    assert again.exit_code == 0 and "Imported 0 new result(s)" in again.output
    assert "4 were already there" in again.output
    assert len(snapshot(team)) == 5
    # Exported again from the team store, the same results carry the same checksums.
    re_exported = json.loads(invoke("export", "--db", team, "--all").stdout)
    original = json.loads(file.read_text())
    assert {r["sha256"] for r in original["results"]} <= {r["sha256"] for r in re_exported["results"]}


def _reseal(record: dict) -> None:
    """Recompute a record's checksum, as a careful forger would."""
    record["sha256"] = StoredGrade(record["id"], record["handle"], record["graded_at"], record["label"],
                                   record["grade"]).digest()


def _bump_score(d):
    d["results"][0]["grade"]["score"] = 100.0


def _resealed(change):
    def edit(d):
        change(d["results"][0])
        _reseal(d["results"][0])
    return edit


TAMPERINGS = {
    "edited score": (_bump_score, "does not match its sha256"),
    "resealed incorrect grade with points": (
        _resealed(lambda r: r["grade"].update(correct=False)), "an incorrect grade scores 0"),
    "resealed pass that is not correct": (
        _resealed(lambda r: r["grade"].update(correct=False, score=0.0, status="pass")),
        "status is pass but the grade is not correct"),
    "resealed interpreter speedup": (
        _resealed(lambda r: r["grade"].update(mode="interpret")), "speed cannot be measured under the interpreter"),
    "resealed breakdown mismatch": (
        _resealed(lambda r: r["grade"]["score_breakdown"].update(total=12.5)), "score_breakdown.total"),
    "resealed missing kata": (_resealed(lambda r: r["grade"].pop("kata")), "lacks 'kata'"),
    "resealed bad case status": (
        _resealed(lambda r: r["grade"]["tasks"][0]["cases"][0].update(status="great")), "invalid 'status'"),
    "resealed score above 100": (_resealed(lambda r: r["grade"].update(score=250.0)), "invalid 'score'"),
    "dropped record": (lambda d: d["results"].pop(), "cut short or edited"),
    "unknown envelope field": (lambda d: d.update(extra=1), "unknown field(s) extra"),
    "unknown record field": (_resealed(lambda r: r.update(note="hi")), "unknown field(s) note"),
    "newer schema": (lambda d: d.update(schema="triton-kata/results/7"), "newer triton-kata"),
    "not a results file": (lambda d: d.update(schema="something/else"), "not a triton-kata results file"),
    "bad time": (_resealed(lambda r: r.update(graded_at="yesterday")), "graded_at must be a UTC time"),
    "bad handle": (_resealed(lambda r: r.update(handle="<b>x</b>")), "handle is not a valid handle"),
    "handle with a newline": (_resealed(lambda r: r.update(handle="alice\n")), "handle is not a valid handle"),
    "bad label": (_resealed(lambda r: r.update(label="Mock Interview")), "label must be a short lower-case word"),
    "bad id": (_resealed(lambda r: r.update(id="1234")), "id must be 32 hex digits"),
    "duplicate id, other content": (
        lambda d: (d["results"].append(copy.deepcopy(d["results"][1])),
                   d["results"][-1].update(id=d["results"][0]["id"]), _reseal(d["results"][-1]),
                   d.update(count=len(d["results"]))),
        "appears twice with different content"),
}


@pytest.mark.parametrize("name", sorted(TAMPERINGS))
def test_a_tampered_file_is_rejected_and_the_store_is_unchanged(tmp_path, name):
    change, message = TAMPERINGS[name]
    good = exported(tmp_path, "--all")
    bad = tmp_path / "bad.json"
    data = json.loads(good.read_text())
    change(data)
    bad.write_text(json.dumps(data))
    team = tmp_path / "team.sqlite"
    store.record_grade(make_grade("rms_norm"), team, handle="carol")
    before = snapshot(team)
    result = invoke("import", good, bad, "--db", team)  # the good file is not imported either
    assert result.exit_code == 2, result.output
    assert message in result.stderr and "bad.json" in result.stderr
    assert "nothing was imported" in result.stderr
    assert snapshot(team) == before


@pytest.mark.parametrize("content, message", [
    ('{"schema": "triton-kata/results/1", "results": [', "not valid JSON"),
    ("[1, 2, 3]", "expected a JSON object"),
    ("", "not valid JSON"),
    (b"\xff\xfe\x00garbage", "cannot read it"),
])
def test_a_malformed_file_is_rejected_with_exit_code_2(tmp_path, content, message):
    bad = tmp_path / "broken.json"
    bad.write_bytes(content if isinstance(content, bytes) else content.encode())
    team = tmp_path / "team.sqlite"
    result = invoke("import", bad, "--db", team)
    assert result.exit_code == 2 and message in result.stderr
    assert not team.exists()
    missing = invoke("import", tmp_path / "nope.json", "--db", team)
    assert missing.exit_code == 2 and "does not exist" in missing.output


def test_a_conflicting_copy_of_a_stored_result_is_rejected(tmp_path):
    good = exported(tmp_path, "--all")
    team = tmp_path / "team.sqlite"
    assert invoke("import", good, "--db", team).exit_code == 0
    before = snapshot(team)
    forged = json.loads(good.read_text())
    forged["results"][0]["grade"]["speedup"] = 9.9  # same id, other content, resealed
    forged["results"][0]["grade"]["tasks"][0]["speedup"] = 9.9
    _reseal(forged["results"][0])
    forged_file = tmp_path / "forged.json"
    forged_file.write_text(json.dumps(forged))
    result = invoke("import", forged_file, "--db", team)
    assert result.exit_code == 2 and "already in the store with different content" in result.stderr
    assert snapshot(team) == before


def test_unknown_fields_inside_a_grade_survive_export_and_import(tmp_path):
    good = exported(tmp_path, "--handle", "bob")
    data = json.loads(good.read_text())
    data["results"][0]["grade"]["cheat"] = "cached the output"
    data["results"][0]["grade"]["tasks"][0]["cases"][0]["cheat"] = "cached the output"
    _reseal(data["results"][0])
    good.write_text(json.dumps(data))
    team = tmp_path / "team.sqlite"
    assert invoke("import", good, "--db", team).exit_code == 0
    first = store.stored_grades(team, everyone=True)[0]
    assert first.grade["cheat"] == "cached the output"
    assert first.grade["tasks"][0]["cases"][0]["cheat"] == "cached the output"


def _as_version_1(grade: dict) -> None:
    """A grade as a grader before diagnoses wrote it: schema 1, a cheat repeated per case."""
    grade["schema"] = "triton-kata/grade/1"
    grade.pop("diagnoses", None)
    for task in grade["tasks"]:
        for case in task["cases"]:
            case.pop("diagnosis", None)
    if grade["status"] != "pass":
        grade["cheat"] = "partial_work"
        grade["cheats"] = [{"reason": "partial_work", "case": f"{grade['kata']}/case0/float32",
                            "message": "the kernel never wrote them"}] * 2


def test_an_export_of_version_1_grades_still_imports(tmp_path):
    db = tmp_path / "source.sqlite"
    seeded_store(db)
    store.record_grade(make_grade("rms_norm", correct=False), db, handle="alice")
    data = json.loads(exported(tmp_path, "--all").read_text())
    for record in data["results"]:
        _as_version_1(record["grade"])
        _reseal(record)
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    team = tmp_path / "team.sqlite"
    result = invoke("import", old, "--db", team)
    assert result.exit_code == 0, result.output
    assert "Imported 5 new result(s)" in result.output
    stored = store.stored_grades(team, everyone=True)
    assert {g.grade["schema"] for g in stored} == {"triton-kata/grade/1"}
    failed = next(g for g in stored if g.grade["kata"] == "rms_norm")
    assert failed.grade["cheat"] == "partial_work" and "diagnoses" not in failed.grade
    # Both versions live side by side in one store, and every reader copes.
    store.record_grade(make_grade("vector_add", speedup=3.0), team, handle="alice")
    store.record_grade(make_grade("rms_norm", correct=False), team, handle="alice")
    schemas = [g.grade["schema"] for g in store.stored_grades(team, everyone=True)]
    assert schemas.count("triton-kata/grade/1") == 5 and schemas.count("triton-kata/grade/2") == 2
    history = invoke("history", "--db", team, "--handle", "alice")
    assert history.exit_code == 0 and "rms_norm" in history.output
    assert invoke("leaderboard", "--db", team, "--out", tmp_path / "board").exit_code == 0
    again = invoke("export", "--db", team, "--all", "--out", tmp_path / "again.json")
    assert again.exit_code == 0
    assert invoke("import", tmp_path / "again.json", "--db", tmp_path / "third.sqlite").exit_code == 0


def test_a_grade_of_an_unknown_newer_schema_is_refused(tmp_path):
    data = json.loads(exported(tmp_path, "--handle", "bob").read_text())
    data["results"][0]["grade"]["schema"] = "triton-kata/grade/9"
    _reseal(data["results"][0])
    future = tmp_path / "future.json"
    future.write_text(json.dumps(data))
    result = invoke("import", future, "--db", tmp_path / "team.sqlite")
    assert result.exit_code == 2 and "schema" in result.stderr


# ---- leaderboard -----------------------------------------------------------------------------

def test_leaderboard_writes_html_and_markdown(tmp_path):
    db = tmp_path / "r.sqlite"
    seeded_store(db)
    out = tmp_path / "board"
    result = invoke("leaderboard", "--db", db, "--out", out)
    assert result.exit_code == 0, result.output
    html = (out / "leaderboard.html").read_text()
    md = (out / "leaderboard.md").read_text()
    assert "<svg" in html and "alice" in html and "bob" in html
    assert "| 1 | alice | 100.0 | 2.00x | 90.0% | pass |" in md
    only = invoke("leaderboard", "--db", db, "--out", out, "--kata", "softmax")
    assert only.exit_code == 0
    assert "vector_add" not in (out / "leaderboard.md").read_text()


def test_leaderboard_filters_that_match_nothing_are_usage_errors(tmp_path):
    db = tmp_path / "r.sqlite"
    seeded_store(db)
    result = invoke("leaderboard", "--db", db, "--out", tmp_path, "--device", "A100")
    assert result.exit_code == 2
    assert "NVIDIA H100 80GB HBM3" in result.stderr and "softmax, vector_add" in result.stderr
    assert not (tmp_path / "leaderboard.html").exists()


def test_leaderboard_of_an_empty_store_says_so(tmp_path):
    result = invoke("leaderboard", "--db", tmp_path / "none.sqlite", "--out", tmp_path)
    assert result.exit_code == 0
    assert "No results recorded yet" in (tmp_path / "leaderboard.md").read_text()


# ---- kata grade records ----------------------------------------------------------------------

def test_kata_grade_records_the_grade_it_prints(tmp_path):
    """End to end: a real interpreter grade of the vector_add reference lands in the store."""
    solution = tmp_path / "solution.py"
    solution.write_text((ROOT / "reference" / "vector_add.py").read_text())
    db = tmp_path / "r.sqlite"
    result = invoke("grade", solution, "--kata", "vector_add", "--interpret", "--json",
                    "--db", db, "--handle", "dana")
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    [a] = store.attempts(db, handle="dana")
    import torch
    import triton
    assert (a.kata, a.mode, a.status, a.score, a.label) == ("vector_add", "interpret", "pass", 50.0, "practice")
    assert a.submission_sha256 == hashlib.sha256(solution.read_bytes()).hexdigest()
    assert (a.torch_version, a.triton_version, a.grader_version) == (torch.__version__, triton.__version__, "0.1.0")
    assert a.device == printed["device"] and a.cases_total > 0 and a.cases_passed == a.cases_total
    [stored] = store.stored_grades(db, handle="dana")
    assert stored.grade == printed


@pytest.fixture()
def fake_grade(monkeypatch):
    """`kata grade` with the runner replaced by a made-up result (no kernel runs)."""
    monkeypatch.setattr("grader.grading.runner.grade", lambda *args, **kwargs: make_grade(mode="interpret"))


def test_kata_grade_with_an_unwritable_store_still_prints_and_warns(tmp_path, fake_grade):
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    solution = tmp_path / "solution.py"
    solution.write_text("")
    result = invoke("grade", solution, "--kata", "vector_add", "--interpret", "--json",
                    "--db", blocked / "results.sqlite")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["status"] == "pass"
    assert "Warning: this grade was not recorded" in result.stderr


def test_kata_grade_no_record_and_env_db(tmp_path, fake_grade, monkeypatch):
    solution = tmp_path / "solution.py"
    solution.write_text("")
    db = tmp_path / "env.sqlite"
    monkeypatch.setenv("KATA_DB", str(db))
    assert invoke("grade", solution, "--kata", "vector_add", "--interpret", "--no-record").exit_code == 0
    assert not db.exists()
    assert invoke("grade", solution, "--kata", "vector_add", "--interpret").exit_code == 0
    assert len(store.attempts(db, everyone=True)) == 1
    bad = invoke("grade", solution, "--kata", "vector_add", "--interpret", "--handle", "no spaces")
    assert bad.exit_code == 2 and "Invalid handle" in bad.output
