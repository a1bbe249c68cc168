"""Leaderboards from stored attempts: per device, per kata and overall (rules in docs/STORE.md).

Speed is only comparable on one kind of device, so every GPU model gets its own board; results
from the Triton interpreter were never timed and only fill a correctness table. Building the
boards is pure (attempts in, dataclasses out); rendering goes through templates/leaderboard.*.j2.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from pathlib import Path

from grader.store.database import Attempt, ranking_key

UNKNOWN_DEVICE = "unknown device"
OUTPUT_FILES = {"html": "leaderboard.html", "md": "leaderboard.md"}


@dataclass(frozen=True)
class Entry:
    """A person's best attempt at one kata on one device."""
    rank: int
    handle: str
    score: float
    speedup: float | None
    roofline: float | None
    status: str
    graded_at: str

    @property
    def date(self) -> str:
        return self.graded_at[:10]


@dataclass(frozen=True)
class KataBoard:
    kata: str
    threshold: float | None
    entries: list[Entry]

    @property
    def timed(self) -> list[Entry]:
        return [e for e in self.entries if e.speedup]

    @property
    def chart_max(self) -> float:
        """The speedup at the right edge of the bar chart: room for the bars and the threshold."""
        return 1.1 * max([e.speedup for e in self.timed] + [self.threshold or 0.0, 1.0])


@dataclass(frozen=True)
class OverallEntry:
    rank: int
    handle: str
    total: float  # sum of the person's best scores over the board's katas
    katas: int  # katas attempted on this device
    passed: int  # katas whose best attempt passed


@dataclass(frozen=True)
class PersonRooflines:
    handle: str
    fractions: list[tuple[str, float]]  # (kata, best attempt's roofline fraction)


@dataclass(frozen=True)
class DeviceBoard:
    device: str
    katas: list[KataBoard]
    overall: list[OverallEntry]
    rooflines: list[PersonRooflines]


@dataclass(frozen=True)
class CorrectnessCell:
    correct: bool
    graded_at: str  # the first correct attempt, else the latest one


@dataclass(frozen=True)
class CorrectnessRow:
    handle: str
    cells: dict[str, CorrectnessCell]  # kata -> cell; katas never attempted are absent
    solved: int


@dataclass(frozen=True)
class CorrectnessBoard:
    device: str
    katas: list[str]
    rows: list[CorrectnessRow]


@dataclass(frozen=True)
class Leaderboard:
    generated_at: str
    kata: str | None  # the filters it was built with
    device: str | None
    boards: list[DeviceBoard] = field(default_factory=list)
    correctness: CorrectnessBoard | None = None

    @property
    def empty(self) -> bool:
        return not self.boards and self.correctness is None


def _competition_ranks(keys: list[tuple]) -> list[int]:
    """1, 1, 3: equal keys share a rank, and the next rank skips the tied places."""
    ranks = []
    for i, key in enumerate(keys):
        ranks.append(ranks[-1] if i and key == keys[i - 1] else i + 1)
    return ranks


def _best_per_person(attempts: list[Attempt]) -> list[Attempt]:
    best: dict[str, Attempt] = {}
    for a in attempts:
        held = best.get(a.handle)
        if held is None or ranking_key(a.score, a.speedup, a.graded_at) < ranking_key(
                held.score, held.speedup, held.graded_at):
            best[a.handle] = a
    # Best first; among equals, whoever got there first, then by name.
    return sorted(best.values(), key=lambda a: (*ranking_key(a.score, a.speedup, a.graded_at), a.handle))


def kata_board(kata: str, attempts: list[Attempt]) -> KataBoard:
    best = _best_per_person(attempts)
    ranks = _competition_ranks([(a.score, a.speedup or 0.0) for a in best])
    entries = [Entry(rank, a.handle, a.score, a.speedup, a.roofline, a.status, a.graded_at)
               for rank, a in zip(ranks, best)]
    thresholds = [a.threshold for a in attempts if a.threshold]
    return KataBoard(kata, thresholds[-1] if thresholds else None, entries)


def device_board(device: str, attempts: list[Attempt]) -> DeviceBoard:
    katas = [kata_board(k, [a for a in attempts if a.kata == k])
             for k in sorted({a.kata for a in attempts})]
    totals: dict[str, list[Entry]] = {}
    for board in katas:
        for e in board.entries:
            totals.setdefault(e.handle, []).append(e)
    people = sorted(totals.items(), key=lambda item: (-sum(e.score for e in item[1]), item[0]))
    ranks = _competition_ranks([(round(sum(e.score for e in entries), 6),) for _, entries in people])
    overall = [OverallEntry(rank, handle, sum(e.score for e in entries), len(entries),
                            sum(e.status == "pass" for e in entries))
               for rank, (handle, entries) in zip(ranks, people)]
    rooflines = []
    for o in overall:
        fractions = [(b.kata, e.roofline) for b in katas for e in b.entries
                     if e.handle == o.handle and e.roofline is not None]
        if fractions:
            rooflines.append(PersonRooflines(o.handle, fractions))
    return DeviceBoard(device, katas, overall, rooflines)


def correctness_board(device: str, attempts: list[Attempt]) -> CorrectnessBoard:
    katas = sorted({a.kata for a in attempts})
    rows = []
    for handle in sorted({a.handle for a in attempts}):
        cells = {}
        for kata in katas:
            mine = [a for a in attempts if a.handle == handle and a.kata == kata]  # oldest first
            if mine:
                first_correct = next((a for a in mine if a.correct), None)
                cells[kata] = CorrectnessCell(first_correct is not None, (first_correct or mine[-1]).graded_at)
        rows.append(CorrectnessRow(handle, cells, sum(c.correct for c in cells.values())))
    rows.sort(key=lambda r: (-r.solved, r.handle))
    return CorrectnessBoard(device, katas, rows)


def build_leaderboard(attempts: list[Attempt], kata: str | None = None,
                      device: str | None = None) -> Leaderboard:
    """kata: only that kata; device: only devices whose name contains it (any case)."""
    chosen = [a for a in attempts if (kata is None or a.kata == kata)
              and (device is None or device.lower() in (a.device or UNKNOWN_DEVICE).lower())]
    by_device: dict[str, list[Attempt]] = {}
    for a in chosen:
        # A grade timed on a shared GPU is not ranked: its speed says as much about the others.
        if a.mode == "gpu" and not a.gpu_shared:
            by_device.setdefault(a.device or UNKNOWN_DEVICE, []).append(a)
    boards = [device_board(name, rows) for name, rows in by_device.items()]
    boards.sort(key=lambda b: (-len(b.overall), b.device))  # the busiest board first
    interpreted = [a for a in chosen if a.mode == "interpret"]
    devices = sorted({a.device or UNKNOWN_DEVICE for a in interpreted})
    correctness = correctness_board(" / ".join(devices), interpreted) if interpreted else None
    generated = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    return Leaderboard(generated, kata, device, boards, correctness)


def render_leaderboard(board: Leaderboard, fmt: str) -> str:
    """fmt: 'html' (one self-contained page, SVG charts) or 'md'."""
    from grader.results.report import template_environment  # the report filters (num, pct, speed) are shared
    env = template_environment()
    env.filters["md"] = lambda v: str(v).replace("|", "\\|")
    template = env.get_template("leaderboard.html.j2" if fmt == "html" else "leaderboard.md.j2")
    return template.render(lb=board)


def write_leaderboard(board: Leaderboard, out_dir: Path) -> list[Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt, name in OUTPUT_FILES.items():
        path = out_dir / name
        path.write_text(render_leaderboard(board, fmt), encoding="utf-8")
        written.append(path)
    return written
