"""What a batch grades: submissions read from a folder of workspaces or a CSV manifest, checked
before anything runs.

A folder: SOURCE/HANDLE/KATA/solution.py, one folder per person (the folder's name is the
handle) holding one workspace per kata (the workspace's name is the kata), as `kata new` makes
them. A CSV manifest: a header naming the columns handle, kata and path (others are ignored),
then one row per submission, graded in that order (put the slowest first: the batch ends sooner);
a relative path is relative to the manifest's folder (a folder path means its solution.py).

Every problem is reported at once (SourceError.problems), with the row or folder it is in, and
nothing is graded while there is one: a missing file, an unknown kata, a duplicate row (the same
person and kata twice), an invalid handle.
"""

from __future__ import annotations

import csv
import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from grader.kata.catalog import UnknownKataError, get_kata
from grader.kata.format import KataFormatError
from grader.store.handle import HandleError, validate_handle

SOLUTION = "solution.py"  # a workspace's solution file (grader.workspace.SOLUTION)
COLUMNS = ("handle", "kata", "path")
MAX_PROBLEMS = 30  # listed in the error; the rest are counted


class SourceError(Exception):
    """SOURCE cannot be graded as it is; `problems` lists each reason, with where it is."""

    def __init__(self, source: Path, problems: list[str]):
        self.source, self.problems = source, problems
        shown = problems[:MAX_PROBLEMS]
        more = f"\n  ... and {len(problems) - MAX_PROBLEMS} more" if len(problems) > MAX_PROBLEMS else ""
        super().__init__(f"{source}: nothing was graded, {len(problems)} problem(s):\n  "
                         + "\n  ".join(shown) + more)


@dataclass(frozen=True)
class Submission:
    handle: str
    kata: str
    path: Path  # absolute
    where: str  # "line 7" of a manifest, or the workspace folder: for messages
    sha256: str
    data: bytes = field(repr=False, default=b"")  # the file as read: what is graded

    @property
    def name(self) -> str:
        return f"{self.handle}/{self.kata}"


def read_source(source: Path, kata: str | None = None) -> list[Submission]:
    """The submissions in SOURCE (a folder or a .csv manifest), only kata `kata`'s if given, in
    the order they are graded: a manifest's own, a folder's by handle and kata. Raises
    SourceError listing every problem."""
    source = Path(source)
    if source.is_dir():
        found, problems = _read_folder(source)
    elif source.is_file() and source.suffix.lower() == ".csv":
        found, problems = _read_manifest(source)
    elif source.exists():
        raise SourceError(source, ["not a folder of workspaces nor a .csv manifest"])
    else:
        raise SourceError(source, ["does not exist"])
    if kata is not None:
        found = [s for s in found if s.kata == kata]
    if problems:
        raise SourceError(source, problems)
    if not found:
        what = f" for kata {kata}" if kata else ""
        layout = ("a manifest row (handle,kata,path)" if source.is_file() else
                  f"HANDLE/KATA/{SOLUTION} under it")
        raise SourceError(source, [f"no submissions{what}: expected {layout}"])
    return found if source.is_file() else sorted(found, key=lambda s: (s.handle, s.kata))


def _read_folder(root: Path) -> tuple[list[Submission], list[str]]:
    found, problems = [], []
    people = [p for p in sorted(root.iterdir()) if p.is_dir() and not p.name.startswith((".", "_"))]
    for person in people:
        handle = _check_handle(person.name, problems, f"{person}")
        workspaces = [w for w in sorted(person.iterdir()) if w.is_dir() and not w.name.startswith((".", "_"))]
        if not workspaces:
            problems.append(f"{person}: no workspace (expected {person.name}/KATA/{SOLUTION})")
        for workspace in workspaces:
            where = str(workspace)
            kata_ok = _check_kata(workspace.name, problems, where)
            path = workspace / SOLUTION
            if not path.is_file():
                problems.append(f"{where}: missing file {SOLUTION}")
                continue
            if handle and kata_ok:
                found.append(_submission(handle, workspace.name, path, where, problems))
    return [s for s in found if s], _duplicates(found, problems)


def _read_manifest(manifest: Path) -> tuple[list[Submission], list[str]]:
    problems: list[str] = []
    try:
        text = manifest.read_text(encoding="utf-8-sig")  # a spreadsheet's BOM is not part of a column
    except (OSError, UnicodeDecodeError) as exc:
        return [], [f"cannot read it: {exc}"]
    rows = list(csv.reader(text.splitlines()))
    numbered = [(i, row) for i, row in enumerate(rows, start=1) if any(cell.strip() for cell in row)]
    if not numbered:
        return [], [f"empty: expected a header row ({','.join(COLUMNS)}) and one row per submission"]
    header_line, header = numbered[0]
    names = [cell.strip().lower() for cell in header]
    missing = [c for c in COLUMNS if c not in names]
    if missing:
        return [], [f"line {header_line}: the header must name the columns {', '.join(COLUMNS)} "
                    f"(missing: {', '.join(missing)}; found: {', '.join(header) or 'nothing'})"]
    index = {c: names.index(c) for c in COLUMNS}
    found = []
    for line, row in numbered[1:]:
        where = f"line {line}"
        if len(row) != len(header):
            problems.append(f"{where}: {len(row)} field(s), the header has {len(header)}")
            continue
        handle_text, kata, path_text = (row[index[c]].strip() for c in COLUMNS)
        empty = [c for c, v in zip(COLUMNS, (handle_text, kata, path_text)) if not v]
        if empty:
            problems.append(f"{where}: empty {', '.join(empty)}")
            continue
        handle = _check_handle(handle_text, problems, where)
        kata_ok = _check_kata(kata, problems, where)
        path = Path(path_text).expanduser()
        path = (path if path.is_absolute() else manifest.parent / path).resolve()
        if not path.exists():
            problems.append(f"{where}: missing file {path_text} (looked for {path})")
            continue
        if path.is_dir():
            path = path / SOLUTION
            if not path.is_file():
                problems.append(f"{where}: missing file {SOLUTION} in the folder {path_text}")
                continue
        elif path.suffix != ".py":
            problems.append(f"{where}: {path_text} is not a Python file")
            continue
        if handle and kata_ok:
            found.append(_submission(handle, kata, path, where, problems))
    return [s for s in found if s], _duplicates(found, problems)


def _submission(handle: str, kata: str, path: Path, where: str, problems: list[str]) -> Submission | None:
    try:
        data = path.read_bytes()
    except OSError as exc:
        problems.append(f"{where}: cannot read {path}: {exc.strerror or exc}")
        return None
    return Submission(handle, kata, path.resolve(), where, hashlib.sha256(data).hexdigest(), data)


def _duplicates(found: list[Submission | None], problems: list[str]) -> list[str]:
    """A person graded twice on one kata in one batch is a duplicate row, named with both places."""
    first: dict[tuple[str, str], Submission] = {}
    for s in found:
        if s is None:
            continue
        held = first.setdefault((s.handle, s.kata), s)
        if held is not s:
            problems.append(f"{s.where}: duplicate row: {s.handle} and {s.kata} again (first at "
                            f"{held.where}); a batch grades one submission per person and kata")
    return problems


def _check_handle(text: str, problems: list[str], where: str) -> str | None:
    try:
        return validate_handle(text)
    except HandleError as exc:
        problems.append(f"{where}: {exc}")
        return None


def _check_kata(name: str, problems: list[str], where: str) -> bool:
    try:
        get_kata(name)
        return True
    except UnknownKataError as exc:
        hint = f" (did you mean '{exc.suggestion}'?)" if exc.suggestion else ""
        problems.append(f"{where}: unknown kata '{name}'{hint}")
    except KataFormatError as exc:
        problems.append(f"{where}: the kata '{name}' is broken: {exc}")
    return False
