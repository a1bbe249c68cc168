"""Shared fixtures: grading through the interpreter, exactly as a user without a GPU would."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from grader.grading.runner import grade
from grader.kata.catalog import all_katas, get_kata

TESTS = Path(__file__).parent
# Katas and solutions that exist only for the tests (fixtures/katas, fixtures/reference...).
FIXTURES = TESTS / "fixtures"
WRONG = TESTS / "wrong"
# Planted bugs only a GPU can show (they pass the interpreter): tests/gpu/test_gpu_wrong.py.
WRONG_GPU = TESTS / "wrong_gpu"
KATA_NAMES = sorted(k.name for k in all_katas())


def kata_of_wrong(path: Path) -> str:
    """tests/wrong/<kata>_<bug>.py -> <kata> (the longest kata name that prefixes it)."""
    matches = [k for k in KATA_NAMES if path.stem.startswith(k + "_")]
    assert matches, f"{path.name} does not start with a kata name"
    return max(matches, key=len)


def expected_failures(path: Path) -> list[str]:
    return re.findall(r"^# expect-fail:\s*(\S+)", path.read_text(), flags=re.M)


@pytest.fixture(scope="session", autouse=True)
def private_results_store(tmp_path_factory):
    """Every `kata grade` in the tests records into a throw-away store, never the user's, and
    no personal handle or config file leaks in."""
    with pytest.MonkeyPatch.context() as mp:
        home = tmp_path_factory.mktemp("kata-user")
        mp.setenv("KATA_DATA_DIR", str(home / "data"))
        mp.setenv("KATA_CONFIG", str(home / "config.yaml"))
        mp.delenv("KATA_DB", raising=False)
        mp.delenv("KATA_HANDLE", raising=False)
        yield home


@pytest.fixture(scope="session", autouse=True)
def private_warm_start(tmp_path_factory):
    """Grades fork from warm-start servers of the test session's own (grader.grading.warm_start), which
    leave when the session ends: each sees its socket removed and exits within a second."""
    folder = tmp_path_factory.mktemp("run")
    folder.chmod(0o700)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_RUNTIME_DIR", str(folder))
        yield folder
    for sock in folder.glob("*/*.sock"):
        sock.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def grade_interpret():
    """grade(kata_name, path, **kw) in interpreter mode, memoised per (kata, path) without kw."""
    cache = {}

    def run(kata_name: str, path: Path, **kwargs):
        key = (kata_name, str(path))
        if kwargs:
            return grade(get_kata(kata_name), Path(path), "interpret", **kwargs)
        if key not in cache:
            cache[key] = grade(get_kata(kata_name), Path(path), "interpret")
        return cache[key]

    return run


def write(tmp_path: Path, source: str, name: str = "solution.py") -> Path:
    path = tmp_path / name
    path.write_text(source)
    return path


@pytest.fixture()
def fixture_katas(monkeypatch):
    """The test-only katas (tests/fixtures/katas: toy_gemm, toy_multi...) findable by name
    (TRITON_KATA_PATH), for the test's duration."""
    from grader.kata import catalog

    monkeypatch.setenv("TRITON_KATA_PATH", str(FIXTURES))
    catalog._load.cache_clear()
    yield
    catalog._load.cache_clear()


@pytest.fixture()
def private_kata(tmp_path, monkeypatch):
    """make(name, reference=None): a copy of vector_add named `name` in an extra kata root
    (TRITON_KATA_PATH), for tests that need a broken kata; returns the kata's folder."""
    import shutil

    from grader.kata import catalog

    root = tmp_path / "private"
    monkeypatch.setenv("TRITON_KATA_PATH", str(root))
    catalog._load.cache_clear()
    source = get_kata("vector_add")

    def make(name: str, reference: Path | None = None) -> Path:
        folder = root / "katas" / name
        shutil.copytree(source.directory, folder)
        yaml_path = folder / "kata.yaml"
        yaml_path.write_text(yaml_path.read_text().replace("name: vector_add\n", f"name: {name}\n", 1))
        (root / "reference").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(reference or source.reference_path, root / "reference" / f"{name}.py")
        return folder

    yield make
    catalog._load.cache_clear()
