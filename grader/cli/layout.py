"""Text that fits the terminal: its width (COLUMNS, else the terminal's, else 100), tables whose
long columns are shortened to fit, and lines wrapped at word boundaries, never cut."""

from __future__ import annotations

import shutil
import textwrap

from tabulate import tabulate

UNKNOWN_WIDTH = 100  # a pipe, a file, a CI log: a width any terminal shows without wrapping
MIN_WIDTH = 40
GAP = 2  # tabulate's "simple" format puts two spaces between columns


def terminal_width() -> int:
    """COLUMNS when set, else the terminal's width, else UNKNOWN_WIDTH."""
    return max(MIN_WIDTH, shutil.get_terminal_size((UNKNOWN_WIDTH, 24)).columns)


def wrap(text: str, width: int | None = None, indent: str = "", subsequent: str | None = None) -> list[str]:
    """TEXT's lines wrapped at word boundaries to WIDTH, the first line after INDENT and the
    others after SUBSEQUENT (default: INDENT plus two spaces). Nothing is dropped; a word longer
    than the line (a path, a URL) is kept whole."""
    width = width or terminal_width()
    subsequent = indent + "  " if subsequent is None else subsequent
    out: list[str] = []
    for number, line in enumerate(str(text).splitlines() or [""]):
        first = indent if number == 0 else subsequent
        out += textwrap.wrap(line, width=max(width, len(first) + 20), initial_indent=first,
                             subsequent_indent=subsequent, break_long_words=False,
                             break_on_hyphens=False) or [first.rstrip()]
    return out


def fitted_table(rows: list[list], headers: list[str], shrinkable: dict[int, int],
                 width: int | None = None, droppable: tuple[int, ...] = ()) -> str:
    """A tabulate table at most WIDTH columns wide: the columns in SHRINKABLE ({index: the
    narrowest it may get}, in the order they give way) are shortened at word boundaries ("...")
    until the table fits, each down to its minimum before the next; then the DROPPABLE columns
    are left out, in that order. Full values belong elsewhere (`--json`, `kata show`)."""
    width = width or terminal_width()
    cells = [[("" if v is None else str(v)) for v in row] for row in rows]
    limits = {i: max([len(r[i]) for r in cells] + [len(headers[i])]) for i in shrinkable}
    dropped: set[int] = set()
    while True:
        keep = [i for i in range(len(headers)) if i not in dropped]
        table = tabulate([[shorten(row[i], limits[i]) if i in limits else row[i] for i in keep]
                          for row in cells], headers=[headers[i] for i in keep], disable_numparse=True)
        excess = max(map(len, table.splitlines() or [""])) - width
        if excess <= 0:
            return table
        for i, low in shrinkable.items():
            cut = min(excess, limits[i] - max(low, len(headers[i])))
            if i not in dropped and cut > 0:
                limits[i] -= cut
                break
        else:
            left = [i for i in droppable if i not in dropped]
            if not left:
                return table  # as narrow as it may get
            dropped.add(left[0])
            limits = {i: max([len(r[i]) for r in cells] + [len(headers[i])]) for i in shrinkable}


def shorten(text: str, width: int) -> str:
    """TEXT cut to at most WIDTH characters at a word boundary (mid-word only when no whole word
    fits), marked with "..."."""
    if len(text) <= width:
        return text
    room = max(width - 3, 1)
    kept = [text[:i].rstrip(" ,;:") for i, ch in enumerate(text) if ch == " "]
    fitting = [k for k in kept if 0 < len(k) <= room]
    return (fitting[-1] if fitting else text[:room]) + "..."
