"""Kata workspaces: scaffolding one (`kata new`) and finding the kata and solution behind a path."""

from __future__ import annotations

import ast
import shutil
from dataclasses import dataclass
from pathlib import Path

import yaml

from grader.kata.catalog import all_katas, get_kata, kata_dirs
from grader.kata.format import Kata

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
    from grader.results.report import render_workspace_readme

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


def resolve(path: Path, kata_name: str | None = None, notes: list[str] | None = None) -> tuple[Kata, Path]:
    """(kata, solution file) for a solution file or a workspace folder.

    kata_name, when given, names the kata instead of the workspace's marker. A file outside any
    workspace is graded against the one kata whose functions it defines (a line saying so is
    appended to NOTES).
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
        if not kata_name and not _is_workspace(workspace):
            kata = infer_kata(solution)
            if notes is not None:
                notes.append(f"{solution.name} is in no kata workspace: graded against {kata.name}, "
                             "the kata whose functions it defines (--kata NAME to choose another).")
            return kata, solution
    return (get_kata(kata_name) if kata_name else _kata_of(workspace)), solution


def _is_workspace(folder: Path) -> bool:
    return (folder / MARKER).is_file() or folder.resolve().name in kata_dirs()


def infer_kata(solution: Path) -> Kata:
    """The kata a bare file is for: the only kata whose every entry function it defines (with
    the kata's parameters, when several define them all), or the only one it has begun."""
    try:
        tree = ast.parse(solution.read_text(errors="replace"), str(solution))
    except (SyntaxError, ValueError):
        tree = None
    defined = {} if tree is None else {
        node.name: [a.arg for a in node.args.posonlyargs + node.args.args]
        for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    katas = all_katas()
    complete = [k for k in katas if all(t.name in defined for t in k.tasks)]
    exact = [k for k in complete if all(defined[t.name][:len(t.args)] == list(t.args) for t in k.tasks)]
    begun = [k for k in katas if any(t.name in defined for t in k.tasks)]
    for found in (exact, complete, [] if complete else begun):
        if len(found) == 1:
            return found[0]
    candidates = complete or begun
    if candidates:
        listed = ", ".join(f"{k.name} ({', '.join(t.name for t in k.tasks)})" for k in candidates)
        raise WorkspaceError(f"{solution} is in no kata workspace, and its functions fit more than one "
                             f"kata: {listed}. Add --kata NAME to say which.")
    why = "it does not parse as Python, so " if tree is None else ""
    raise WorkspaceError(f"{solution} is in no kata workspace, and {why}it defines no kata's entry "
                         "function (softmax, vector_add, ...: `kata list`). Add --kata NAME to say "
                         "which kata it solves.")


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


def workspace_kata_name(directory: Path) -> str | None:
    """The kata a folder is a workspace of (its marker, else its name), or None."""
    directory = Path(directory)
    marker = directory / MARKER
    if marker.is_file():
        try:
            name = (yaml.safe_load(marker.read_text()) or {}).get("kata")
        except (yaml.YAMLError, AttributeError):
            return None
        return name if isinstance(name, str) else None
    if (directory / SOLUTION).is_file() and directory.resolve().name in kata_dirs():
        return directory.resolve().name
    return None


def find_workspace(kata_name: str | None, directory: Path) -> tuple[Kata, Path]:
    """(kata, workspace folder) for `kata hint/reset/solution`.

    With a kata name: DIR/KATA (as `kata new --dir DIR` made it) or DIR itself when it is that
    kata's workspace. Without: DIR must be a workspace.
    """
    directory = Path(directory)
    if kata_name is None:
        name = workspace_kata_name(directory)
        if name is None:
            raise WorkspaceError(f"{directory} is not a kata workspace: name the kata (e.g. "
                                 "`kata hint softmax`) or run this inside a workspace.")
        return get_kata(name), directory
    kata = get_kata(kata_name)
    for candidate in (directory / kata_name, directory):
        if candidate.is_dir() and workspace_kata_name(candidate) == kata_name:
            return kata, candidate
    raise WorkspaceError(f"No workspace for '{kata_name}' in {directory}: create one with "
                         f"`kata new {kata_name}`, or point --dir at the folder that holds it.")


@dataclass
class Reset:
    solution: Path
    backup: Path | None  # None when there was nothing to keep
    changed: bool  # False when the solution already was the stub


def reset_solution(kata: Kata, workspace: Path) -> Reset:
    """Put the stub back in WORKSPACE/solution.py, first copying the old file to the next free
    solution.bakN.py (an earlier backup is never overwritten)."""
    solution = Path(workspace) / SOLUTION
    stub = kata.stub_path.read_bytes()
    if solution.is_file() and solution.read_bytes() == stub:
        return Reset(solution, None, False)
    backup = None
    if solution.is_file():
        backup = _claim_backup_path(solution)
        backup.write_bytes(solution.read_bytes())
        shutil.copystat(solution, backup)
    solution.write_bytes(stub)
    return Reset(solution, backup, True)


def _claim_backup_path(solution: Path) -> Path:
    number = 1
    while True:
        candidate = solution.with_name(f"{solution.stem}.bak{number}{solution.suffix}")
        try:
            with open(candidate, "x"):  # exclusive create: two resets never share a name
                return candidate
        except FileExistsError:
            number += 1
