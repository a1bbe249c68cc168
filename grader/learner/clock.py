"""The current time, as an aware datetime, with a test hook.

Everything that depends on the time takes a `now` argument; only the CLI calls `now()` here.
KATA_NOW (an ISO 8601 timestamp, e.g. 2026-01-05T10:30:00+00:00) freezes the clock so that
tests can move an interview past its deadline without sleeping.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone

ENV_VAR = "KATA_NOW"


def parse_time(text: str) -> datetime:
    """An ISO 8601 timestamp as an aware datetime (naive ones are taken as UTC)."""
    text = text.strip()
    if text.endswith("Z"):  # Python 3.10's fromisoformat does not read 'Z'
        text = text[:-1] + "+00:00"
    value = datetime.fromisoformat(text)
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def format_time(value: datetime) -> str:
    return value.isoformat(timespec="seconds")


def now() -> datetime:
    frozen = os.environ.get(ENV_VAR)
    if frozen:
        try:
            return parse_time(frozen)
        except ValueError:
            raise ValueError(f"{ENV_VAR}={frozen!r} is not an ISO 8601 timestamp") from None
    return datetime.now(timezone.utc)


def format_duration(seconds: float | None) -> str:
    """12:05 (minutes:seconds), 1:02:03 past an hour, '-' for None; negative ones get a sign."""
    if seconds is None:
        return "-"
    sign = "-" if seconds < 0 else ""
    total = int(abs(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{sign}{hours}:{minutes:02d}:{secs:02d}"
    return f"{sign}{minutes}:{secs:02d}"
