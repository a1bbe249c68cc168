"""Who a result belongs to: a short handle, chosen by --handle, KATA_HANDLE, the config file
(`handle: NAME` in paths.config_file()), or else the OS user name."""

from __future__ import annotations

import getpass
import os
import re

import yaml

from grader.paths import config_file

# Letters, digits and a few separators: a handle travels in exported files and leaderboards,
# so it must stay printable and short.
HANDLE_PATTERN = re.compile(r"^[\w][\w.@+-]{0,63}$")


class HandleError(ValueError):
    pass


def validate_handle(handle: str) -> str:
    if not isinstance(handle, str) or not HANDLE_PATTERN.fullmatch(handle):
        raise HandleError(
            f"Invalid handle {handle!r}: use 1 to 64 letters, digits, '_', '.', '@', '+' or '-', "
            "starting with a letter, digit or '_'.")
    return handle


def configured_handle() -> str | None:
    """The `handle` in the config file, if there is one (a broken file is an error, not ignored)."""
    path = config_file()
    if not path.is_file():
        return None
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise HandleError(f"Cannot read the config file {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise HandleError(f"The config file {path} must be a mapping such as 'handle: alice'.")
    value = data.get("handle")
    return None if value is None else str(value)


def resolve_handle(explicit: str | None = None) -> str:
    """--handle, else KATA_HANDLE, else the config file, else the OS user."""
    for candidate in (explicit, os.environ.get("KATA_HANDLE"), configured_handle()):
        if candidate:
            return validate_handle(candidate)
    try:
        user = getpass.getuser()
    except Exception:  # no user name in the environment nor the password database
        user = "me"
    # OS user names can hold characters a handle may not (a space, say): keep them readable.
    return validate_handle(re.sub(r"[^\w.@+-]", "_", user).lstrip(".@+-")[:64] or "me")
