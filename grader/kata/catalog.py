"""Finding katas by name."""

from __future__ import annotations

import difflib
from functools import lru_cache
from pathlib import Path

from grader.kata.format import Kata, load_kata
from grader.paths import kata_roots


class UnknownKataError(LookupError):
    def __init__(self, name: str, known: list[str]):
        self.name = name
        self.known = known
        close = difflib.get_close_matches(name, known, n=1)
        self.suggestion = close[0] if close else None
        hint = f" Did you mean '{self.suggestion}'?" if self.suggestion else ""
        super().__init__(f"Unknown kata '{name}'.{hint} Known katas: {', '.join(known)}.")


def kata_dirs() -> dict[str, Path]:
    dirs: dict[str, Path] = {}
    for root in kata_roots():
        katas = root / "katas"
        if katas.is_dir():
            for child in sorted(katas.iterdir()):
                if (child / "kata.yaml").is_file():
                    dirs.setdefault(child.name, child)
    return dirs


@lru_cache(maxsize=None)
def _load(directory: Path) -> Kata:
    return load_kata(directory)


def get_kata(name: str) -> Kata:
    dirs = kata_dirs()
    if name not in dirs:
        raise UnknownKataError(name, sorted(dirs))
    return _load(dirs[name])


def all_katas() -> list[Kata]:
    return [_load(d) for d in kata_dirs().values()]
