"""`kata batch grade`: a group's submissions graded across every GPU of a host or a Ray cluster,
recorded as they arrive, with a leaderboard at the end.

Like the other command modules this parses and formats; the work is in grader.batch. Registered
on the `kata` group in grader.cli.main. It never imports torch (the grading processes do).
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path

import click

from grader.cli.common import complete_kata, kata_or_exit, resolve_mode, usage_error
from grader.cli.store import db_option

EXIT_DONE, EXIT_NOT_ALL, EXIT_INTERRUPTED = 0, 1, 130


def _mode(interpret: bool, gpu: bool, ray_address: str | None) -> str:
    """As `kata grade` chooses; on a cluster (--ray-address) GPU unless --interpret, whatever
    this machine has (a cluster without GPUs is told at once: grader.batch.engine)."""
    if not ray_address:
        return resolve_mode(interpret, gpu)
    if interpret and gpu:
        usage_error("--interpret and --gpu exclude each other.")
    return "interpret" if interpret else "gpu"


@click.group("batch")
def batch():
    """Grade a group: many people's submissions at once, one leaderboard.

    \b
      kata batch grade subs/               subs/HANDLE/KATA/solution.py, every GPU here
      kata batch grade subs.csv            a manifest: handle,kata,path
      kata batch grade subs/ --resume      finish a batch that was stopped
      kata batch grade subs/ --ray-address ray://head:10001   on a Ray cluster
    """


def _refuse_unconfined() -> None:
    """A batch grades strangers' code: not where the sandbox cannot keep it from reading the
    machine's files or from the network (docs/SCORING.md, "The sandbox")."""
    from grader.grading.confinement import missing_for_strangers

    missing = missing_for_strangers()
    if missing:
        usage_error("kata batch grade runs other people's code, and on this machine the sandbox "
                    "cannot confine it: " + "; ".join(f"{name}: {why}" for name, why in missing.items())
                    + ". Grade here only code you trust, with --trust-submissions.")


@batch.command("grade")
@click.argument("source", type=click.Path(path_type=Path))
@click.option("--kata", "kata_name", shell_complete=complete_kata, help="Only this kata's submissions.")
@click.option("--gpus", type=click.IntRange(min=1),
              help="GPUs to grade on at once, one grade per GPU (default: every GPU here, or the "
                   "cluster's).")
@click.option("--cpus", type=click.IntRange(min=1),
              help="Interpreter grades at once (default: one per two cores here, or the cluster's CPUs).")
@click.option("--interpret", is_flag=True, help="Grade on CPUs under the Triton interpreter (correctness only).")
@click.option("--gpu", is_flag=True, help="Grade on GPUs (the default when there is one).")
@click.option("--ray-address", envvar="RAY_ADDRESS",
              help="A Ray cluster to grade on (e.g. ray://head:10001 or auto; default: RAY_ADDRESS, "
                   "else a Ray instance of its own on this machine).")
@click.option("--engine", type=click.Choice(["auto", "ray", "local"]), default="auto", show_default=True,
              help="ray, or a local process pool (local); auto: Ray when it is installed.")
@db_option
@click.option("--report", "report_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Write the batch's leaderboard here (leaderboard.html and leaderboard.md).")
@click.option("--resume", is_flag=True,
              help="Continue the last batch of SOURCE: grade only what it has not recorded.")
@click.option("--seed", type=int, help="One input seed for every grade (to reproduce a batch).")
@click.option("--timeout", type=click.FloatRange(min=1), help="Each grade's time limit in seconds (as kata grade).")
@click.option("--memory", "memory_gib", type=click.FloatRange(min=0.5),
              help="Each grade's CPU memory limit in GiB (as kata grade).")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object at the end: the batch and every grade (as kata grade --json).")
@click.option("--trust-submissions", is_flag=True,
              help="Grade even where the sandbox cannot confine reads or the network (this machine's "
                   "kernel lacks Landlock or seccomp): only for code you trust.")
def grade(source, kata_name, gpus, cpus, interpret, gpu, ray_address, engine, db, report_dir, resume,
          seed, timeout, memory_gib, as_json, trust_submissions):
    """Grade every submission in SOURCE (a folder HANDLE/KATA/solution.py, or a CSV manifest with
    the columns handle, kata, path) exactly as `kata grade` does, on every GPU at once, and record
    each result as it arrives. Exit codes: 0 every submission graded, 1 some could not be
    graded (recorded as errors with the reason), 2 usage error, 130 interrupted."""
    from grader.batch import ledger
    from grader.batch.driver import run_batch
    from grader.batch.engine import EngineError, Job, kata_digest, open_engine, ray_installed
    from grader.batch.progress import Progress, duration, summary_table
    from grader.batch.sources import SourceError, read_source
    from grader.kata.catalog import get_kata
    from grader.store.database import StoreError, default_db_path

    if engine == "local" and ray_address:
        usage_error("--ray-address needs the Ray engine (not --engine local).")
    if not trust_submissions:
        _refuse_unconfined()
    if kata_name:
        kata_or_exit(kata_name)
    try:
        submissions = read_source(source, kata_name)
    except SourceError as exc:
        usage_error(str(exc))
    mode = _mode(interpret, gpu, ray_address)
    db = db or default_db_path()
    try:
        run = ledger.open_batch(db, source, mode, kata_name, resume)
    except StoreError as exc:
        usage_error(str(exc))
    katas = {name: get_kata(name) for name in sorted({s.kata for s in submissions})}
    digests = {name: kata_digest(k.directory) for name, k in katas.items()}
    jobs, skipped = [], 0
    for s in submissions:
        key = ledger.attempt_id(run.label, s.handle, s.kata, s.sha256)
        if key in run.recorded:
            skipped += 1
            continue
        jobs.append(Job(key, s.handle, s.kata, str(s.path), s.sha256, {s.path.name: s.data},
                        digests[s.kata], mode, seed, timeout, memory_gib))

    say = lambda text: click.echo(text, err=True)  # noqa: E731
    if resume and not run.resumed:
        say(f"Nothing to resume for {source}: starting its first batch.")
    if run.earlier and not resume:
        say(f"Note: the previous batch of {source} recorded {run.earlier} result(s); this is a new "
            f"batch (--resume continues the last one instead).")
    what = f"{len(submissions)} submission(s)" + (f", {skipped} already recorded (skipped)" if skipped else "")
    say(f"Batch {run.label} of {source}: {what}, {mode} mode; results into {db}")

    started = time.monotonic()
    finished, engine_s = [], None
    if jobs:
        if engine == "auto" and not ray_address and not ray_installed():
            say('Ray is not installed (pip install ".[cluster]" adds it): grading on a local process pool.')
        try:
            with contextlib.redirect_stdout(sys.stderr):
                grader_engine = open_engine(engine, mode, gpus if mode == "gpu" else cpus, ray_address, cpus)
        except EngineError as exc:
            usage_error(str(exc))
        engine_s = time.monotonic() - started
        started = time.monotonic()  # throughput counts the grading, not the engine's start
        say(f"Grading {len(jobs)} on {grader_engine.description}.")
        from grader.batch.estimate import earlier_grade_seconds
        progress = Progress(len(jobs), jobs=jobs, slots=grader_engine.slots,
                            history=earlier_grade_seconds(db, katas, mode))

        def record(item):
            ledger.record(db, run.label, item.job.handle, item.job.key, item.result)

        def lost(job, reason, tries):
            return ledger.lost_result(katas[job.kata], job.path, job.sha256, mode, reason, tries)

        try:
            # Standard output carries the results alone: what Ray prints there (a dead worker's
            # "(raylet)" notice, from a thread of its own) goes to standard error instead.
            with contextlib.redirect_stdout(sys.stderr):
                finished = run_batch(jobs, grader_engine, record, lost, progress)
        except KeyboardInterrupt:
            progress.close()
            say(f"\nInterrupted: {progress.done} result(s) of this run recorded in {db}. "
                f"To finish the batch: kata batch grade {source} --resume")
            sys.exit(EXIT_INTERRUPTED)
        except StoreError as exc:
            progress.close()
            say(f"Error: the batch stopped, a result could not be recorded: {exc}\n"
                f"Results recorded so far stay in the store; fix it and run with --resume.")
            sys.exit(EXIT_NOT_ALL)
        progress.close()
    else:
        say("Nothing to grade: every submission is recorded already.")
    wall = time.monotonic() - started

    lost_items = [f for f in finished if f.lost]
    graded = len(finished) - len(lost_items)
    rate = 60 * graded / wall if graded and wall > 0 else None
    if as_json:
        click.echo(json.dumps({
            "batch": run.label, "source": str(source), "mode": mode, "db": str(db),
            "engine": grader_engine.name if jobs else None,
            "engine_description": grader_engine.description if jobs else None,
            "slots": grader_engine.slots if jobs else None,
            "submissions": len(submissions), "skipped": skipped, "graded": graded,
            "not_graded": len(lost_items), "wall_s": round(wall, 2),
            "engine_start_s": None if engine_s is None else round(engine_s, 2),
            "grades_per_minute": round(rate, 3) if rate else None,
            "results": [{"handle": f.job.handle, "kata": f.job.kata, "path": f.job.path,
                         "attempt_id": f.job.key, "tries": f.tries, "not_graded": f.lost,
                         "reason": f.reason or None, "grade": f.result.to_dict()} for f in finished],
        }, indent=1, default=str))
    elif finished:
        click.echo(summary_table(finished))
    if finished:
        counts = {status: sum(f.result.status == status for f in finished if not f.lost)
                  for status in ("pass", "fail", "error")}
        say(f"\n{graded} graded in {duration(wall)} ({rate or 0:.1f} grades/min) on "
            f"{grader_engine.description}: {counts['pass']} pass, {counts['fail']} fail, "
            f"{counts['error']} error" + (f", {len(lost_items)} NOT GRADED (recorded as errors)"
                                          if lost_items else "") + f". Recorded as {run.label} in {db}.")
    if report_dir:
        from grader.store.leaderboard import build_leaderboard, write_leaderboard
        try:
            written = write_leaderboard(build_leaderboard(ledger.batch_attempts(db, run.label)), report_dir)
        except (OSError, StoreError) as exc:
            usage_error(f"Cannot write the leaderboard into {report_dir}: {exc}")
        say("Leaderboard: " + " and ".join(str(p) for p in written))
    sys.exit(EXIT_NOT_ALL if lost_items else EXIT_DONE)


COMMANDS = [batch]
