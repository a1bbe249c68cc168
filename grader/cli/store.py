"""`kata history`, `export`, `import` and `leaderboard`: the command line over the results store.

Like grader.cli.main, this only parses and formats; the work is in grader.store (database,
exchange, leaderboard). Registered on the `kata` group by grader.cli.main.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import click
from tabulate import tabulate

from grader.cli.common import usage_error

DB_HELP = "The results store (default: KATA_DB, else results.sqlite in the user's data folder)."
HANDLE_HELP = "Whose results (default: KATA_HANDLE, else `handle:` in the config file, else the OS user)."


def db_option(function):
    return click.option("--db", type=click.Path(dir_okay=False, path_type=Path), help=DB_HELP)(function)


def _check_handle(ctx, param, value):
    from grader.store.handle import HandleError, validate_handle
    try:
        return None if value is None else validate_handle(value)
    except HandleError as exc:
        raise click.BadParameter(str(exc)) from exc


def handle_option(function):
    return click.option("--handle", callback=_check_handle, help=HANDLE_HELP)(function)


def db_path(db: Path | None) -> Path:
    """The results store's file: --db, else the default (KATA_DB, else the user's data folder)."""
    from grader.store.database import default_db_path
    return db or default_db_path()


def _handle_or_exit(handle: str | None) -> str:
    from grader.store.handle import HandleError, resolve_handle
    try:
        return resolve_handle(handle)
    except HandleError as exc:
        usage_error(str(exc))


def reference_times(db: Path | None, kata, device: str | None) -> dict[str, float] | None:
    """{"task/case/dtype": time_ms} of the latest passing GPU grade of the kata's own reference
    on this device in the results store (the roofline plot draws it beside the grade), or None."""
    import hashlib

    try:
        from grader.store.database import StoreError, stored_grades
        wanted = hashlib.sha256(Path(kata.reference_path).read_bytes()).hexdigest()
        grades = stored_grades(db_path(db), kata=kata.name, everyone=True)
    except (ImportError, OSError, StoreError):
        return None
    for stored in reversed(grades):
        grade = stored.grade
        if (grade.get("submission_sha256") == wanted and grade.get("device") == device
                and grade.get("mode") == "gpu" and grade.get("status") == "pass"):
            return {f"{c['task']}/{c['name']}/{c['dtype']}": c["time_ms"]
                    for t in grade.get("tasks", []) for c in t.get("cases", [])
                    if isinstance(c.get("time_ms"), (int, float))}
    return None


def record_or_warn(result, db: Path | None, handle: str | None, mode_label: str | None = None) -> int | None:
    """Record a grade; on any failure warn on stderr and go on (a grade is never lost to the
    store: it has already been printed or written)."""
    from grader.store.handle import HandleError
    try:
        from grader.store.database import StoreError, record_grade
        path = db_path(db)
    except ImportError as exc:  # the store is optional to a grade
        click.echo(f"Warning: this grade was not recorded: the results store is unavailable ({exc})", err=True)
        return None
    try:
        return record_grade(result, path, handle=handle, mode_label=mode_label)
    except (StoreError, HandleError, OSError) as exc:
        click.echo(f"Warning: this grade was not recorded in the results store: {exc}", err=True)
        return None


def _when(graded_at: str) -> str:
    """Stored times are UTC; people read their local time."""
    try:
        return datetime.fromisoformat(graded_at).astimezone().strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return graded_at


def _speed(value) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _pct(value) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _store_call(function, *args, **kwargs):
    from grader.store.database import StoreError
    try:
        return function(*args, **kwargs)
    except StoreError as exc:
        usage_error(str(exc))


@click.command()
@click.argument("kata", required=False)
@handle_option
@db_option
def history(kata, handle, db):
    """Your graded attempts over time (all katas, or KATA), then your best per kata."""
    from grader.store.database import attempts, best_by_kata
    who = _handle_or_exit(handle)
    path = db_path(db)
    rows = _store_call(attempts, path, kata=kata, handle=who)
    if not rows:
        what = f" for {kata}" if kata else ""
        click.echo(f"No results recorded{what} for {who} in {path}. Grade a kata with `kata grade`.")
        return
    table = [[_when(a.graded_at), a.kata, a.label, a.mode, a.device or "-", a.status, f"{a.score:g}",
              _speed(a.speedup), _pct(a.roofline), f"{a.cases_passed}/{a.cases_total}"] for a in rows]
    click.echo(f"Attempts by {who} ({path}):\n")
    click.echo(tabulate(table, headers=["when", "kata", "kind", "mode", "device", "status", "score",
                                        "speedup", "roofline", "cases passed"]))
    best = _store_call(best_by_kata, path, handle=who)
    if kata:
        best = {k: v for k, v in best.items() if k == kata}
    click.echo("\nBest per kata:\n")
    click.echo(tabulate([[b.kata, f"{b.score:g}", b.status, _speed(b.speedup), b.mode, _when(b.graded_at)]
                         for b in best.values()],
                        headers=["kata", "best score", "status", "speedup", "mode", "when"]))


@click.command("export")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the JSON here (default: standard output).")
@click.option("--kata", help="Only this kata's results.")
@handle_option
@click.option("--all", "everyone", is_flag=True, help="Everyone's results in the store, imported ones too.")
@db_option
def export_results(out, kata, handle, everyone, db):
    """Your results as one JSON file (format: docs/STORE.md), to merge elsewhere with `kata import`."""
    from grader.store.database import stored_grades
    from grader.store.exchange import export_document
    who = _handle_or_exit(handle)
    grades = _store_call(stored_grades, db_path(db), kata=kata, handle=who, everyone=everyone)
    text = json.dumps(export_document(grades, who), indent=1, ensure_ascii=True) + "\n"
    if out is None:
        click.echo(text, nl=False)
        return
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        usage_error(f"Cannot write {out}: {exc}")
    whose = "everyone's" if everyone else f"{who}'s"
    click.echo(f"Exported {len(grades)} of {whose} results to {out}", err=True)


@click.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@db_option
def import_results(files, db):
    """Merge results exported with `kata export` (a team's, another machine's) into the store.

    Every file is checked first; if any is malformed or inconsistent, nothing is imported.
    Results already in the store are skipped, so importing a file twice adds nothing.
    """
    from grader.store.database import ImportConflictError, StoreError, import_grades
    from grader.store.exchange import ExchangeError, read_results_file
    grades, problems = [], []
    for path in files:
        try:
            grades += read_results_file(path)
        except ExchangeError as exc:
            problems.append(str(exc))
    if problems:
        usage_error("nothing was imported (the store is unchanged):\n  " + "\n  ".join(problems))
    path = db_path(db)
    try:
        summary = import_grades(path, grades)
    except ImportConflictError as exc:
        usage_error(f"{exc} Nothing was imported (the store is unchanged).")
    except StoreError as exc:
        usage_error(str(exc))
    click.echo(f"Imported {summary.added} new result(s) from {len(files)} file(s) into {path}"
               + (f"; {summary.already_present} were already there." if summary.already_present else "."))


@click.command()
@click.option("--kata", help="Only this kata.")
@click.option("--device", help="Only devices whose name contains this (e.g. H100, or 'interpreter').")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("."),
              show_default=True, help="Folder for leaderboard.html and leaderboard.md.")
@db_option
def leaderboard(kata, device, out_dir, db):
    """Write leaderboard.html and leaderboard.md from everyone's recorded results: per device,
    per kata (score, then speedup; best per person) and overall (sum of best scores)."""
    from grader.store.database import attempts
    from grader.store.leaderboard import build_leaderboard, write_leaderboard
    everything = _store_call(attempts, db_path(db), everyone=True)
    board = build_leaderboard(everything, kata=kata, device=device)
    if board.empty and (kata or device):
        katas = sorted({a.kata for a in everything}) or ["none"]
        devices = sorted({a.device or "unknown device" for a in everything}) or ["none"]
        usage_error(f"No recorded results match{' kata ' + kata if kata else ''}"
                     f"{' device ' + repr(device) if device else ''}. Katas with results: "
                     f"{', '.join(katas)}; devices: {', '.join(devices)}.")
    try:
        written = write_leaderboard(board, out_dir)
    except OSError as exc:
        usage_error(f"Cannot write the leaderboard into {out_dir}: {exc}")
    people = {e.handle for b in board.boards for e in b.overall}
    if board.correctness:
        people |= {r.handle for r in board.correctness.rows}
    click.echo(f"Leaderboard of {len(people)} people on {len(board.boards)} GPU model(s)"
               + (" and the interpreter" if board.correctness else "") + ": "
               + " and ".join(str(p) for p in written))


COMMANDS = [history, export_results, import_results, leaderboard]
