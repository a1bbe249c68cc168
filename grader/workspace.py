"""Kata workspaces: scaffolding one (`kata new`) and finding the kata and solution behind a path."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import yaml

from grader.catalog import get_kata, kata_dirs
from grader.kata import Kata

MARKER = ".kata.yaml"  # records which kata a workspace holds
SOLUTION = "solution.py"


class WorkspaceError(Exception):
    """A path that cannot be graded; the message says what to do instead."""


class SolutionExistsError(Exception):
    pass


@dataclass
class Scaffold:
    directory: Path
    solution: Path
    readme: Path
    backup: Path | None


def scaffold(kata: Kata, parent: Path, force: bool = False) -> Scaffold:
    from grader.report import render_workspace_readme

    directory = Path(parent) / kata.name
    solution = directory / SOLUTION
    backup = None
    if solution.exists():
        if not force:
            raise SolutionExistsError(
                f"{solution} already exists: your work is kept. Use --force to replace it with "
                "the stub (the old file is saved as solution.py.bak).")
        backup = solution.with_name(SOLUTION + ".bak")
        shutil.copy2(solution, backup)
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(kata.stub_path, solution)
    readme = directory / "README.md"
    readme.write_text(render_workspace_readme(kata))
    (directory / MARKER).write_text(yaml.safe_dump({"kata": kata.name}))
    return Scaffold(directory, solution, readme, backup)


def resolve(path: Path, kata_name: str | None = None) -> tuple[Kata, Path]:
    """(kata, solution file) for a solution file or a workspace folder.

    kata_name, when given, names the kata instead of the workspace's marker.
    """
    path = Path(path)
    if not path.exists():
        hint = ""
        if path.name in kata_dirs() and not path.is_absolute():
            hint = f" To start this kata: kata new {path.name}"
        raise WorkspaceError(f"Path does not exist: {path}.{hint}")
    if path.is_dir():
        workspace, solution = path, path / SOLUTION
        if not solution.is_file():
            if not kata_name:
                _kata_of(workspace)  # a folder that is no workspace at all says so first
            raise WorkspaceError(f"No {SOLUTION} in {workspace}. Scaffold one with "
                                 f"`kata new KATA`, or give the solution file's path.")
    else:
        workspace, solution = path.parent, path
        if path.suffix != ".py":
            raise WorkspaceError(f"{path} is not a Python file: give a solution .py file or a kata workspace folder.")
    return (get_kata(kata_name) if kata_name else _kata_of(workspace)), solution


def _kata_of(workspace: Path) -> Kata:
    marker = workspace / MARKER
    if marker.is_file():
        try:
            name = (yaml.safe_load(marker.read_text()) or {}).get("kata")
        except yaml.YAMLError:
            name = None
        if not name:
            raise WorkspaceError(f"{marker} is damaged: it should say `kata: NAME`.")
        return get_kata(name)
    if workspace.resolve().name in kata_dirs():  # a folder named after a kata is clear enough
        return get_kata(workspace.resolve().name)
    raise WorkspaceError(
        f"{workspace} is not a kata workspace: it has no {MARKER} and is not named after a kata. "
        "Create one with `kata new KATA`, or grade a file inside a workspace.")
