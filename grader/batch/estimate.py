"""How long a batch has left: each kata's grade time from this batch's finished grades of it, else
from the store's earlier grades of it in this mode (on this device once the batch knows it), else
the mean of this batch's grades so far; until one of them is known, "estimating"."""

from __future__ import annotations

import sqlite3
import statistics
from collections import defaultdict
from pathlib import Path

HISTORY_LIMIT = 50  # the latest grades of a kata read from the store


def earlier_grade_seconds(db_path: Path | str, katas, mode: str) -> dict[tuple[str, str], list[float]]:
    """{(kata, device): [grade seconds, latest first]} of the store's earlier grades in MODE.
    Read-only; an absent or unreadable store gives nothing (the estimate then waits for a grade)."""
    path = Path(db_path)
    if not path.is_file():
        return {}
    found: dict[tuple[str, str], list[float]] = defaultdict(list)
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1)
        try:
            for kata in sorted(set(katas)):
                rows = conn.execute(
                    "SELECT device, json_extract(result_json, '$.duration_s') FROM grades "
                    "WHERE kata = ? AND mode = ? AND json_extract(result_json, '$.duration_s') > 0 "
                    "ORDER BY id DESC LIMIT ?", (kata, mode, HISTORY_LIMIT)).fetchall()
                for device, seconds in rows:
                    found[(kata, device or "")].append(float(seconds))
        finally:
            conn.close()
    except sqlite3.Error:
        return {}
    return dict(found)


class Estimate:
    """Seconds a kata's grade takes, learnt as the batch goes."""

    def __init__(self, history: dict[tuple[str, str], list[float]] | None = None):
        self.history = history or {}
        self.device: str | None = None  # the device of the batch's grades, once one has ended
        self.seen: dict[str, list[float]] = defaultdict(list)  # this batch's grade seconds, by kata

    def ended(self, kata: str, seconds: float, device: str | None) -> None:
        self.seen[kata].append(seconds)
        self.device = self.device or device

    def seconds(self, kata: str) -> float | None:
        if self.seen.get(kata):
            return statistics.mean(self.seen[kata])
        here = [s for (k, d), times in self.history.items() if k == kata and d == self.device
                for s in times]
        anywhere = [s for (k, _), times in self.history.items() if k == kata for s in times]
        earlier = here or ([] if self.device else anywhere)
        if earlier:
            return statistics.median(earlier)
        mine = [s for times in self.seen.values() for s in times]
        return statistics.mean(mine) if mine else None

    def left(self, pending: list[str], running: list[tuple[str, float]], slots: int) -> float | None:
        """Seconds until the batch ends: PENDING katas still to start, RUNNING (kata, seconds
        it has run) in flight, SLOTS grades at a time. None while a kata's time is unknown."""
        work, longest = 0.0, 0.0
        for kata in pending:
            s = self.seconds(kata)
            if s is None:
                return None
            work, longest = work + s, max(longest, s)
        for kata, ran in running:
            s = self.seconds(kata)
            if s is None:
                return None
            rest = max(s - ran, 0.0)  # one past its usual time is about to end
            work, longest = work + rest, max(longest, rest)
        return max(work / max(slots, 1), longest)
