"""Mock interviews: selection, the clock (KATA_NOW, never sleeping), lateness, hints, reveals,
the verdict, a damaged state file, and the debrief in both formats.

Grades are fakes (fakes.fake_grade) except in test_a_real_interview_end_to_end.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from fakes import PASS_MARK, fake_grade, fake_result
from test_learner import run_kata

from grader.cli import learner as cli_interview
from grader.cli.main import main
from grader.grading.runner import grade as real_grade  # bound before the autouse fixture replaces it
from grader.kata import tracks
from grader.kata.catalog import all_katas, get_kata
from grader.kata.tracks import Track, TrackError, load_tracks, parse_tracks
from grader.learner.debrief import render_debrief
from grader.learner.interview import (MIX, STATE_FILE, Interview, InterviewError, InterviewKata,
                                      load_interview, pick_katas, pick_track, save_interview, summarise,
                                      verdict)
from grader.learner.progress import FAILING, PASSING, KataProgress, record_grade

T0 = datetime(2026, 1, 5, 10, 0, tzinfo=timezone.utc)


def at(minutes: float) -> dict[str, str]:
    """The environment that sets the clock to T0 + minutes."""
    return {"KATA_NOW": (T0 + timedelta(minutes=minutes)).isoformat()}


def kata_cli(*args, minutes: float = 0, input=None):
    return CliRunner().invoke(main, [str(a) for a in args], env=at(minutes), input=input)


ORIGINAL_THREE = ("vector_add", "softmax", "rms_norm")  # the selection logic, on a fixed catalogue


@pytest.fixture(autouse=True)
def no_store_and_fake_grading(monkeypatch):
    monkeypatch.setitem(sys.modules, "grader.store.database", None)  # progress from workspaces only
    monkeypatch.setattr("grader.grading.runner.grade", fake_grade)
    # The interview logic on a fixed catalogue (the first three katas), whatever the real one holds.
    from grader.kata import catalog
    every = catalog.all_katas
    monkeypatch.setattr(catalog, "all_katas", lambda: [k for k in every() if k.name in ORIGINAL_THREE])


def start(tmp_path, *extra, minutes: float = 0) -> Path:
    folder = tmp_path / "iv"
    result = kata_cli("interview", "start", "--dir", folder, *extra, minutes=minutes)
    assert result.exit_code == 0, result.output
    return folder


def solve(folder: Path, kata: str) -> None:
    (folder / kata / "solution.py").write_text(PASS_MARK + "\n")


# --- choosing katas -------------------------------------------------------------------------

def test_pick_puts_unsolved_katas_first_then_the_weakest():
    katas = [k for k in all_katas() if k.name in ORIGINAL_THREE]
    progress = {"vector_add": KataProgress("vector_add", PASSING, 50.0),
                "softmax": KataProgress("softmax", FAILING, 0.0)}
    assert [k.name for k in pick_katas(katas, progress, 2, seed=1)] == ["rms_norm", "softmax"]
    progress["rms_norm"] = KataProgress("rms_norm", PASSING, 40.0)
    assert [k.name for k in pick_katas(katas, progress, 3, seed=1)] == ["softmax", "rms_norm", "vector_add"]


def test_pick_is_reproducible_with_a_seed_and_filters():
    katas = [k for k in all_katas() if k.name in ORIGINAL_THREE]
    picks = {tuple(k.name for k in pick_katas(katas, {}, 2, seed=s)) for s in range(20)}
    assert len(picks) > 1  # the seed matters...
    assert [k.name for k in pick_katas(katas, {}, 2, seed=7)] == [k.name for k in pick_katas(katas, {}, 2, seed=7)]
    assert [k.name for k in pick_katas(katas, {}, 3, seed=7, difficulty="easy")] == ["vector_add"]
    assert {k.name for k in pick_katas(katas, {}, 3, seed=7, topic="Reduction")} == {"softmax", "rms_norm"}
    with pytest.raises(InterviewError, match="No kata matches difficulty hard"):
        pick_katas(katas, {}, 2, seed=7, difficulty="hard")  # none of the three is hard


def test_start_scaffolds_the_katas_and_prints_the_plan(tmp_path):
    result = kata_cli("interview", "start", "--dir", tmp_path / "iv", "--count", "2", "--seed", "5")
    assert result.exit_code == 0, result.output
    state = json.loads((tmp_path / "iv" / STATE_FILE).read_text())
    names = [k["name"] for k in state["katas"]]
    assert len(names) == 2 and state["seed"] == 5 and state["status"] == "running"
    budget = sum(get_kata(n).minutes for n in names)
    assert state["minutes"] == budget  # the default countdown: the katas' budgets added up
    assert state["deadline"] == (T0 + timedelta(minutes=budget)).isoformat()
    for name in names:
        assert (tmp_path / "iv" / name / "solution.py").read_text() == get_kata(name).stub_path.read_text()
        assert name in result.output
    assert "Seed 5" in result.output and f"{budget} min" in result.output

    again = kata_cli("interview", "start", "--dir", tmp_path / "iv2", "--count", "2", "--seed", "5")
    assert [k["name"] for k in json.loads((tmp_path / "iv2" / STATE_FILE).read_text())["katas"]] == names


def test_start_needs_a_new_folder(tmp_path):
    folder = start(tmp_path, "--count", "1")
    before = (folder / STATE_FILE).read_text()
    again = kata_cli("interview", "start", "--dir", folder)
    assert again.exit_code == 2 and "already holds an interview" in again.output
    assert (folder / STATE_FILE).read_text() == before
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    assert kata_cli("interview", "start", "--dir", tmp_path / "busy").exit_code == 2


# --- tracks ---------------------------------------------------------------------------------

TRACK_NAMES = ["warmup", "llm-training", "llm-inference", "fundamentals", "all"]


def test_the_tracks_file_names_only_katas_or_katas_to_come():
    """A typo in katas/tracks.yaml fails here (and in every --track command); a kata that lands
    must be placed in a track."""
    from grader.kata.catalog import kata_dirs
    installed = set(kata_dirs())
    defined = load_tracks(installed)  # raises TrackError on a name neither installed nor coming
    assert list(defined) == TRACK_NAMES
    assert defined["all"].katas is None  # "*": the whole catalogue
    placed = {name for t in defined.values() for name in t.katas or ()}
    unplaced = sorted(installed - placed)
    assert not unplaced, f"place these katas in a track of katas/tracks.yaml: {unplaced}"


def test_a_typo_in_the_tracks_file_cannot_go_unnoticed(tmp_path, monkeypatch):
    known = ["vector_add", "softmax"]
    good = {"coming": ["flash_attention"],
            "tracks": {"t": {"description": "d", "katas": ["softmax", "flash_attention"]}}}
    assert parse_tracks(good, known)["t"].katas == ("softmax", "flash_attention")
    typo = {"tracks": {"t": {"description": "d", "katas": ["sofmax"]}}}
    with pytest.raises(TrackError, match="'sofmax' is neither an installed kata nor listed under "
                                         "`coming` \\(did you mean 'softmax'\\?\\)"):
        parse_tracks(typo, known)
    for broken, why in [({"tracks": {}}, "non-empty `tracks`"),
                        ({"tracks": {"t": {"katas": ["softmax"]}}}, "needs a `description`"),
                        ({"tracks": {"t": {"description": "d", "katas": []}}}, "non-empty list"),
                        ({"tracks": {"t": {"description": "d", "katas": ["softmax", "softmax"]}}}, "twice"),
                        ({"tracks": {"T t": {"description": "d", "katas": "*"}}}, "lowercase")]:
        with pytest.raises(TrackError, match=why):
            parse_tracks(broken, known)

    path = tmp_path / "tracks.yaml"
    path.write_text("tracks:\n  t:\n    description: d\n    katas: [vector_ad]\n")
    monkeypatch.setattr(tracks, "tracks_path", lambda: path)
    for command in (["interview", "start", "--track", "t", "--dir", tmp_path / "iv"], ["list", "--track", "t"]):
        result = kata_cli(*command)
        assert result.exit_code == 2 and "tracks file is broken" in result.output, command
        assert "'vector_ad'" in result.output and "did you mean 'vector_add'" in result.output
    assert not (tmp_path / "iv").exists()


def test_an_unknown_track_is_a_usage_error_listing_the_tracks(tmp_path):
    for command in (["interview", "start", "--track", "warmpu", "--dir", tmp_path / "iv"],
                    ["list", "--track", "warmpu"]):
        result = kata_cli(*command)
        assert result.exit_code == 2, command
        assert "Unknown track 'warmpu'. Did you mean 'warmup'?" in result.output
        assert "Tracks: " + ", ".join(TRACK_NAMES) + "." in result.output
    assert not (tmp_path / "iv").exists()


def fake_kata(name: str, difficulty: str, minutes: int, topics=("memory access",)):
    return dataclasses.replace(get_kata("vector_add"), name=name, difficulty=difficulty,
                               minutes=minutes, topics=tuple(topics))


# Budgets fixed here, whatever the real katas' become; e1 is weaker than e2, m1 < m2 < m3, h1 < h2.
CATALOGUE = [fake_kata("e1", "easy", 10), fake_kata("e2", "easy", 15), fake_kata("m1", "medium", 25),
             fake_kata("m2", "medium", 20), fake_kata("m3", "medium", 35), fake_kata("h1", "hard", 50),
             fake_kata("h2", "hard", 60)]
WEAKEST_FIRST = {k.name: KataProgress(k.name, PASSING, score) for k, score in
                 zip(CATALOGUE, (10, 20, 10, 20, 30, 10, 20))}


def names(katas) -> list[str]:
    return [k.name for k in katas]


@pytest.mark.parametrize("minutes, expected", [
    (120, ["e1", "m1", "m2", "h1"]),  # e1 10, m1 25, h1 50, m2 20 = 105; then nothing fits in 15
    (90, ["e1", "m1", "h1"]),  # 85: m2 needs 20 of the 5 left
    (60, ["e1", "m1", "m2"]),  # no hard fits after the opener and a medium: they are skipped
    (25, ["e1"]),  # the weakest medium (m1, 25 min) does not fit in 15; m2 (20) does not either
    (None, ["e1", "m1", "h1"]),  # no --minutes: one of each difficulty
])
def test_a_mix_opens_easy_then_medium_and_hard_within_the_minutes(minutes, expected):
    picked = pick_track(CATALOGUE, WEAKEST_FIRST, seed=1, minutes=minutes)
    assert names(picked) == expected
    if minutes:
        assert sum(k.minutes for k in picked) <= minutes


def test_a_mix_keeps_the_weakest_first_order_within_each_difficulty():
    progress = dict(WEAKEST_FIRST, m3=KataProgress("m3", FAILING, 0.0), h2=KataProgress("h2", FAILING, 0.0))
    assert names(pick_track(CATALOGUE, progress, seed=1)) == ["e1", "m3", "h2"]  # unsolved first
    assert names(pick_track(CATALOGUE, progress, seed=1, minutes=110)) == ["e1", "m3", "h2"]  # 105
    # after the opener m3 (35 min) does not fit in the 30 left: the next weakest medium does
    assert names(pick_track(CATALOGUE, progress, seed=1, minutes=40)) == ["e1", "m1"]
    assert names(pick_track(CATALOGUE, progress, seed=1, minutes=80)) == ["e1", "m3", "m1"]  # no hard fits
    assert names(pick_track(CATALOGUE, progress, seed=1, count=5)) == ["e1", "m3", "m1", "h2", "h1"]
    assert names(pick_track(CATALOGUE, progress, seed=1, count=1)) == ["e1"]
    # the same seed and progress give the same katas; the seed breaks ties
    picks = {tuple(names(pick_track(CATALOGUE, {}, seed=s, minutes=120))) for s in range(20)}
    assert len(picks) > 1
    assert pick_track(CATALOGUE, {}, seed=4, minutes=120) == pick_track(CATALOGUE, {}, seed=4, minutes=120)


def test_a_track_narrows_the_choice_and_skips_katas_still_to_come():
    track = Track("t", "test", ("m2", "h2", "flash_attention"))  # flash_attention: not installed
    assert names(pick_track(CATALOGUE, WEAKEST_FIRST, 1, track)) == ["m2", "h2"]  # no easy: no opener
    assert names(pick_track(CATALOGUE, WEAKEST_FIRST, 1, track, minutes=70)) == ["m2"]
    assert names(pick_track(CATALOGUE, WEAKEST_FIRST, 1, track, "hard")) == ["h2"]
    assert names(pick_track(CATALOGUE, WEAKEST_FIRST, 1, None, "medium", minutes=50)) == ["m1", "m2"]
    assert names(pick_track(CATALOGUE, WEAKEST_FIRST, 1, None, "medium")) == ["m1", "m2"]  # DEFAULT_COUNT
    assert names(pick_track(CATALOGUE, WEAKEST_FIRST, 1, None, "medium", minutes=200)) == ["m1", "m2", "m3"]
    with pytest.raises(InterviewError, match="No kata matches track t and difficulty easy: see "
                                             "`kata list --track t`"):
        pick_track(CATALOGUE, {}, 1, track, "easy")
    with pytest.raises(InterviewError, match="No kata fits in 15 min: the shortest that matches, m2, "
                                             "takes 20 min"):
        pick_track(CATALOGUE, {}, 1, track, MIX, minutes=15)
    topical = [fake_kata("r1", "medium", 20, ["reductions"]), *CATALOGUE]
    assert names(pick_track(topical, {}, 1, None, MIX, topic="reduction")) == ["r1"]


@pytest.fixture()
def test_track(tmp_path, monkeypatch):
    """A tracks file over the fixed three-kata catalogue (easy vector_add, medium softmax and
    rms_norm), plus a kata still to come."""
    path = tmp_path / "tracks.yaml"
    path.write_text(yaml.safe_dump({"coming": ["flash_attention"], "tracks": {
        "t": {"description": "the test track", "katas": ["vector_add", "softmax", "rms_norm", "flash_attention"]},
        "medium-only": {"description": "no opener", "katas": ["softmax", "rms_norm"]},
        "all": {"description": "the whole catalogue", "katas": "*"}}}))
    monkeypatch.setattr(tracks, "tracks_path", lambda: path)
    return {k: get_kata(k).minutes for k in ORIGINAL_THREE}


def test_start_with_a_track_fits_the_minutes_and_records_the_track(tmp_path, test_track):
    minutes = test_track["vector_add"] + test_track["softmax"] + test_track["rms_norm"]
    result = kata_cli("interview", "start", "--dir", tmp_path / "iv", "--track", "t", "--minutes",
                      minutes - 1, "--seed", 3)
    assert result.exit_code == 0, result.output
    state = json.loads((tmp_path / "iv" / STATE_FILE).read_text())
    picked = [k["name"] for k in state["katas"]]
    assert picked[0] == "vector_add" and len(picked) == 2  # the opener, then one medium: all three do not fit
    assert state["minutes"] == minutes - 1  # --minutes is the countdown, as without a track
    assert state["selection"] == {"track": "t", "difficulty": "mix", "count": None, "topic": None}
    assert "Chosen from the t track: an easy opener, then medium and hard whose budgets fit in" in result.output
    assert f"`kata interview start --track t --minutes {minutes - 1} --seed 3`" in result.output

    again = kata_cli("interview", "start", "--dir", tmp_path / "iv2", "--track", "t", "--minutes",
                     minutes - 1, "--seed", 3)
    assert [k["name"] for k in json.loads((tmp_path / "iv2" / STATE_FILE).read_text())["katas"]] == picked

    every = kata_cli("interview", "start", "--dir", tmp_path / "iv3", "--track", "t")
    state = json.loads((tmp_path / "iv3" / STATE_FILE).read_text())
    assert [k["name"] for k in state["katas"]][0] == "vector_add" and len(state["katas"]) == 3
    assert state["minutes"] == minutes  # no --minutes: the budgets added up, as before

    medium = kata_cli("interview", "start", "--dir", tmp_path / "iv4", "--track", "medium-only",
                      "--difficulty", "easy")
    assert medium.exit_code == 2 and "No kata matches track medium-only and difficulty easy" in medium.output
    short = kata_cli("interview", "start", "--dir", tmp_path / "iv5", "--track", "t", "--minutes", 5)
    assert short.exit_code == 2 and "No kata fits in 5 min" in short.output
    assert not (tmp_path / "iv4").exists() and not (tmp_path / "iv5").exists()


def test_difficulty_mix_without_a_track_chooses_from_the_catalogue(tmp_path, test_track):
    folder = start(tmp_path, "--difficulty", "mix", "--count", "2", "--seed", "1")
    state = json.loads((folder / STATE_FILE).read_text())
    assert [k["name"] for k in state["katas"]][0] == "vector_add" and len(state["katas"]) == 2
    assert state["selection"]["track"] is None and state["selection"]["difficulty"] == "mix"


def test_the_debrief_names_katas_of_the_same_track(tmp_path, test_track):
    folder = start(tmp_path, "--track", "t", "--count", "2", "--seed", "2")
    first, second = [k["name"] for k in json.loads((folder / STATE_FILE).read_text())["katas"]]
    other = ({"softmax", "rms_norm"} - {second}).pop()  # the medium left out; shares "reductions"
    solve(folder, first)
    submitted = kata_cli("interview", "submit", "--dir", folder, "--interpret", minutes=5)
    assert submitted.exit_code == 0, submitted.output
    summary = json.loads((folder / STATE_FILE).read_text())["summary"]
    assert summary["track"] == "t" and summary["more"] == [other]
    assert [(i["kata"], i["related"]) for i in summary["study"]] == [(second, [other])]
    assert f"The same topics in the t track: `{other}`" in (folder / "debrief.md").read_text()
    assert f"The same topics in the t track: <code>{other}</code>" in (folder / "debrief.html").read_text()


def test_a_clean_pass_points_to_the_rest_of_the_track(tmp_path):
    folder = tmp_path / "iv"
    (folder / "vector_add").mkdir(parents=True)
    itv = Interview(folder=folder, started_at=T0, deadline=T0 + timedelta(minutes=10), minutes=10, seed=1,
                    katas=[InterviewKata("vector_add", 10)], selection={"track": "t"})
    save_interview(itv)
    record_grade(folder / "vector_add", fake_result("vector_add", "pass"), T0 + timedelta(minutes=4))
    pool = [get_kata(k) for k in ORIGINAL_THREE]
    summary = summarise(load_interview(folder), {"vector_add": get_kata("vector_add")},
                        T0 + timedelta(minutes=5), pool)
    assert summary.study == [] and summary.more == ["rms_norm", "softmax"]
    md = render_debrief(summary, "md")
    assert ("Every kata passed on time, unaided. Next from the t track: `rms_norm`, `softmax`. "
            "Another round: `kata interview start --track t`.") in md
    untracked = dataclasses.replace(load_interview(folder), selection={})  # an interview without --track
    plain = summarise(untracked, {"vector_add": get_kata("vector_add")}, T0 + timedelta(minutes=5))
    assert "Try a harder one: `kata interview start --difficulty hard`." in render_debrief(plain, "md")


# --- the clock and lateness -----------------------------------------------------------------

def test_state_survives_a_new_process(tmp_path):
    folder = start(tmp_path, "--count", "2", "--minutes", "30")
    later = run_kata("interview", "status", env_extra=at(10), cwd=folder / json.loads(
        (folder / STATE_FILE).read_text())["katas"][0]["name"])  # from inside a kata folder
    assert later.returncode == 0, later.stderr
    assert "Time left 20:00 of 30 min" in later.stdout and "not graded" in later.stdout


def test_a_grade_after_the_deadline_is_late_and_counts_half(tmp_path):
    # --minutes 45: the two shortest medium katas (20 and 25 min) fit, and the budgets may not exceed it
    folder = start(tmp_path, "--difficulty", "medium", "--count", "2", "--minutes", "45", "--seed", "1")
    first, second = [k["name"] for k in json.loads((folder / STATE_FILE).read_text())["katas"]]
    solve(folder, first)
    on_time = kata_cli("grade", folder / first, "--interpret", minutes=12)
    assert on_time.exit_code == 0 and "late" not in on_time.output
    solve(folder, second)
    late = kata_cli("grade", folder / second, "--interpret", minutes=50)
    assert late.exit_code == 0 and "recorded as late" in late.output

    status = kata_cli("interview", "status", "--dir", folder, minutes=51)
    assert "Time is up" in status.output and "6:00 ago" in status.output
    assert "passing (late)" in status.output

    submitted = kata_cli("interview", "submit", "--dir", folder, "--interpret", minutes=55)
    assert submitted.exit_code == 0, submitted.output
    state = json.loads((folder / STATE_FILE).read_text())
    assert state["status"] == "submitted" and state["closed_at"] == (T0 + timedelta(minutes=55)).isoformat()
    outcomes = {o["kata"]: o for o in state["summary"]["outcomes"]}
    assert (outcomes[first]["state"], outcomes[first]["score"], outcomes[first]["late"]) == ("passing", 100, False)
    assert (outcomes[second]["state"], outcomes[second]["score"], outcomes[second]["late"]) == ("passing (late)", 50, True)
    # time used: start to the last passing grade; submit's re-grade of the same file does not move it
    assert outcomes[first]["time_used_s"] == 12 * 60 and outcomes[second]["time_used_s"] == 50 * 60
    assert state["summary"]["score"] == 75 and state["summary"]["verdict"] == "hire"
    assert "Verdict: hire (75 / 100)" in submitted.output

    after = kata_cli("grade", folder / first, "--interpret", minutes=56)
    assert "does not count" in after.output


def test_hints_in_an_interview_cost_points(tmp_path):
    folder = start(tmp_path, "--difficulty", "easy", "--count", "1")
    hint = kata_cli("hint", "vector_add", "--dir", folder, minutes=1)
    assert "this hint costs 5 points" in hint.output
    kata_cli("hint", "--dir", folder / "vector_add", minutes=2)
    solve(folder, "vector_add")
    submitted = kata_cli("interview", "submit", "--dir", folder, "--interpret", minutes=5)
    outcome = json.loads((folder / STATE_FILE).read_text())["summary"]["outcomes"][0]
    assert (outcome["hints_taken"], outcome["hint_cost"], outcome["score"]) == (2, 15, 85)
    assert "strong hire (85 / 100)" in submitted.output


def test_revealing_the_solution_in_an_interview_scores_zero(tmp_path):
    folder = start(tmp_path, "--difficulty", "easy", "--count", "1")
    solve(folder, "vector_add")
    kata_cli("grade", folder / "vector_add", "--interpret", minutes=3)
    refused = kata_cli("solution", "vector_add", "--dir", folder, minutes=4)
    assert refused.exit_code == 1 and "interview is running" in refused.output
    forced = kata_cli("solution", "vector_add", "--dir", folder, "--force", minutes=4)
    assert forced.exit_code == 0 and "def vector_add" in forced.output
    kata_cli("interview", "submit", "--dir", folder, "--interpret", minutes=5)
    summary = json.loads((folder / STATE_FILE).read_text())["summary"]
    assert summary["outcomes"][0]["revealed"] and summary["score"] == 0 and summary["verdict"] == "no hire"
    assert "revealed" in (folder / "debrief.md").read_text()


@pytest.mark.parametrize("score, clean, expected", [
    (100, True, "strong hire"), (85, True, "strong hire"), (95, False, "hire"), (84.9, True, "hire"),
    (65, True, "hire"), (64.9, True, "lean no hire"), (40, False, "lean no hire"), (39.9, True, "no hire"),
    (0, False, "no hire"),
])
def test_verdict_rule(score, clean, expected):
    assert verdict(score, clean) == expected


# --- status, abandon, submit once -----------------------------------------------------------

def test_status_watch_counts_down_and_stops(tmp_path, monkeypatch):
    folder = start(tmp_path, "--count", "1", "--minutes", "10")
    done = kata_cli("interview", "status", "--dir", folder, "--watch", minutes=11)
    assert done.exit_code == 0 and done.output.count("Time is up") == 2

    naps = []

    def fake_sleep(seconds):
        naps.append(seconds)
        if len(naps) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(cli_interview, "sleep", fake_sleep)
    stopped = kata_cli("interview", "status", "--dir", folder, "--watch", minutes=9)
    assert stopped.exit_code == 0 and "time left 1:00" in stopped.output
    assert "Stopped the countdown" in stopped.output and naps == [1.0, 1.0]


def test_abandon_then_nothing_more(tmp_path):
    folder = start(tmp_path, "--count", "1")
    assert kata_cli("interview", "abandon", "--dir", folder, input="n\n").exit_code == 1
    assert json.loads((folder / STATE_FILE).read_text())["status"] == "running"
    assert kata_cli("interview", "abandon", "--dir", folder, "--yes", minutes=3).exit_code == 0
    state = json.loads((folder / STATE_FILE).read_text())
    assert state["status"] == "abandoned" and state["closed_at"] == (T0 + timedelta(minutes=3)).isoformat()
    assert "abandoned" in kata_cli("interview", "status", "--dir", folder).output
    submit = kata_cli("interview", "submit", "--dir", folder, "--interpret")
    assert submit.exit_code == 2 and "already abandoned" in submit.output


def test_submit_only_once(tmp_path):
    folder = start(tmp_path, "--count", "1")
    assert kata_cli("interview", "submit", "--dir", folder, "--interpret", minutes=2).exit_code == 0
    again = kata_cli("interview", "submit", "--dir", folder, "--interpret", minutes=3)
    assert again.exit_code == 2 and "already submitted" in again.output
    shown = kata_cli("interview", "status", "--dir", folder)
    assert "submitted" in shown.output and "debrief.html" in shown.output


def test_no_interview_here_is_a_usage_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = kata_cli("interview", "status")
    assert result.exit_code == 2 and "kata interview start" in result.output


@pytest.mark.parametrize("damage", ["{truncated", '{"schema": "triton-kata/interview/1"}', "[]"])
def test_a_damaged_state_file_is_a_clear_error_and_loses_nothing(tmp_path, damage):
    folder = start(tmp_path, "--count", "2")
    names = [k["name"] for k in json.loads((folder / STATE_FILE).read_text())["katas"]]
    for name in names:
        (folder / name / "solution.py").write_text(f"# my {name} work\n")
    (folder / STATE_FILE).write_text(damage)
    for command in (["status"], ["submit", "--interpret"], ["abandon", "--yes"]):
        result = kata_cli("interview", *command, "--dir", folder, minutes=5)
        assert result.exit_code == 2, command
        assert str(folder.resolve() / STATE_FILE) in result.output and "damaged" in result.output
        assert "left as it is" in result.output and "kata interview start --dir" in result.output
    assert (folder / STATE_FILE).read_text() == damage
    for name in names:
        assert (folder / name / "solution.py").read_text() == f"# my {name} work\n"
    assert not (folder / "debrief.md").exists()


# --- the debrief ----------------------------------------------------------------------------

def test_debrief_renders_the_figures_in_both_formats(tmp_path):
    folder = tmp_path / "iv"
    (folder / "softmax").mkdir(parents=True)
    (folder / "vector_add").mkdir()
    itv = Interview(folder=folder, started_at=T0, deadline=T0 + timedelta(minutes=35), minutes=35, seed=9,
                    katas=[InterviewKata("softmax", 25), InterviewKata("vector_add", 10)], mode="gpu")
    save_interview(itv)
    record_grade(folder / "softmax", fake_result("softmax", "pass", "gpu", score=88.4, speedup=1.234,
                                                 roofline=0.71, threshold=1.0), T0 + timedelta(minutes=12))
    record_grade(folder / "vector_add", fake_result(
        "vector_add", "fail", "gpu", score=0, speedup=0.5, roofline=0.3,
        message="1 case(s) failed; first: vector_add/odd_tail: <script>x</script> differs"), T0 + timedelta(minutes=30))
    from grader.learner.hints import take_hint
    take_hint(get_kata("softmax"), folder / "softmax", T0 + timedelta(minutes=5))
    itv = load_interview(folder)
    summary = summarise(itv, {"softmax": get_kata("softmax"), "vector_add": get_kata("vector_add")},
                        T0 + timedelta(minutes=31))
    assert summary.score == 41.7 and summary.verdict == "lean no hire"  # (88.4 - 5 + 0) / 2

    for fmt in ("md", "html"):
        text = render_debrief(summary, fmt)
        for figure in ("lean no hire", "41.7", "83.4", "88.4", "1.23x", "71%", "1/3 (-5)", "0/3 (-0)",
                       "12:00", "(25 min)", "31:00", "odd_tail", "numerical stability", "masking",
                       "strong hire: score &gt;= 85" if fmt == "html" else "strong hire: score >= 85"):
            assert figure in text, (fmt, figure)
    html = render_debrief(summary, "html")
    assert html.startswith("<!DOCTYPE html>") and "<style>" in html and "<script>" not in html
    assert "&lt;script&gt;" in html
    assert render_debrief(summary, "md").startswith("# Interview debrief: LEAN NO HIRE (41.7 / 100)")


# --- for real -------------------------------------------------------------------------------

def test_a_real_interview_end_to_end(tmp_path, monkeypatch):
    monkeypatch.setattr("grader.grading.runner.grade", real_grade)
    folder = start(tmp_path, "--difficulty", "easy", "--count", "1")
    shutil.copyfile(get_kata("vector_add").reference_path, folder / "vector_add" / "solution.py")
    result = kata_cli("interview", "submit", "--dir", folder, "--interpret", minutes=8)
    assert result.exit_code == 0, result.output
    assert "vector_add PASS" in result.output and "strong hire (100 / 100)" in result.output
    md = (folder / "debrief.md").read_text()
    assert "| `vector_add` | passing | **100** | 50 / 50 (100%) | yes |" in md
    assert "8:00 (10 min)" in md and (folder / "debrief.html").is_file()


def test_interview_grades_are_recorded_in_the_store(tmp_path, monkeypatch):
    monkeypatch.delitem(sys.modules, "grader.store.database")  # the autouse fixture hid the store
    from grader.store import database as store

    monkeypatch.setattr("grader.grading.runner.grade", real_grade)
    db = tmp_path / "results.sqlite"
    monkeypatch.setenv("KATA_DB", str(db))
    folder = start(tmp_path, "--difficulty", "easy", "--count", "1")
    shutil.copyfile(get_kata("vector_add").reference_path, folder / "vector_add" / "solution.py")
    result = kata_cli("interview", "submit", "--dir", folder, "--interpret", minutes=8)
    assert result.exit_code == 0, result.output
    rows = store.attempts(db)
    assert [(a.kata, a.label, a.status) for a in rows] == [("vector_add", "interview", "pass")]
