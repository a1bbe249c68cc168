"""What every `kata` command group shares: exit codes, usage errors, and the arguments they all
resolve the same way (a kata's name, a track's name, the grading mode).

Imported by grader.cli.main, grader.cli.learner, grader.cli.store and grader.cli.batch, and
importing none of them, so the command groups never import each other in a circle.
"""

from __future__ import annotations

import sys

import click

from grader.kata.catalog import UnknownKataError, get_kata
from grader.kata.format import KataFormatError

EXIT_PASS, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def usage_error(message: str) -> None:
    click.echo(f"Error: {message}", err=True)
    sys.exit(EXIT_USAGE)


def kata_or_exit(name: str):
    try:
        return get_kata(name)
    except UnknownKataError as exc:
        usage_error(str(exc))
    except KataFormatError as exc:
        usage_error(f"The kata '{name}' is broken: {exc}")


def track_or_exit(name: str):
    """The track NAME of katas/tracks.yaml, checked against the installed katas."""
    from grader.kata.catalog import kata_dirs
    from grader.kata.tracks import TrackError, UnknownTrackError, get_track
    try:
        return get_track(name, kata_dirs())
    except UnknownTrackError as exc:
        usage_error(f"{exc} `kata list --track NAME` shows a track's katas (docs/INTERVIEW.md).")
    except TrackError as exc:
        usage_error(f"The tracks file is broken: {exc}")


def complete_track(ctx, param, incomplete):
    from grader.kata.catalog import kata_dirs
    from grader.kata.tracks import TrackError, load_tracks
    try:
        return [name for name in load_tracks(kata_dirs()) if name.startswith(incomplete)]
    except TrackError:
        return []


def complete_kata(ctx, param, incomplete):
    from grader.kata.catalog import kata_dirs
    return [name for name in kata_dirs() if name.startswith(incomplete)]


def resolve_mode(interpret: bool, gpu: bool) -> str:
    if interpret and gpu:
        usage_error("--interpret and --gpu exclude each other.")
    if interpret:
        return "interpret"
    from grader.grading.cuda_probe import cuda_available
    has_gpu = cuda_available()
    if gpu and not has_gpu:
        usage_error("--gpu needs a CUDA GPU and torch sees none; grade with --interpret (correctness only).")
    return "gpu" if (gpu or has_gpu) else "interpret"
