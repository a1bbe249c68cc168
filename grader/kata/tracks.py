"""Interview tracks: named sets of katas, read from katas/tracks.yaml (docs/INTERVIEW.md).

A track names katas by their folder name; `katas: "*"` is every installed kata. A name must be an
installed kata or be listed under `coming` (a kata on its way: skipped until it lands), so a typo
is an error, not a kata silently missing from every interview.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml

from grader.kata.format import Kata
from grader.paths import data_root

EVERY = "*"  # `katas: "*"`: the whole catalogue
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")


class TrackError(ValueError):
    """A broken tracks file."""


class UnknownTrackError(LookupError):
    def __init__(self, name: str, known: list[str]):
        close = difflib.get_close_matches(name, known, n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        super().__init__(f"Unknown track '{name}'.{hint} Tracks: {', '.join(known)}.")


@dataclass(frozen=True)
class Track:
    name: str
    description: str
    katas: tuple[str, ...] | None  # None: every installed kata

    def select(self, katas: Iterable[Kata]) -> list[Kata]:
        """The installed katas of this track (those still to come are skipped)."""
        return [k for k in katas if self.katas is None or k.name in self.katas]


def tracks_path() -> Path:
    return data_root() / "katas" / "tracks.yaml"


def parse_tracks(raw, known: Iterable[str], where: str = "tracks.yaml") -> dict[str, Track]:
    """The tracks of a parsed tracks file, checked against `known`, the installed katas' names."""
    if not isinstance(raw, dict) or not isinstance(raw.get("tracks"), dict) or not raw["tracks"]:
        raise TrackError(f"{where}: expected a mapping with a non-empty `tracks` mapping")
    coming = raw.get("coming") or []
    if not isinstance(coming, list) or not all(isinstance(n, str) for n in coming):
        raise TrackError(f"{where}: `coming` must be a list of kata names")
    allowed = set(known) | set(coming)
    tracks = {}
    for name, body in raw["tracks"].items():
        at = f"{where}: track '{name}'"
        if not isinstance(name, str) or not _NAME.match(name):
            raise TrackError(f"{at}: a track name is lowercase letters, digits and dashes")
        if not isinstance(body, dict) or not isinstance(body.get("description"), str):
            raise TrackError(f"{at}: needs a `description` and `katas`")
        katas = body.get("katas")
        if katas == EVERY:
            tracks[name] = Track(name, body["description"], None)
            continue
        if not isinstance(katas, list) or not katas or not all(isinstance(k, str) for k in katas):
            raise TrackError(f"{at}: `katas` must be a non-empty list of kata names, or \"{EVERY}\"")
        if len(set(katas)) != len(katas):
            raise TrackError(f"{at}: names a kata twice")
        for kata in katas:
            if kata not in allowed:
                close = difflib.get_close_matches(kata, sorted(allowed), n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                raise TrackError(f"{at}: '{kata}' is neither an installed kata nor listed under "
                                 f"`coming`{hint}")
        tracks[name] = Track(name, body["description"], tuple(katas))
    return tracks


def load_tracks(known: Iterable[str], path: Path | None = None) -> dict[str, Track]:
    path = path or tracks_path()
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise TrackError(f"cannot read {path}: {exc}") from None
    return parse_tracks(raw, known, str(path))


def get_track(name: str, known: Iterable[str], path: Path | None = None) -> Track:
    tracks = load_tracks(known, path)
    if name not in tracks:
        raise UnknownTrackError(name, list(tracks))
    return tracks[name]
