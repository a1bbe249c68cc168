"""Timed mock interviews: pick katas, scaffold them into one folder, keep the clock, score the end.

The interview's state is one JSON file in its folder (interview.json), so it survives closing the
terminal; each kata's workspace in that folder keeps its own record of grades and hints
(grader.learner.progress). Every function that depends on the time takes `now`. The rules (hint
costs, lateness, verdict) are documented in docs/INTERVIEW.md; the constants below are their source.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from itertools import chain, cycle, repeat
from pathlib import Path
from typing import Any, Callable, Sequence

from grader.kata.format import DIFFICULTIES, Kata
from grader.kata.tracks import Track
from grader.learner.clock import format_time, parse_time
from grader.learner.hints import HINT_COSTS, hint_cost
from grader.learner.progress import (FAILING, NOT_STARTED, KataProgress, RecordError, load_record,
                                     record_grade, write_json_atomic)
from grader.results.schema import PASS, GradeResult

STATE_FILE = "interview.json"
SCHEMA = "triton-kata/interview/1"
RUNNING, SUBMITTED, ABANDONED = "running", "submitted", "abandoned"
DEFAULT_COUNT = 2  # katas picked without --track and --minutes
MIX = "mix"  # --difficulty mix: an easy opener, then medium and hard
MIX_COUNT = 3  # a mix without --minutes: one kata of each difficulty
LATE_FACTOR = 0.5  # a grade that starts after the deadline counts for half its points
# (floor, verdict), best first; "strong hire" also needs every kata passed on time.
VERDICTS = ((85.0, "strong hire"), (65.0, "hire"), (40.0, "lean no hire"), (0.0, "no hire"))

SCORING_RULE = (
    "Each kata scores its best grade as a percentage of that grade's maximum (100 on a GPU, 50 "
    f"under the interpreter), a grade started after the deadline counting x{LATE_FACTOR:g}; minus "
    f"{' / '.join(str(c) for c in HINT_COSTS)} points for the 1st / 2nd / 3rd hint; 0 if the "
    "reference solution was revealed; never below 0. The interview score is the mean over its katas."
)
VERDICT_RULE = (
    "strong hire: score >= 85 and every kata passed on time; hire: >= 65; "
    "lean no hire: >= 40; no hire: below 40."
)


class InterviewError(Exception):
    """An interview command that cannot go on; the message says what to do instead."""


class StateError(InterviewError):
    """A damaged interview.json (left as it is)."""


@dataclass
class InterviewKata:
    name: str
    minutes: int  # the kata's own time budget


@dataclass
class Interview:
    folder: Path
    started_at: datetime
    deadline: datetime
    minutes: int
    seed: int
    katas: list[InterviewKata]
    status: str = RUNNING
    closed_at: datetime | None = None
    selection: dict[str, Any] = field(default_factory=dict)  # what start was asked for
    mode: str | None = None  # how submit graded
    summary: dict | None = None  # the InterviewSummary written at submit
    debriefs: list[str] = field(default_factory=list)  # file names in the folder

    @property
    def state_path(self) -> Path:
        return self.folder / STATE_FILE

    def workspace(self, kata_name: str) -> Path:
        return self.folder / kata_name

    def seconds_left(self, now: datetime) -> float:
        return (self.deadline - now).total_seconds()

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA, "status": self.status,
            "started_at": format_time(self.started_at), "deadline": format_time(self.deadline),
            "closed_at": format_time(self.closed_at) if self.closed_at else None,
            "minutes": self.minutes, "seed": self.seed, "selection": self.selection,
            "katas": [asdict(k) for k in self.katas], "mode": self.mode,
            "summary": self.summary, "debriefs": self.debriefs,
        }

    @classmethod
    def from_dict(cls, folder: Path, raw: dict) -> "Interview":
        if raw.get("schema") != SCHEMA:
            raise ValueError(f"schema is {raw.get('schema')!r}, expected {SCHEMA!r}")
        if raw["status"] not in (RUNNING, SUBMITTED, ABANDONED):
            raise ValueError(f"unknown status {raw['status']!r}")
        katas = [InterviewKata(str(k["name"]), int(k["minutes"])) for k in raw["katas"]]
        if not katas:
            raise ValueError("no katas")
        return cls(
            folder=folder, started_at=parse_time(raw["started_at"]), deadline=parse_time(raw["deadline"]),
            minutes=int(raw["minutes"]), seed=int(raw["seed"]), katas=katas, status=raw["status"],
            closed_at=parse_time(raw["closed_at"]) if raw.get("closed_at") else None,
            selection=dict(raw.get("selection") or {}), mode=raw.get("mode"),
            summary=raw.get("summary"), debriefs=list(raw.get("debriefs") or []),
        )


# --- choosing and starting ------------------------------------------------------------------

def _candidates(katas: list[Kata], difficulty: str | None, topic: str | None,
                track: Track | None) -> list[Kata]:
    pool = track.select(katas) if track else katas
    found = [k for k in sorted(pool, key=lambda k: k.name)
             if (difficulty in (None, MIX) or k.difficulty == difficulty)
             and (topic is None or any(topic.lower() in t.lower() for t in k.topics))]
    if not found:
        wanted = " and ".join(f for f in (track and f"track {track.name}",
                                           difficulty not in (None, MIX) and f"difficulty {difficulty}",
                                           topic and f"topic '{topic}'") if f)
        see = f"kata list --track {track.name}" if track else "kata list"
        raise InterviewError(f"No kata matches {wanted}: see `{see}` for difficulties and topics.")
    return found


def _by_weakness(candidates: list[Kata], progress: dict[str, KataProgress], seed: int) -> list[Kata]:
    """Unsolved katas first (never graded, then failing), then the weakest best scores; ties
    broken by `seed`."""
    rng = random.Random(seed)
    tiebreak = {k.name: rng.random() for k in candidates}

    def weakness(kata: Kata):
        p = progress.get(kata.name)
        unsolved = p is None or p.status in (NOT_STARTED, FAILING)
        score = -1.0 if p is None or p.best_score is None else p.best_score
        return (0 if unsolved else 1, score, tiebreak[kata.name])

    return sorted(candidates, key=weakness)


def pick_katas(katas: list[Kata], progress: dict[str, KataProgress], count: int, seed: int,
               difficulty: str | None = None, topic: str | None = None,
               minutes: int | None = None) -> list[Kata]:
    """Up to `count` katas matching the filters: unsolved ones first (never graded, then
    failing), then the weakest best scores; ties are broken by `seed`, so the same seed and the
    same progress give the same interview. With `minutes`, a kata whose budget does not fit in
    the minutes left is passed over: the budgets add up to at most `minutes`."""
    ranked = _by_weakness(_candidates(katas, difficulty, topic, None), progress, seed)
    left = minutes or float("inf")
    chosen = []
    for kata in ranked:
        if len(chosen) >= count:
            break
        if kata.minutes <= left:
            chosen.append(kata)
            left -= kata.minutes
    if not chosen:
        raise _nothing_fits(ranked, minutes)
    return chosen


def _nothing_fits(ranked: list[Kata], minutes: int | None) -> InterviewError:
    shortest = min(ranked, key=lambda k: k.minutes)
    return InterviewError(
        f"No kata fits in {minutes} min: the shortest that matches, {shortest.name}, takes "
        f"{shortest.minutes} min. Give --minutes {shortest.minutes} or more, or leave --minutes out "
        "and choose how many katas with --count (the countdown is then their budgets added up).")


def pick_track(katas: list[Kata], progress: dict[str, KataProgress], seed: int,
               track: Track | None = None, difficulty: str = MIX, topic: str | None = None,
               count: int | None = None, minutes: int | None = None) -> list[Kata]:
    """Katas of `track` (None: the whole catalogue) that fit in `minutes`.

    Turn by turn, each turn takes the weakest kata of its tier (pick_katas' order) whose budget
    fits in the minutes left; a tier with nothing that fits is done. With difficulty MIX the
    turns are an easy opener, then medium, hard, medium, hard...; with one difficulty, that
    tier every turn. It stops at `count` katas (default: as many as fit when `minutes` is given,
    else MIX_COUNT for a mix and DEFAULT_COUNT for one difficulty). The result runs easy, medium,
    hard; the same seed and progress give the same katas."""
    difficulty = difficulty or MIX
    ranked = _by_weakness(_candidates(katas, difficulty, topic, track), progress, seed)
    queues = {d: [k for k in ranked if k.difficulty == d] for d in DIFFICULTIES}
    turns = (chain(["easy"], cycle(["medium", "hard"])) if difficulty == MIX else repeat(difficulty))
    limit = count or (len(ranked) if minutes else MIX_COUNT if difficulty == MIX else DEFAULT_COUNT)
    left = minutes or float("inf")
    chosen: list[Kata] = []
    for tier in turns:
        if len(chosen) >= limit or not any(queues.values()):
            break
        fitting = [k for k in queues[tier] if k.minutes <= left]  # the minutes left only shrink
        if fitting:
            chosen.append(fitting[0])
            left -= fitting[0].minutes
        queues[tier] = [] if difficulty == MIX and tier == "easy" else fitting[1:]  # one opener
    if not chosen:
        raise _nothing_fits(ranked, minutes)
    return sorted(chosen, key=lambda k: DIFFICULTIES.index(k.difficulty))


def start_interview(folder: Path, katas: list[Kata], now: datetime, seed: int,
                    minutes: int | None = None, selection: dict | None = None) -> Interview:
    """Scaffold the katas into FOLDER and write its interview.json. The countdown defaults to
    the sum of the katas' time budgets."""
    from grader.learner.workspace import scaffold

    folder = Path(folder)
    if (folder / STATE_FILE).exists():
        raise InterviewError(f"{folder} already holds an interview ({STATE_FILE}); "
                             "pick another folder with --dir.")
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise InterviewError(f"{folder} exists and is not empty: an interview needs a new folder (--dir).")
    minutes = minutes or sum(k.minutes for k in katas)
    folder.mkdir(parents=True, exist_ok=True)
    for kata in katas:
        scaffold(kata, folder)
    interview = Interview(folder=folder, started_at=now, deadline=now + timedelta(minutes=minutes),
                          minutes=minutes, seed=seed, katas=[InterviewKata(k.name, k.minutes) for k in katas],
                          selection=dict(selection or {}))
    save_interview(interview)
    return interview


# --- finding, loading, saving -------------------------------------------------------------

def find_interview(start: Path) -> Path:
    """The interview folder holding START (START itself or a parent of it)."""
    start = Path(start).resolve()
    for folder in (start, *start.parents):
        if (folder / STATE_FILE).is_file():
            return folder
    raise InterviewError(f"No interview in {start} or its parents: start one with "
                         "`kata interview start`, or point --dir at its folder.")


def load_interview(folder: Path) -> Interview:
    folder = Path(folder)
    path = folder / STATE_FILE
    if not path.is_file():
        raise InterviewError(f"{folder} holds no interview ({STATE_FILE} is missing).")
    import json
    try:
        return Interview.from_dict(folder, json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise StateError(
            f"The interview state file {path} is damaged ({exc}). It was left as it is and your "
            f"solutions in {folder} are untouched: grade them one by one with `kata grade "
            f"{folder}/KATA`, repair the file by hand, or start a new interview in another folder "
            "with `kata interview start --dir NEW_FOLDER`.") from None


def save_interview(interview: Interview) -> Path:
    write_json_atomic(interview.state_path, interview.to_dict())
    return interview.state_path


def interview_of_workspace(workspace: Path) -> Interview | None:
    """The interview a kata workspace belongs to (its parent folder's), if any and readable."""
    folder = Path(workspace).resolve().parent
    if not (folder / STATE_FILE).is_file():
        return None
    try:
        interview = load_interview(folder)
    except InterviewError:
        return None
    name = Path(workspace).resolve().name
    return interview if any(k.name == name for k in interview.katas) else None


# --- scoring ------------------------------------------------------------------------------

@dataclass
class KataOutcome:
    kata: str
    title: str
    topics: list[str]
    budget_minutes: int
    state: str  # not graded | failing | passing | passing (late)
    hints_taken: int
    hint_cost: int
    revealed: bool
    grades: int  # grades during the interview
    counted: dict | None  # the grade summary the score comes from (else the last grade)
    late: bool  # the counted grade started after the deadline
    percent: float  # the counted grade's score as a percentage of its maximum
    score: float  # interview points for this kata (0..100)
    time_used_s: float | None  # interview start (its scaffold) to its last passing grade
    last_failure: str  # why its last grade failed, when it is not passing


@dataclass
class InterviewSummary:
    status: str
    started_at: str
    deadline: str
    closed_at: str | None
    minutes: int
    seed: int
    mode: str | None
    time_used_s: float  # start to submission (or to now while running)
    submitted_late: bool
    outcomes: list[KataOutcome]
    score: float  # mean of the katas' scores
    verdict: str
    verdict_rule: str = VERDICT_RULE
    scoring_rule: str = SCORING_RULE
    study: list[dict] = field(default_factory=list)  # {kata, topics, reasons, related}
    track: str | None = None  # the track the katas were chosen from (None: the whole catalogue)
    more: list[str] = field(default_factory=list)  # the track's other katas, hardest first


def percent_of_max(grade: dict) -> float:
    if not grade.get("max_possible"):
        return 0.0
    return 100.0 * grade["score"] / grade["max_possible"]


def kata_outcome(interview: Interview, kata: Kata, now: datetime) -> KataOutcome:
    """This kata's standing in the interview, from its workspace record."""
    record = load_record(interview.workspace(kata.name), kata.name)
    end = interview.closed_at or now

    def during(stamp: str) -> bool:
        return interview.started_at <= parse_time(stamp) <= end

    grades = [g for g in record.grades if during(g["graded_at"])]
    on_time = lambda g: parse_time(g["graded_at"]) <= interview.deadline  # noqa: E731
    worth = lambda g: percent_of_max(g) * (1.0 if on_time(g) else LATE_FACTOR)  # noqa: E731
    counted = max(grades, key=lambda g: (worth(g), g["graded_at"]), default=None)
    if counted is not None and worth(counted) == 0:
        counted = grades[-1]  # nothing scored: show the latest attempt
    hints = sum(1 for h in record.hints if during(h["at"]))
    revealed = bool(record.revealed_at and during(record.revealed_at))
    passes = [g for g in grades if g["status"] == PASS]
    if not grades:
        state = "not graded"
    elif any(on_time(g) for g in passes):
        state = "passing"
    elif passes:
        state = "passing (late)"
    else:
        state = "failing"
    earned = worth(counted) if counted else 0.0
    score = 0.0 if revealed else max(0.0, round(earned - hint_cost(hints), 1))
    solved_at = _solved_at(grades)
    time_used = (solved_at - interview.started_at).total_seconds() if solved_at else None
    last_failure = grades[-1]["message"] if grades and not passes else ""
    return KataOutcome(
        kata=kata.name, title=kata.title, topics=list(kata.topics), budget_minutes=kata.minutes,
        state=state, hints_taken=hints, hint_cost=hint_cost(hints), revealed=revealed,
        grades=len(grades), counted=counted, late=bool(counted and earned > 0 and not on_time(counted)),
        percent=round(percent_of_max(counted), 1) if counted else 0.0, score=score,
        time_used_s=time_used, last_failure=last_failure)


def _solved_at(grades: list[dict]) -> datetime | None:
    """When the last passing grade was, except that re-grades of the same file just before it
    (submit grades everything again) do not move it: the first of that run of passes counts."""
    last = max((i for i, g in enumerate(grades) if g["status"] == PASS), default=None)
    if last is None:
        return None
    first = last
    while (first > 0 and grades[first - 1]["status"] == PASS
           and grades[first - 1].get("submission_sha256") == grades[last].get("submission_sha256")):
        first -= 1
    return parse_time(grades[first]["graded_at"])


def verdict(score: float, all_passed_on_time: bool) -> str:
    for floor, name in VERDICTS:
        if score >= floor and (name != "strong hire" or all_passed_on_time):
            return name
    return VERDICTS[-1][1]


STUDY_RELATED = 3  # related katas named per kata to study


def related_katas(outcome: KataOutcome, pool: Sequence[Kata], exclude: set[str]) -> list[str]:
    """Katas of the pool (the interview's track) sharing topics with this one, most shared first."""
    topics = {t.lower() for t in outcome.topics}
    shared = {k.name: len(topics & {t.lower() for t in k.topics}) for k in pool if k.name not in exclude}
    ranked = sorted((k for k in pool if shared.get(k.name)),
                    key=lambda k: (-shared[k.name], DIFFICULTIES.index(k.difficulty), k.name))
    return [k.name for k in ranked[:STUDY_RELATED]]


def study_next(outcomes: list[KataOutcome], pool: Sequence[Kata] = ()) -> list[dict]:
    """What to study: for each kata that was not a clean, on-time, unaided pass, its topics,
    what went wrong and the katas of the pool (the interview's track) that practise the same
    topics; weakest first."""
    exclude = {o.kata for o in outcomes}
    items = []
    for o in sorted(outcomes, key=lambda o: o.score):
        reasons = []
        if o.state == "not graded":
            reasons.append("never graded")
        elif o.state == "failing":
            first_line = o.last_failure.splitlines()[0] if o.last_failure else "a case failed"
            reasons.append(f"failed: {first_line}")
        elif o.state == "passing (late)":
            reasons.append("passed only after the deadline")
        if o.revealed:
            reasons.append("the reference solution was revealed")
        if o.hints_taken:
            reasons.append(f"needed {o.hints_taken} hint(s)")
        c = o.counted
        if c and c.get("speed_measured") and c.get("speedup") is not None and c["speedup"] < c["threshold"]:
            reasons.append(f"speedup {c['speedup']:.2f}x is below the threshold {c['threshold']:g}x")
        if o.time_used_s is not None and o.time_used_s > 60 * o.budget_minutes:
            reasons.append(f"took {int(o.time_used_s // 60)} min against a budget of {o.budget_minutes}")
        if reasons:
            items.append({"kata": o.kata, "topics": o.topics, "reasons": reasons,
                          "related": related_katas(o, pool, exclude)})
    return items


def summarise(interview: Interview, katas: dict[str, Kata], now: datetime,
              pool: list[Kata] | None = None) -> InterviewSummary:
    """pool: the katas of the interview's track (default: none), for what to study next."""
    pool = list(pool or [])
    taken = {k.name for k in interview.katas}
    more = sorted((k for k in pool if k.name not in taken),
                  key=lambda k: (-DIFFICULTIES.index(k.difficulty), k.name))
    outcomes = [kata_outcome(interview, katas[k.name], now) for k in interview.katas]
    score = round(sum(o.score for o in outcomes) / len(outcomes), 1)
    clean = all(o.state == "passing" and not o.revealed for o in outcomes)
    end = interview.closed_at or now
    return InterviewSummary(
        status=interview.status, started_at=format_time(interview.started_at),
        deadline=format_time(interview.deadline),
        closed_at=format_time(interview.closed_at) if interview.closed_at else None,
        minutes=interview.minutes, seed=interview.seed, mode=interview.mode,
        time_used_s=(end - interview.started_at).total_seconds(),
        submitted_late=end > interview.deadline, outcomes=outcomes, score=score,
        verdict=verdict(score, clean), study=study_next(outcomes, pool),
        track=interview.selection.get("track"), more=[k.name for k in more[:STUDY_RELATED]])


# --- closing ------------------------------------------------------------------------------

GradeFunction = Callable[..., GradeResult]  # grader.grading.runner.grade's signature


def check_records(interview: Interview) -> None:
    """Refuse to go on when a kata's workspace record is damaged (nothing is overwritten)."""
    for k in interview.katas:
        try:
            load_record(interview.workspace(k.name), k.name)
        except RecordError as exc:
            raise StateError(str(exc)) from None


def _require_running(interview: Interview) -> None:
    if interview.status != RUNNING:
        when = format_time(interview.closed_at) if interview.closed_at else "earlier"
        raise InterviewError(f"The interview in {interview.folder} was already {interview.status} "
                             f"({when}); start a new one with `kata interview start`.")


def submit(interview: Interview, katas: dict[str, Kata], grade: GradeFunction, mode: str,
           now: datetime, timeout_s: float | None = None,
           on_graded: Callable[[Kata, GradeResult | None], None] | None = None,
           pool: list[Kata] | None = None) -> InterviewSummary:
    """Grade every kata (as of `now`, so a submission on time is on time however long grading
    takes), close the interview, write the debriefs and save the state. pool: the katas of the
    interview's track, for the debrief's what to study next."""
    from grader.learner.debrief import write_debriefs

    _require_running(interview)
    check_records(interview)
    for k in interview.katas:
        kata = katas[k.name]
        solution = interview.workspace(k.name) / "solution.py"
        result = None
        if solution.is_file():
            result = grade(kata, solution, mode, timeout_s=timeout_s)
            record_grade(interview.workspace(k.name), result, now)
        if on_graded:
            on_graded(kata, result)
    interview.status, interview.closed_at, interview.mode = SUBMITTED, now, mode
    summary = summarise(interview, katas, now, pool)
    interview.summary = asdict(summary)
    interview.debriefs = [p.name for p in write_debriefs(summary, interview.folder)]
    save_interview(interview)
    return summary


def abandon(interview: Interview, now: datetime) -> None:
    _require_running(interview)
    interview.status, interview.closed_at = ABANDONED, now
    save_interview(interview)


def late_notice(workspace: Path, graded_at: datetime) -> str | None:
    """What `kata grade` should add when the workspace is part of an interview."""
    interview = interview_of_workspace(workspace)
    if interview is None:
        return None
    if interview.status != RUNNING:
        return f"This interview was {interview.status}: this grade does not count in it."
    if graded_at > interview.deadline:
        over = (graded_at - interview.deadline).total_seconds() / 60
        return (f"The interview's deadline passed {over:.0f} min ago: this grade is recorded as "
                f"late and counts x{LATE_FACTOR:g} (docs/INTERVIEW.md).")
    return None
