"""The `kata` command line: parses arguments and formats results; the work is in grader.*."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import click
from tabulate import tabulate

from grader import __version__
from grader.cli.common import (EXIT_FAIL, EXIT_PASS, complete_kata, complete_track, kata_or_exit,
                               resolve_mode, track_or_exit, usage_error)
from grader.cli.batch import COMMANDS as BATCH_COMMANDS  # batch grade (grader/batch/)
from grader.cli.learner import COMMANDS as LEARNER_COMMANDS  # hint, watch, reset, solution, interview
from grader.cli.learner import after_grade
from grader.cli.store import COMMANDS as STORE_COMMANDS  # history, export, import, leaderboard
from grader.cli.store import db_option, db_path, handle_option, record_or_warn, reference_times
from grader.kata.catalog import UnknownKataError, all_katas
from grader.kata.format import KataFormatError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kata")
def main():
    """Practise GPU kernels in Triton: scaffold a kata, solve it, grade it.

    \b
      kata list                 the catalogue
      kata new softmax          ./softmax/solution.py + ./softmax/README.md
      kata grade softmax        hidden tests (and speed on a GPU), a scored report
      kata hint softmax         the next of 3 hints
      kata interview start      a timed mock interview with a graded debrief
      kata batch grade subs/    a group's submissions on every GPU, one leaderboard

    Exit codes: 0 pass, 1 fail, 2 usage error.
    """


@main.command("list")
@click.option("--dir", "directory", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              help="Where your workspaces are, for status and best score (default: here).")
@click.option("--track", "track_name", shell_complete=complete_track,
              help="Only the katas of this interview track (warmup, llm-training, ...; docs/INTERVIEW.md).")
@click.option("--json", "as_json", is_flag=True,
              help="Print every kata's full detail as JSON (the table shortens long titles and topics).")
def list_katas(directory, track_name, as_json):
    """Show the katas: difficulty, topics, time budget, your status and best score."""
    from grader.cli.layout import fitted_table, wrap
    from grader.learner.progress import progress_by_kata
    track = track_or_exit(track_name) if track_name else None
    try:
        katas = all_katas()
    except KataFormatError as exc:
        usage_error(f"A kata is broken: {exc}")
    if track:
        katas = track.select(katas)
    progress, warnings = progress_by_kata(katas, directory)
    if as_json:
        click.echo(_katas_json(katas, progress))
    else:
        rows = [(k.name, k.title, k.difficulty, ", ".join(k.topics), f"{k.minutes} min", progress[k.name].status,
                 "-" if progress[k.name].best_score is None else f"{progress[k.name].best_score:g}")
                for k in katas]
        if track:
            missing = [name for name in track.katas or () if name not in {k.name for k in katas}]
            click.echo("\n".join(wrap(f"Track {track.name}: {track.description}"
                       + (f" (not installed yet: {', '.join(missing)})" if missing else ""))) + "\n")
        # Title and topics give way first; `kata show` and `kata list --json` have them whole.
        click.echo(fitted_table(rows, ["kata", "title", "difficulty", "topics", "time", "status", "best"],
                                shrinkable={3: 16, 1: 14}, droppable=(3,)))
    for warning in warnings:
        click.echo(f"Warning: {warning}", err=True)


def _katas_json(katas, progress) -> str:
    import json

    from grader.kata.catalog import kata_dirs
    from grader.kata.tracks import TrackError, load_tracks
    try:
        tracks = load_tracks(kata_dirs())
    except TrackError:
        tracks = {}
    return json.dumps([{
        "name": k.name, "title": k.title, "difficulty": k.difficulty, "topics": list(k.topics),
        "minutes": k.minutes,
        "tracks": [t.name for t in tracks.values() if t.katas is not None and k.name in t.katas],
        "tasks": [{"name": t.name, "signature": t.signature, "dtypes": list(t.dtypes)} for t in k.tasks],
        "status": progress[k.name].status, "best_score": progress[k.name].best_score,
    } for k in katas], indent=2)


@main.command()
@click.argument("kata", shell_complete=complete_kata)
def show(kata):
    """Show a kata's statement, signature, tolerances, what PyTorch may do, and public cases."""
    from grader.results.report import render_workspace_readme
    click.echo(render_workspace_readme(kata_or_exit(kata)))


@main.command()
@click.argument("kata", shell_complete=complete_kata)
@click.option("--dir", "parent", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              show_default=True, help="Folder in which to create the KATA workspace folder.")
@click.option("--force", is_flag=True, help="Replace an existing solution.py (a .bak copy is kept).")
def new(kata, parent, force):
    """Scaffold DIR/KATA/solution.py (the stub) and DIR/KATA/README.md (the statement)."""
    from grader.learner.workspace import SolutionExistsError, scaffold
    k = kata_or_exit(kata)
    try:
        made = scaffold(k, parent, force=force)
    except SolutionExistsError as exc:
        click.echo(f"Error: {exc}", err=True)
        sys.exit(EXIT_FAIL)
    if made.backup:
        click.echo(f"Saved your previous solution as {made.backup}")
    click.echo(f"Created {made.solution} and {made.readme}")
    click.echo(f"Next: edit {made.solution}, then run: kata grade {made.directory}")


@main.command()
@click.argument("path", required=False, type=click.Path(path_type=Path), default=Path("."))
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object (docs/RESULTS.md).")
@click.option("--report", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write a report: Markdown (.md) or HTML (.html).")
@click.option("--interpret", is_flag=True, help="Run on the CPU under the Triton interpreter (correctness only).")
@click.option("--gpu", is_flag=True, help="Run on the GPU: correctness and speed (the default when CUDA is available).")
@click.option("--timeout", type=click.FloatRange(min=1),
              help="Time limit in seconds for the whole grade and for each case (default: 3 min on a "
                   "GPU, 5 under the interpreter; a case gets an allowance plus a multiple of the "
                   "baseline's time, at most 60 s).")
@click.option("--fail-fast", is_flag=True, help="Stop at the first failing case.")
@click.option("--keep-going", is_flag=True,
              help="Run every case, and time the bench cases, even when cases failed (by default a "
                   "task stops after 3 failing cases, and a wrong solution is not timed).")
@click.option("--memory", "memory_gib", type=click.FloatRange(min=0.5),
              help="CPU memory limit in GiB for the submission's process tree (default: half the machine, 4-32 GiB).")
@click.option("--seed", type=int, help="Fix the input seed (to reproduce a failure); default: a fresh secret one.")
@click.option("--kata", "kata_name", shell_complete=complete_kata,
              help="Grade PATH against this kata, wherever the file is (default: the workspace's kata).")
@handle_option
@db_option
@click.option("--no-record", is_flag=True, help="Do not record this grade in the results store.")
@click.option("--case", "only_cases", multiple=True, metavar="NAME",
              help="Run only this case (repeatable), e.g. the one that failed: a partial grade, "
                   "never recorded.")
@click.option("--profile", "profile_dir", type=click.Path(file_okay=False, path_type=Path), metavar="DIR",
              help="On a GPU, also write per timed case a Chrome trace of one call (opens in Perfetto) "
                   "and the Triton IR and PTX of its longest kernel into DIR.")
def grade(path, as_json, report, interpret, gpu, timeout, fail_fast, keep_going, memory_gib, seed,
          kata_name, handle, db, no_record, only_cases, profile_dir):
    """Grade a solution: PATH is a solution file or a kata workspace folder (default: here)."""
    from grader.grading.runner import grade as run_grade
    from grader.learner.workspace import WorkspaceError, resolve
    from grader.results.report import ReportFormatError, report_format, to_json, write_report
    notes: list[str] = []
    try:
        kata, solution = resolve(path, kata_name, notes)
        if report:
            report_format(report)
    except (WorkspaceError, ReportFormatError, UnknownKataError, KataFormatError) as exc:
        usage_error(str(exc))
    mode = resolve_mode(interpret, gpu)
    if only_cases:
        from grader.grading.plan import build_plan
        from grader.grading.runner import select_cases
        try:
            select_cases(kata, build_plan(kata, mode), only_cases)
        except ValueError as exc:
            usage_error(str(exc))
    if not as_json:
        for note in notes:
            click.echo(note, err=True)
        click.echo(f"Grading {solution} against {kata.name} ({mode} mode)...", err=True)
        if mode == "gpu":
            from grader.grading.cuda_probe import total_memory_bytes
            from grader.kata.gpu_memory_fit import shortfall
            too_small = shortfall(kata, total_memory_bytes())
            if too_small:
                click.echo(f"Warning: {too_small}.", err=True)
    progress = LiveProgress(kata) if not as_json and sys.stderr.isatty() else None
    result = run_grade(kata, solution, mode, seed=seed, timeout_s=timeout, memory_gib=memory_gib,
                       protected=_protected_paths(report, db), fail_fast=fail_fast,
                       keep_going=keep_going, progress=progress, only_cases=only_cases or None,
                       profile_dir=profile_dir.resolve() if profile_dir else None)
    if progress:
        progress.finish()
    if only_cases:  # a partial grade says nothing about the kata: not recorded anywhere
        if not as_json:
            click.echo(f"Graded only case(s) {', '.join(result.only_cases)}: a partial grade, not "
                       "recorded.", err=True)
    else:
        if not no_record:
            record_or_warn(result, db, handle)
        after_grade(solution, result)  # the workspace's record: kata list, kata solution, interviews
    if report:
        reference = None
        if report_format(report) == "html" and result.mode == "gpu":
            reference = reference_times(db, kata, result.device)
        write_report(result, report, reference)
    if as_json:
        click.echo(to_json(result))
    else:
        click.echo(format_result(result))
        if report:
            click.echo(f"Report written to {report}")
        if profile_dir:
            click.echo(_profile_written(result, profile_dir))
    sys.exit(EXIT_PASS if result.status == "pass" else EXIT_FAIL)


class LiveProgress:
    """One status line on a terminal (stderr), rewritten as the grade moves: case by case, then
    the timing phase."""

    def __init__(self, kata):
        self.total = sum(len(c.dtypes) for t in kata.tasks for c in t.cases)
        self.done = 0
        self.failed = 0

    def __call__(self, event: dict) -> None:
        if event["type"] == "timed":
            return
        if event["type"] == "case":
            self.done += 1
            self.failed += event.get("status") != "pass"
            return
        what = "timing" if event.get("phase") == "timing" else "checking"
        what += " again" if event.get("again") else ""  # a suspect timing, timed afresh
        failed = f", {self.failed} failed" if self.failed else ""
        line = f"  [{self.done} checked{failed}] {what} {event['key']}"
        from grader.cli.layout import terminal_width
        click.echo("\r\x1b[2K" + line[:terminal_width() - 1], nl=False, err=True)

    def finish(self) -> None:
        click.echo("\r\x1b[2K", nl=False, err=True)


def _protected_paths(report: Path | None, db: Path | None) -> list[Path]:
    """What the submission must not write: the report and the results store (with its WAL files)."""
    paths = [report.resolve()] if report else []
    try:
        store = Path(db_path(db)).resolve()
    except ImportError:  # no results store to protect
        return paths
    return paths + [store, store.with_name(store.name + "-wal"), store.with_name(store.name + "-shm")]


def _profile_written(result, folder: Path) -> str:
    """Where `--profile` put its files, or why it wrote none."""
    if result.mode != "gpu":
        return "--profile wrote nothing: there are no GPU kernels to profile under the Triton interpreter"
    count = sum(len((c.anatomy or {}).get("files") or {}) for c in result.cases)
    if not count:
        return f"--profile wrote nothing to {folder}: no case was timed and profiled"
    return (f"Profile written to {folder}: {count} file(s), a Chrome trace (opens in Perfetto), "
            "Triton IR and PTX per timed case")


def format_result(result) -> str:
    from grader.cli.failures import failure_lines, headline, not_run_lines
    from grader.cli.layout import wrap
    from grader.results.report import grade_time, sandbox_summary, speed_notes
    colour = {"pass": "green", "fail": "red", "error": "red"}[result.status]
    b = result.score_breakdown
    lines = [click.style(f"{result.kata}: {result.status.upper()}", fg=colour, bold=True)
             + f"  score {b.total:g}/{b.max_possible:g}  ({result.mode} mode, {result.device or 'no device'})"]
    rows = []
    for c in result.cases:
        if c.status in ("skipped", "not_run"):  # counted below, a line per reason
            continue
        rows.append([c.task if len(result.tasks) > 1 else None, c.name, c.dtype,
                     "x".join(map(str, c.shape)) if c.shape else "-", c.status,
                     _num(c.max_abs_err), _num(c.time_ms), _num(c.baseline_ms),
                     f"{c.speedup:.2f}x" if c.speedup else "-",
                     f"{100 * c.roofline:.0f}%" if c.roofline else "-"])
    headers = ["task", "case", "dtype", "shape", "status", "max err", "ms", "baseline ms", "speedup", "roofline"]
    if not any(c.time_ms for c in result.cases):  # nothing timed (the interpreter): no empty columns
        rows, headers = [r[:6] for r in rows], headers[:6]
    if len(result.tasks) == 1:
        rows = [r[1:] for r in rows]
        headers = headers[1:]
    if rows:
        lines += ["", tabulate(rows, headers=headers)]
    lines += not_run_lines(result.cases)
    if result.speed_measured:
        lines.append(f"\nspeedup {result.speedup:.2f}x (geomean; threshold {result.threshold:g}x), "
                     f"roofline {100 * (result.roofline or 0):.0f}%")
    else:
        why = ("Triton interpreter: correctness only" if result.mode == "interpret"
               else "no bench case among the cases chosen with --case" if result.only_cases and result.correct
               else "not every case was correct")
        lines.append(f"\nspeed not measured ({why})")
    for note in speed_notes(result):
        lines += [click.style(part, fg="yellow") for part in wrap(note)]
    if result.duration_s is not None:
        lines.append(f"graded in {grade_time(result)}")
    lines += wrap(f"sandbox: {sandbox_summary(result.sandbox)}")
    reasons = Counter(s["reason"] for s in result.skipped)
    for reason, count in reasons.items():
        lines += wrap(f"skipped {count} case(s): {reason}")
    failing, shown = failure_lines(result.cases)  # each distinct error once, with its traceback
    lines += failing
    if result.cheats:
        lines += ["", click.style(f"rejected as a cheat: {result.cheat}", fg="red", bold=True)]
        for c in result.cheats:
            where = f" in {c['count']} case(s), first {c['first_case']}" if c.get("first_case") else ""
            lines += wrap(f"{c['reason']}{where}: {(c['message'].splitlines() or [''])[0]}", indent="  ")
    if result.diagnoses:
        lines += ["", click.style("what went wrong:", bold=True)]
        for d in result.diagnoses:
            where = f" in {d['count']} case(s), first {d['first_case']}" if d.get("first_case") else ""
            seen = (d['message'].splitlines() or [''])[0]
            lines += wrap(f"{d['code']}{where}" + ("" if seen.strip() in shown else f": {seen}"), indent="  ")
            if d.get("advice"):
                lines += wrap(f"-> {d['advice']}", indent="    ", subsequent="       ")
    if getattr(result, "advice", None):
        # The top advice in two lines; the others by name (the report and --json have them all).
        lines += ["", click.style("how to be faster:", bold=True)]
        top, rest = result.advice[0], result.advice[1:]
        where = f" in {top['count']} case(s), first {top['first_case']}" if top.get("first_case") else ""
        lines += wrap(f"{top['code']}{where}: {top['message']}", indent="  ")
        lines += wrap(f"-> {top['advice']}", indent="    ", subsequent="       ")
        if rest:
            lines += wrap(f"also: {', '.join(a['code'] for a in rest)} (see --report or --json)", indent="  ")
    if result.message:
        lines += [""] + wrap(headline(result.message, result.cases) if failing else result.message,
                             subsequent="")
    if result.output.strip():
        lines += ["", "output of the submission:", result.output.rstrip()]
    return "\n".join(lines)


def _num(value) -> str:
    return "-" if value is None else f"{value:.3g}"


@main.command()
@click.argument("katas", nargs=-1, shell_complete=complete_kata)
@click.option("--interpret", is_flag=True, help="Run on the CPU under the Triton interpreter.")
@click.option("--gpu", is_flag=True, help="Run on the GPU (the default when CUDA is available).")
@click.option("--json", "as_json", is_flag=True, help="Print every grade as JSON.")
def selftest(katas, interpret, gpu, as_json):
    """Check the katas themselves: every reference must pass and every stub must fail."""
    import json

    from grader.grading.selftest import selftest as run_selftest
    chosen = [kata_or_exit(k) for k in katas] if katas else all_katas()
    mode = resolve_mode(interpret, gpu)
    results = run_selftest(chosen, mode)  # side by side; timing phases take turns
    if as_json:
        click.echo(json.dumps([{"kata": r.kata, "ok": r.ok, "reference": r.reference.to_dict(),
                                "stub": r.stub.to_dict(),
                                "reference_side_by_side": r.reference_side_by_side.to_dict()
                                if r.reference_side_by_side else None}
                               for r in results], indent=2, default=str))
    else:
        rows = []
        for r in results:
            ref = r.reference
            rows.append([r.kata, f"{ref.status} ({ref.score:g})",
                         f"{ref.speedup:.2f}x" if ref.speedup else "-",
                         f"{100 * ref.roofline:.0f}%" if ref.roofline else "-",
                         r.stub.status, "ok" if r.ok else "BROKEN"])
        click.echo(tabulate(rows, headers=["kata", "reference", "speedup", "roofline", "stub", "verdict"]))
        for r in results:
            if r.reference_side_by_side is not None:
                first = r.reference_side_by_side
                why = (first.message or first.status).strip().splitlines()[0]
                outcome = "passed" if r.reference.status == "pass" else "failed again"
                click.echo(f"\n{r.kata} reference: failed beside other grades ({why}); graded "
                           f"alone, it {outcome}.")
            if not r.ok:
                bad = r.reference if r.reference.status != "pass" else r.stub
                which = "reference" if bad is r.reference else "stub"
                click.echo(f"\n{r.kata} {which}: {bad.message or bad.status}")
    sys.exit(EXIT_PASS if all(r.ok for r in results) else EXIT_FAIL)


for _command in (*STORE_COMMANDS, *LEARNER_COMMANDS, *BATCH_COMMANDS):
    main.add_command(_command)
