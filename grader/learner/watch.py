"""Polling loops with injectable sleep and clock: the solution watcher and the interview countdown.

Polling (size and mtime, then a content hash) needs no extra dependency and works on every
file system; editors that save through a temporary file and a rename are seen as one change.
Tests pass a fake `sleep` that edits the file or raises KeyboardInterrupt, so nothing sleeps.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Callable


@dataclass(frozen=True)
class FileState:
    mtime_ns: int
    size: int
    digest: str


def file_state(path: Path, previous: FileState | None = None) -> FileState | None:
    """The file's state, or None while it is missing (mid-save); the hash is only recomputed
    when size or mtime moved."""
    try:
        stat = Path(path).stat()
        if previous and (stat.st_mtime_ns, stat.st_size) == (previous.mtime_ns, previous.size):
            return previous
        digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None
    return FileState(stat.st_mtime_ns, stat.st_size, digest)


def watch_file(path: Path, on_change: Callable[[], None], *, interval: float = 0.5,
               sleep: Callable[[float], None] = time.sleep,
               should_stop: Callable[[], bool] = lambda: False, run_first: bool = True) -> int:
    """Call on_change() once at the start (run_first) and again after every save that changes
    the file's content; return how many times it was called. Ends when should_stop() is true;
    a KeyboardInterrupt from sleep or on_change propagates to the caller."""
    calls = 0
    state = file_state(path)
    if run_first and state is not None:
        on_change()
        calls += 1
    while not should_stop():
        sleep(interval)
        current = file_state(path, state)
        if current is None or current == state:
            continue
        changed = state is None or current.digest != state.digest  # a touch is not a save
        state = current
        if changed:
            on_change()
            calls += 1
    return calls


def countdown(deadline: datetime, on_tick: Callable[[float], None], *,
              now: Callable[[], datetime], sleep: Callable[[float], None] = time.sleep,
              interval: float = 1.0) -> None:
    """Call on_tick(seconds left) every interval until the deadline has passed (the last call
    gets a value <= 0). Ctrl-C (KeyboardInterrupt) propagates."""
    while True:
        left = (deadline - now()).total_seconds()
        on_tick(left)
        if left <= 0:
            return
        sleep(min(interval, left))
