"""The learner's-loop and interview commands: hint, watch, reset, solution, interview *.

Registered on the `kata` group by grader.cli.main. Like it, this module only parses and formats:
the work is in grader.learner (interview, hints, progress, watch). Grading goes through
grader.grading.runner.grade, looked up at call time so tests can replace it.
"""

from __future__ import annotations

import secrets
import shlex
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import click
from tabulate import tabulate

from grader.cli.common import (EXIT_FAIL, complete_track, kata_or_exit, resolve_mode, track_or_exit,
                               usage_error)
from grader.kata.format import DIFFICULTIES, KataFormatError
from grader.learner import clock

sleep = time.sleep  # the watch and countdown loops' pause; tests replace it


def _now() -> datetime:
    try:
        return clock.now()
    except ValueError as exc:
        usage_error(str(exc))


def _local(moment: datetime) -> str:
    return moment.astimezone().strftime("%H:%M:%S")


def _kata_workspace(kata_name: str | None, directory: Path):
    from grader.kata.catalog import UnknownKataError
    from grader.learner.workspace import WorkspaceError, find_workspace
    try:
        return find_workspace(kata_name, directory)
    except (WorkspaceError, UnknownKataError) as exc:
        usage_error(str(exc))
    except KataFormatError as exc:
        usage_error(f"The kata '{kata_name}' is broken: {exc}")


def _grade(kata, solution: Path, mode: str, timeout_s: float | None):
    from grader.grading import runner
    return runner.grade(kata, solution, mode, timeout_s=timeout_s)


# --- after `kata grade` ---------------------------------------------------------------------

def after_grade(solution: Path, result) -> None:
    """Keep a grade in its workspace's record (for kata list, kata solution, interviews) and
    say when it counts as late in an interview. Called by `kata grade` and `kata watch`."""
    from grader.learner.interview import late_notice
    from grader.learner.progress import RecordError, record_grade
    from grader.learner.workspace import workspace_kata_name

    workspace = Path(solution).resolve().parent
    if workspace_kata_name(workspace) != result.kata:
        return  # a file graded outside its kata's workspace: nowhere to record it
    graded_at = _now() - timedelta(seconds=result.duration_s or 0)  # when the grade started
    try:
        record_grade(workspace, result, graded_at)
    except (RecordError, OSError) as exc:
        click.echo(f"Warning: this grade was not recorded in the workspace: {exc}", err=True)
        return
    notice = late_notice(workspace, graded_at)
    if notice:
        click.echo(notice, err=True)


# --- kata hint ------------------------------------------------------------------------------

@click.command()
@click.argument("kata", required=False)
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              help="The workspace, or the folder holding KATA's workspace (default: here).")
def hint(kata, directory):
    """Reveal the next of the kata's 3 hints (nudge, approach, near-solution) and record it.

    KATA defaults to the workspace in --dir. Hints taken in an interview cost points.
    """
    from grader.learner.hints import HINT_COSTS, take_hint
    from grader.learner.interview import RUNNING, interview_of_workspace
    from grader.learner.progress import RecordError

    k, workspace = _kata_workspace(kata, directory)
    try:
        reveal = take_hint(k, workspace, _now())
    except RecordError as exc:
        usage_error(str(exc))
    if reveal.level == 0:
        click.echo(f"All {reveal.total} hints for {k.name} are taken; here they are again:\n")
        for number, text in enumerate(reveal.earlier, 1):
            click.echo(f"{number}. {text}\n")
        return
    click.echo(f"Hint {reveal.level}/{reveal.total} ({reveal.label}) for {k.name}:\n")
    click.echo(reveal.text + "\n")
    interview = interview_of_workspace(workspace)
    if interview is not None and interview.status == RUNNING:
        click.echo(f"Interview: this hint costs {HINT_COSTS[reveal.level - 1]} points.")
    if reveal.level < reveal.total:
        click.echo("Run `kata hint` again for the next one.")


# --- kata watch -----------------------------------------------------------------------------

def compact_result(result, moment: datetime) -> str:
    colour = "green" if result.status == "pass" else "red"
    b = result.score_breakdown
    score = f"{b.total:g}/{b.max_possible:g}" if b else f"{result.score:g}"
    speed = (f"speedup {result.speedup:.2f}x (threshold {result.threshold:g}x)" if result.speed_measured
             else "speed not measured")
    line = (f"[{_local(moment)}] " + click.style(f"{result.kata} {result.status.upper()}", fg=colour, bold=True)
            + f"  {score}  {speed}  ({result.mode})")
    if result.message:
        line += "\n    " + result.message.splitlines()[0][:200]
    return line


@click.command("watch")
@click.argument("path", required=False, type=click.Path(path_type=Path), default=Path("."))
@click.option("--kata", "kata_name", help="Grade PATH against this kata (default: the workspace's kata).")
@click.option("--interpret", is_flag=True, help="Run on the CPU under the Triton interpreter (correctness only).")
@click.option("--gpu", is_flag=True, help="Run on the GPU (the default when CUDA is available).")
@click.option("--timeout", type=click.FloatRange(min=1), help="Time limit in seconds for each grade.")
@click.option("--interval", type=click.FloatRange(min=0.05), default=0.5, show_default=True,
              help="Seconds between checks of the file.")
def watch_command(path, kata_name, interpret, gpu, timeout, interval):
    """Re-grade the solution every time it is saved; Ctrl-C stops.

    PATH is a workspace folder or a solution file (default: here). It grades once at the
    start, then after each save that changes the file, and never moves on to another kata.
    """
    from grader.kata.catalog import UnknownKataError
    from grader.learner.watch import watch_file
    from grader.learner.workspace import WorkspaceError, resolve

    try:
        kata, solution = resolve(path, kata_name)
    except (WorkspaceError, UnknownKataError, KataFormatError) as exc:
        usage_error(str(exc))
    mode = resolve_mode(interpret, gpu)
    click.echo(f"Watching {solution} ({kata.name}, {mode} mode): grading on every save. Ctrl-C to stop.")

    def regrade():
        result = _grade(kata, solution, mode, timeout)
        after_grade(solution, result)
        click.echo(compact_result(result, _now()))

    try:
        watch_file(solution, regrade, interval=interval, sleep=sleep)
    except KeyboardInterrupt:
        click.echo("\nStopped watching.")


# --- kata reset -----------------------------------------------------------------------------

@click.command()
@click.argument("kata")
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              help="The folder holding KATA's workspace, or the workspace itself (default: here).")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
def reset(kata, directory, yes):
    """Put the stub back in KATA's solution.py, keeping the old file as solution.bakN.py."""
    from grader.learner.workspace import SOLUTION, reset_solution

    k, workspace = _kata_workspace(kata, directory)
    solution = workspace / SOLUTION
    unchanged = solution.is_file() and solution.read_bytes() == k.stub_path.read_bytes()
    if solution.is_file() and not unchanged and not yes:
        if not click.confirm(f"Replace {solution} with the stub? (your file is kept as a backup)"):
            click.echo("Nothing changed.")
            sys.exit(EXIT_FAIL)
    done = reset_solution(k, workspace)
    if not done.changed:
        click.echo(f"{solution} already is the stub: nothing to do.")
    elif done.backup:
        click.echo(f"Restored the stub in {solution}; your previous solution is in {done.backup}")
    else:
        click.echo(f"Restored the stub in {solution}")


# --- kata solution --------------------------------------------------------------------------

@click.command()
@click.argument("kata")
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              help="The folder holding KATA's workspace, or the workspace itself (default: here).")
@click.option("--force", is_flag=True, help="Show it without a passing grade (recorded as revealed).")
def solution(kata, directory, force):
    """Show KATA's reference solution, once you have passed it (or with --force)."""
    from grader.kata.catalog import UnknownKataError
    from grader.learner.interview import RUNNING, interview_of_workspace
    from grader.learner.progress import RecordError, load_record, save_record, store_bests
    from grader.learner.workspace import WorkspaceError, find_workspace

    k = kata_or_exit(kata)
    try:
        _, workspace = find_workspace(kata, directory)
    except (WorkspaceError, UnknownKataError):
        workspace = None
    record = None
    if workspace is not None:
        try:
            record = load_record(workspace, k.name)
        except RecordError as exc:
            usage_error(str(exc))
    best = store_bests()[0].get(k.name)
    passed = bool(record and record.passed) or bool(best is not None and best.status == "pass")
    interview = interview_of_workspace(workspace) if workspace is not None else None
    in_interview = interview is not None and interview.status == RUNNING
    if in_interview and not force:
        click.echo(f"Error: an interview is running in {interview.folder}: --force shows the reference "
                   f"and scores {k.name} 0 in it.", err=True)
        sys.exit(EXIT_FAIL)
    if not passed and not force:
        click.echo(f"Error: pass {k.name} first (`kata grade`), or use --force: the reveal is then "
                   "recorded in the workspace.", err=True)
        sys.exit(EXIT_FAIL)
    if not passed or in_interview:
        if record is not None:
            if record.revealed_at is None:
                record.revealed_at = clock.format_time(_now())
                save_record(workspace, record)
            click.echo(f"(recorded as revealed in {workspace})", err=True)
        else:
            click.echo(f"(no {k.name} workspace here to record the reveal in)", err=True)
    click.echo(k.reference_path.read_text())


# --- kata interview -------------------------------------------------------------------------

@click.group()
def interview():
    """Timed mock interview: start, status, submit, abandon (rules: docs/INTERVIEW.md)."""


def _load_interview(folder: Path | None):
    from grader.learner.interview import InterviewError, find_interview, load_interview
    try:
        return load_interview(find_interview(folder or Path(".")))
    except InterviewError as exc:
        usage_error(str(exc))


def _interview_katas(itv) -> dict:
    return {k.name: kata_or_exit(k.name) for k in itv.katas}


def _track_pool(itv) -> list:
    """The katas of the interview's track (the whole catalogue without one), for the debrief's
    what to study next; a track gone from the tracks file falls back to the catalogue."""
    from grader.kata.catalog import all_katas, kata_dirs
    from grader.kata.tracks import TrackError, UnknownTrackError, get_track
    try:
        katas = all_katas()
    except KataFormatError:
        return []
    name = itv.selection.get("track")
    if not name:
        return katas
    try:
        return get_track(name, kata_dirs()).select(katas)
    except (TrackError, UnknownTrackError) as exc:
        click.echo(f"Warning: the debrief suggests katas from the whole catalogue: {exc}", err=True)
        return katas


def _time_left_line(itv, now: datetime) -> str:
    left = itv.seconds_left(now)
    if left > 0:
        return (f"Time left {clock.format_duration(left)} of {itv.minutes} min "
                f"(deadline {_local(itv.deadline)}).")
    return (f"Time is up: the deadline ({_local(itv.deadline)}) passed {clock.format_duration(-left)} ago; "
            "grades from now on count as late. Submit with `kata interview submit`.")


def _outcome_table(outcomes) -> str:
    rows = []
    for o in outcomes:
        o = o if isinstance(o, dict) else o.__dict__
        c = o["counted"]
        rows.append([o["kata"], o["state"] + (" (revealed)" if o["revealed"] else ""),
                     f"{c['score']:g}/{c['max_possible']:g}" if c else "-",
                     f"{o['hints_taken']} (-{o['hint_cost']})", f"{o['score']:g}",
                     clock.format_duration(o["time_used_s"]), f"{o['budget_minutes']} min"])
    return tabulate(rows, headers=["kata", "state", "best grade", "hints", "points", "time used", "budget"])


@interview.command()
@click.option("--track", "track_name", shell_complete=complete_track,
              help="Choose from this track (warmup, llm-training, llm-inference, fundamentals, all; "
                   "`kata list --track NAME`); then --minutes is a budget the katas must fit in.")
@click.option("--minutes", type=click.IntRange(min=1),
              help="Length of the interview (default: the katas' budgets added up); only katas whose "
                   "budgets add up to at most this are picked.")
@click.option("--count", type=click.IntRange(min=1),
              help="How many katas (default: 2; with --track or --difficulty mix, as many as fit in "
                   "--minutes, or 3 without it).")
@click.option("--difficulty", type=click.Choice((*DIFFICULTIES, "mix")),
              help="Only katas of this difficulty; mix (the default with --track): an easy opener, "
                   "then medium and hard.")
@click.option("--topic", help="Only katas with a topic containing this word (see `kata list`).")
@click.option("--seed", type=int, help="Pick the same katas again (given the same progress).")
@click.option("--dir", "folder", type=click.Path(file_okay=False, path_type=Path),
              help="The interview folder, new or empty (default: ./interview-DATE-TIME).")
def start(track_name, minutes, count, difficulty, topic, seed, folder):
    """Pick katas (unsolved first, then your weakest), scaffold them and start the clock.

    With --track or --difficulty mix the katas fit in --minutes: an easy opener, then medium
    and hard (docs/INTERVIEW.md says how the options combine).
    """
    from grader.kata.catalog import all_katas
    from grader.learner.hints import HINT_COSTS
    from grader.learner.interview import (DEFAULT_COUNT, LATE_FACTOR, MIX, InterviewError, pick_katas,
                                          pick_track, start_interview)
    from grader.learner.progress import progress_by_kata

    given = (("track", track_name), ("difficulty", difficulty), ("topic", topic and shlex.quote(topic)),
             ("count", count), ("minutes", minutes))  # for the line that repeats the pick
    count_given = count
    track = track_or_exit(track_name) if track_name else None
    by_track = track is not None or difficulty == MIX
    now = _now()
    seed = secrets.randbelow(1_000_000) if seed is None else seed
    folder = folder or Path(f"interview-{now.astimezone():%Y%m%d-%H%M%S}")
    try:
        katas = all_katas()
        # Progress from the practice folder the interview sits in (and the results store).
        progress, _ = progress_by_kata(katas, folder.resolve().parent)
        if by_track:
            difficulty = difficulty or MIX
            picked = pick_track(katas, progress, seed, track, difficulty, topic, count, minutes)
        else:
            count = count or DEFAULT_COUNT
            picked = pick_katas(katas, progress, count, seed, difficulty, topic, minutes)
        itv = start_interview(folder, picked, now, seed, minutes,
                              {"count": count, "difficulty": difficulty, "topic": topic,
                               "track": track.name if track else None})
    except KataFormatError as exc:
        usage_error(f"A kata is broken: {exc}")
    except InterviewError as exc:
        usage_error(str(exc))
    click.echo(f"Interview started in {folder}: {len(picked)} kata(s), {itv.minutes} min, "
               f"deadline {_local(itv.deadline)}.")
    if by_track:
        rule = ("an easy opener, then medium and hard" if difficulty == MIX
                else f"{difficulty} katas")
        fit = f" whose budgets fit in {minutes} min" if minutes else ""
        click.echo(f"Chosen from {f'the {track.name} track' if track else 'the catalogue'}: "
                   f"{rule}{fit}, weakest first.")
    elif minutes:
        click.echo(f"Chosen weakest first among katas whose budgets fit in {minutes} min "
                   f"({sum(k.minutes for k in picked)} min of katas).")
    if count_given and len(picked) < count_given:
        click.echo(f"(only {len(picked)} kata(s) match{' and fit' if minutes else ''}, "
                   f"not {count})")
    rows = [(i, k.name, k.title, k.difficulty, f"{k.minutes} min", str(folder / k.name / "solution.py"))
            for i, k in enumerate(picked, 1)]
    click.echo("\n" + tabulate(rows, headers=["#", "kata", "title", "difficulty", "budget", "solution"]) + "\n")
    again = "".join(f" --{option} {value}" for option, value in given if value)
    click.echo(f"Seed {seed}: `kata interview start{again} --seed {seed}` picks the same katas again.")
    click.echo(f"Rules: hints cost {'/'.join(map(str, HINT_COSTS))} points; grades after the deadline "
               f"count x{LATE_FACTOR:g}; revealing a solution scores that kata 0 (docs/INTERVIEW.md).")
    click.echo(f"Next: cd {folder}; edit KATA/solution.py; `kata grade KATA`; `kata hint KATA`; "
               "`kata interview status`; `kata interview submit` when done.")


@interview.command()
@click.option("--dir", "folder", type=click.Path(file_okay=False, path_type=Path),
              help="The interview folder (default: the one holding the current folder).")
@click.option("--watch", is_flag=True, help="Then redraw the time left every second until the deadline or Ctrl-C.")
def status(folder, watch):
    """Time left, each kata's state, hints taken and points so far."""
    from grader.learner.interview import RUNNING, summarise
    from grader.learner.progress import RecordError
    from grader.learner.watch import countdown

    itv = _load_interview(folder)
    if itv.status != RUNNING:
        click.echo(f"Interview in {itv.folder}: {itv.status} at {clock.format_time(itv.closed_at)}.")
        if itv.summary:
            s = itv.summary
            click.echo(f"Verdict: {s['verdict']} ({s['score']:g} / 100)\n")
            click.echo(_outcome_table(s["outcomes"]))
            for name in itv.debriefs:
                click.echo(f"Debrief: {itv.folder / name}")
        return
    now = _now()
    try:
        summary = summarise(itv, _interview_katas(itv), now)
    except RecordError as exc:
        usage_error(str(exc))
    click.echo(f"Interview in {itv.folder} (running).")
    click.echo(_time_left_line(itv, now) + "\n")
    click.echo(_outcome_table(summary.outcomes))
    click.echo(f"\nScore so far {summary.score:g} / 100 ({summary.verdict}).")
    if not watch:
        return

    def tick(left: float) -> None:
        if left > 0:
            click.echo(f"\rtime left {clock.format_duration(left)}   ", nl=False)
        else:
            click.echo("\rTime is up: grades from now on count as late. Submit with `kata interview submit`.")

    click.echo("")
    try:
        countdown(itv.deadline, tick, now=_now, sleep=sleep)
    except KeyboardInterrupt:
        click.echo("\nStopped the countdown; the interview goes on.")


@interview.command()
@click.option("--dir", "folder", type=click.Path(file_okay=False, path_type=Path),
              help="The interview folder (default: the one holding the current folder).")
@click.option("--interpret", is_flag=True, help="Grade on the CPU under the Triton interpreter (correctness only).")
@click.option("--gpu", is_flag=True, help="Grade on the GPU (the default when CUDA is available).")
@click.option("--timeout", type=click.FloatRange(min=1), help="Time limit in seconds for each kata's grade.")
def submit(folder, interpret, gpu, timeout):
    """Grade every kata, close the interview and write debrief.md and debrief.html."""
    from grader.learner.interview import RUNNING, InterviewError, submit as submit_interview

    itv = _load_interview(folder)
    if itv.status != RUNNING:
        usage_error(f"The interview in {itv.folder} was already {itv.status}: nothing to submit.")
    katas = _interview_katas(itv)
    mode = resolve_mode(interpret, gpu)
    now = _now()
    click.echo(f"Grading {len(katas)} kata(s) ({mode} mode)...", err=True)

    def graded(kata, result):
        if result is None:
            click.echo(f"{kata.name}: no solution.py: not graded")
        else:
            from grader.cli.store import record_or_warn
            record_or_warn(result, None, None, mode_label="interview")  # the results store
            click.echo(compact_result(result, now))

    try:
        summary = submit_interview(itv, katas, _grade, mode, now, timeout, on_graded=graded,
                                   pool=_track_pool(itv))
    except InterviewError as exc:
        usage_error(str(exc))
    click.echo("\n" + _outcome_table(summary.outcomes))
    click.echo(f"\nVerdict: {summary.verdict} ({summary.score:g} / 100). Rule: {summary.verdict_rule}")
    if summary.submitted_late:
        click.echo("Submitted after the deadline: its grades count as late.")
    for name in itv.debriefs:
        click.echo(f"Debrief: {itv.folder / name}")


@interview.command()
@click.option("--dir", "folder", type=click.Path(file_okay=False, path_type=Path),
              help="The interview folder (default: the one holding the current folder).")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
def abandon(folder, yes):
    """Close the interview without grading it (the solutions stay where they are)."""
    from grader.learner.interview import RUNNING, InterviewError, abandon as abandon_interview

    itv = _load_interview(folder)
    if itv.status != RUNNING:
        usage_error(f"The interview in {itv.folder} was already {itv.status}.")
    if not yes and not click.confirm(f"Abandon the interview in {itv.folder}?"):
        click.echo("Nothing changed.")
        sys.exit(EXIT_FAIL)
    try:
        abandon_interview(itv, _now())
    except InterviewError as exc:
        usage_error(str(exc))
    click.echo(f"Abandoned the interview in {itv.folder}; the solutions are kept.")


COMMANDS = (hint, watch_command, reset, solution, interview)
