"""Progressive hints: each kata has three (nudge, approach, near-solution), revealed one at a time.

What has been revealed is kept in the workspace record (grader.learner.progress), so the next
`kata hint` continues where the last one stopped, in any process. In an interview each hint
costs points (HINT_COSTS, documented in docs/INTERVIEW.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from grader.kata.format import Kata
from grader.learner.clock import format_time
from grader.learner.progress import load_record, save_record

HINT_LABELS = ("nudge", "approach", "near-solution")
HINT_COSTS = (5, 10, 20)  # interview points each hint costs, in order (35 for all three)


def hint_cost(taken: int) -> int:
    """Interview points lost for the first `taken` hints."""
    return sum(HINT_COSTS[:taken])


@dataclass
class HintReveal:
    level: int  # 1..3: the hint just revealed; 0 when every hint had already been taken
    label: str
    text: str
    taken: int  # hints taken so far, this one included
    total: int
    earlier: list[str]  # the hints taken before, to show again when none is left


def take_hint(kata: Kata, workspace: Path, now: datetime) -> HintReveal:
    """Reveal and record the next hint (nothing is recorded once all three are taken)."""
    record = load_record(workspace, kata.name)
    taken = record.hints_taken
    total = len(kata.hints)
    if taken >= total:
        return HintReveal(0, "", "", taken, total, list(kata.hints))
    level = taken + 1
    record.hints.append({"level": level, "at": format_time(now)})
    save_record(workspace, record)
    return HintReveal(level, HINT_LABELS[level - 1], kata.hints[level - 1], level, total,
                      list(kata.hints[:taken]))
