"""Where the katas, references and templates live, installed or in a source checkout."""

from __future__ import annotations

import os
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def package_dir() -> Path:
    """The grader package's own folder (in a wheel the data folders sit inside it)."""
    return _PACKAGE


def data_root() -> Path:
    """The folder holding katas/, reference/ and templates/.

    In a wheel they are installed inside the grader package; in a source checkout they sit
    beside it at the top of the repository.
    """
    return _PACKAGE if (_PACKAGE / "katas").is_dir() else _PACKAGE.parent


def kata_roots() -> list[Path]:
    """Every folder that holds a katas/ and a reference/ folder, built-in first.

    TRITON_KATA_PATH (os.pathsep-separated) adds more, e.g. a team's private katas.
    """
    roots = [data_root()]
    for extra in os.environ.get("TRITON_KATA_PATH", "").split(os.pathsep):
        if extra:
            roots.append(Path(extra).expanduser().resolve())
    return roots


def templates_dir() -> Path:
    return data_root() / "templates"


def cache_dir() -> Path:
    """Per-user cache (measured device ceilings); KATA_CACHE_DIR overrides it."""
    if os.environ.get("KATA_CACHE_DIR"):
        return Path(os.environ["KATA_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or (Path.home() / ".cache")
    return Path(base) / "triton-kata"


def data_dir() -> Path:
    """Per-user data (the results store); KATA_DATA_DIR overrides it."""
    if os.environ.get("KATA_DATA_DIR"):
        return Path(os.environ["KATA_DATA_DIR"])
    base = os.environ.get("XDG_DATA_HOME") or (Path.home() / ".local" / "share")
    return Path(base) / "triton-kata"


def config_file() -> Path:
    """Per-user settings (e.g. `handle: alice`); KATA_CONFIG overrides its path."""
    if os.environ.get("KATA_CONFIG"):
        return Path(os.environ["KATA_CONFIG"])
    base = os.environ.get("XDG_CONFIG_HOME") or (Path.home() / ".config")
    return Path(base) / "triton-kata" / "config.yaml"
