"""`kata batch grade`: a group's submissions graded side by side (grader/batch/), on the CPU
through the interpreter: on a local Ray instance of 2 CPUs, and on the local process pool that
stands in when Ray is not installed.

The grades are vector_add's reference and its planted wrong solutions (tests/wrong/), which are
quick under the interpreter. Ray's tests are skipped where Ray is not installed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.batch import ledger
from grader.batch.driver import Finished, run_batch
from grader.batch.engine import Job, Outcome
from grader.cli.main import main
from grader.kata.catalog import get_kata
from grader.store.database import attempts, record_grade
from grader.store.exchange import read_results_file
from conftest import TESTS

REPO = TESTS.parent
REFERENCE = REPO / "reference" / "vector_add.py"
WRONG = sorted((TESTS / "wrong").glob("vector_add_*.py"))
SEED = 20260611

HAVE_RAY = importlib.util.find_spec("ray") is not None
needs_ray = pytest.mark.skipif(not HAVE_RAY, reason='Ray is not installed (pip install ".[cluster]")')


def invoke(*args, **kwargs):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False, **kwargs)


def people(root: Path, files: dict[str, Path | str]) -> Path:
    """root/HANDLE/vector_add/solution.py for each handle: a copy of a file, or the source given."""
    for handle, source in files.items():
        workspace = root / handle / "vector_add"
        workspace.mkdir(parents=True)
        target = workspace / "solution.py"
        if isinstance(source, Path):
            shutil.copyfile(source, target)
        else:
            target.write_text(source)
    return root


def twelve(root: Path) -> Path:
    """12 submissions: the reference 3 times, the 5 planted bugs (some twice)."""
    files = {f"ref{i}": REFERENCE for i in range(3)}
    files |= {f"wrong{i}": WRONG[i % len(WRONG)] for i in range(9)}
    return people(root, files)


def batch_json(result) -> dict:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def batch_rows(db: Path, label: str) -> list:
    return [a for a in attempts(db, everyone=True) if a.label == label]


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray instance of 2 CPUs for the module; `kata batch grade` uses it as it finds it."""
    if not HAVE_RAY:
        pytest.skip('Ray is not installed (pip install ".[cluster]")')
    import ray

    from grader.batch.engine import local_runtime_env
    ray.init(address="local", num_cpus=2, num_gpus=0, include_dashboard=False, log_to_driver=False,
             runtime_env=local_runtime_env())
    yield ray
    ray.shutdown()


def _victim(marker: Path) -> str:
    """The reference, except that its first import writes `marker` (its pid) and then hangs, so
    that the test can kill the process grading it; every later import passes. /dev/shm: the
    sandbox lets a grade write there."""
    return (f"import os, time\nif not os.path.exists({str(marker)!r}):\n"
            f"    with open({str(marker)!r}, 'w') as f:\n        f.write(str(os.getpid()))\n"
            f"    time.sleep(120)\n\n" + REFERENCE.read_text())


def _wait_for(marker: Path, timeout: float = 120) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if marker.exists() and marker.read_text().strip():
            return int(marker.read_text())
        time.sleep(0.1)
    raise AssertionError("the submission never started")


def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line), from /proc."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        found[int(entry.name)] = (int(stat.rsplit(")", 1)[1].split()[1]), cmdline)
    return found


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# ---- Ray: the same results as `kata grade`, and a killed worker retried --------------------

@needs_ray
def test_a_ray_batch_of_12_matches_12_single_grades(local_ray, tmp_path):
    source = twelve(tmp_path / "subs")
    db = tmp_path / "results.sqlite"
    out = batch_json(invoke("batch", "grade", source, "--interpret", "--cpus", 2, "--seed", SEED,
                            "--db", db, "--json"))
    assert out["engine"] == "ray" and out["slots"] == 2
    assert out["graded"] == out["submissions"] == 12 and out["not_graded"] == 0
    by_handle = {r["handle"]: r for r in out["results"]}
    assert sorted(by_handle) == sorted(p.name for p in source.iterdir())
    for handle, row in by_handle.items():
        path = source / handle / "vector_add" / "solution.py"
        single = invoke("grade", path, "--interpret", "--json", "--seed", SEED, "--no-record")
        expected = json.loads(single.stdout)
        got = row["grade"]
        for grade in (expected, got):  # how long each took is the machine's, not the grade's
            grade.pop("duration_s")
            grade.pop("phases_s")
        assert got == expected, handle
        assert row["tries"] == 1
    # One row per submission in the store, under the batch's label; the board groups by device.
    rows = batch_rows(db, out["batch"])
    assert sorted(a.handle for a in rows) == sorted(by_handle)
    assert {a.attempt_id for a in rows} == {r["attempt_id"] for r in out["results"]}
    assert sum(a.status == "pass" for a in rows) == 3


@needs_ray
def test_a_ray_worker_killed_mid_batch_is_retried(local_ray, tmp_path):
    marker = Path("/dev/shm") / f"kata-batch-test-{uuid.uuid4().hex}"
    source = people(tmp_path / "subs", {"victim": _victim(marker), "w1": WRONG[0], "w2": WRONG[1]})
    db = tmp_path / "results.sqlite"
    killed = {}

    def killer():
        grade_pid = _wait_for(marker)
        # The Ray worker grading the victim: Ray titles it after the task's name.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and "ray" not in killed:
            for pid, (_, cmdline) in _processes().items():
                if cmdline.startswith("ray::grade victim/vector_add"):
                    killed["ray"] = pid
                    _kill(pid)
            time.sleep(0.1)
        _kill(grade_pid)  # the grade's own process, orphaned with its watchdog gone

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    try:
        result = invoke("batch", "grade", source, "--interpret", "--cpus", 2, "--db", db, "--json")
    finally:
        thread.join(timeout=60)
        marker.unlink(missing_ok=True)
    assert "ray" in killed, "no Ray worker was found grading the victim"
    out = batch_json(result)
    victim = next(r for r in out["results"] if r["handle"] == "victim")
    assert victim["tries"] == 2 and not victim["not_graded"]
    assert victim["grade"]["status"] == "pass"
    assert "retrying (try 2)" in result.stderr and "victim/vector_add" in result.stderr
    rows = batch_rows(db, out["batch"])
    assert sorted(a.handle for a in rows) == ["victim", "w1", "w2"]  # each once


# ---- the local process pool: the fallback, a killed process, --resume after a kill ---------

def test_without_ray_a_batch_runs_on_a_local_process_pool(tmp_path, monkeypatch):
    from grader.batch import engine
    monkeypatch.setattr(engine, "ray_installed", lambda: False)
    source = people(tmp_path / "subs", {"alice": REFERENCE, "bob": WRONG[0], "carol": WRONG[1]})
    db = tmp_path / "results.sqlite"
    result = invoke("batch", "grade", source, "--interpret", "--cpus", 2, "--db", db, "--json",
                    "--report", tmp_path / "board")
    out = batch_json(result)
    assert "Ray is not installed" in result.stderr and "local process pool" in result.stderr
    assert out["engine"] == "local" and out["slots"] == 2
    assert {r["handle"]: r["grade"]["status"] for r in out["results"]} == {
        "alice": "pass", "bob": "fail", "carol": "fail"}
    assert len(batch_rows(db, out["batch"])) == 3
    board = (tmp_path / "board" / "leaderboard.md").read_text()
    assert "alice" in board and "carol" in board
    # With --engine ray, no Ray is a usage error that says how to get it.
    again = invoke("batch", "grade", source, "--interpret", "--engine", "ray", "--db", db)
    assert again.exit_code == 2 and ".[cluster]" in again.stderr


def test_a_local_pool_process_killed_mid_grade_is_retried(tmp_path, monkeypatch):
    # Cold grades (no warm start): the grade's process is a child of the pool's process.
    monkeypatch.setenv("KATA_WARM_START", "0")
    marker = Path("/dev/shm") / f"kata-batch-test-{uuid.uuid4().hex}"
    source = people(tmp_path / "subs", {"victim": _victim(marker), "w1": WRONG[0]})
    killed = {}

    def killer():
        grade_pid = _wait_for(marker)
        parent = _processes().get(grade_pid, (None, ""))[0]
        if parent and parent != os.getpid():
            killed["pool"] = parent
            _kill(parent)
        _kill(grade_pid)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    try:
        result = invoke("batch", "grade", source, "--interpret", "--engine", "local", "--cpus", 2,
                        "--db", tmp_path / "results.sqlite", "--json")
    finally:
        thread.join(timeout=60)
        marker.unlink(missing_ok=True)
    assert "pool" in killed
    out = batch_json(result)
    victim = next(r for r in out["results"] if r["handle"] == "victim")
    assert victim["tries"] == 2 and victim["grade"]["status"] == "pass"
    assert "died: killed by SIGKILL; retrying (try 2)" in result.stderr


def test_resume_after_a_kill_regrades_nothing_recorded(tmp_path):
    # Quick wrong solutions first (handles sort), then references: killed after two results.
    files = {f"a{i}": WRONG[i] for i in range(3)} | {f"z{i}": REFERENCE for i in range(3)}
    source = people(tmp_path / "subs", files)
    db = tmp_path / "results.sqlite"
    label = ledger.family(source, "interpret", None) + "-1"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    command = [sys.executable, "-m", "grader", "batch", "grade", str(source), "--interpret",
               "--engine", "local", "--cpus", "2", "--db", str(db)]
    driver = subprocess.Popen(command, env=env, cwd=tmp_path, start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and driver.poll() is None:
            if db.exists() and len(batch_rows(db, label)) >= 2:
                break
            time.sleep(0.2)
        assert driver.poll() is None, driver.stderr.read().decode()
        os.killpg(driver.pid, signal.SIGKILL)  # the driver and its pool, mid-batch
    finally:
        driver.wait(timeout=30)
        driver.stderr.close()
    before = {a.attempt_id: a for a in batch_rows(db, label)}
    assert 2 <= len(before) < 6

    result = invoke("batch", "grade", source, "--interpret", "--engine", "local", "--cpus", 2,
                    "--db", db, "--resume", "--json")
    out = batch_json(result)
    assert out["batch"] == label and out["skipped"] == len(before)
    regraded = {r["attempt_id"] for r in out["results"]}
    assert not regraded & set(before) and len(regraded) == 6 - len(before)
    rows = batch_rows(db, label)
    assert len(rows) == 6 and len({a.attempt_id for a in rows}) == 6
    assert len({(a.handle, a.kata) for a in rows}) == 6  # nothing counted twice
    for a in rows:  # what was recorded before the kill is untouched
        if a.attempt_id in before:
            assert a == before[a.attempt_id]
    # A second resume has nothing left to do.
    again = batch_json(invoke("batch", "grade", source, "--interpret", "--engine", "local",
                              "--db", db, "--resume", "--json"))
    assert again["graded"] == 0 and again["skipped"] == 6


# ---- the source's bad inputs -----------------------------------------------------------------

def test_a_manifests_bad_rows_are_named_and_nothing_is_graded(tmp_path):
    (tmp_path / "subs").mkdir()
    shutil.copyfile(REFERENCE, tmp_path / "subs" / "alice.py")
    shutil.copyfile(WRONG[0], tmp_path / "subs" / "bob.py")
    manifest = tmp_path / "cohort.csv"
    manifest.write_text("handle,kata,path\n"
                        "alice,vector_add,subs/alice.py\n"
                        "bob,vector_add,subs/bob.py\n"
                        "carol,vector_add,subs/carol.py\n"     # line 4: no such file
                        "dave,vector_ad,subs/bob.py\n"         # line 5: unknown kata
                        "alice,vector_add,subs/bob.py\n")      # line 6: alice again
    db = tmp_path / "results.sqlite"
    result = invoke("batch", "grade", manifest, "--interpret", "--db", db)
    assert result.exit_code == 2
    message = result.stderr
    assert "nothing was graded, 3 problem(s)" in message
    assert "line 4: missing file subs/carol.py" in message
    assert "line 5: unknown kata 'vector_ad' (did you mean 'vector_add'?)" in message
    assert "line 6: duplicate row: alice and vector_add again (first at line 2)" in message
    assert not db.exists()


@pytest.mark.parametrize("text, problem", [
    ("name,kata,file\nalice,vector_add,a.py\n", "the header must name the columns handle, kata, path"),
    ("handle,kata,path\nalice,vector_add\n", "line 2: 2 field(s), the header has 3"),
    ("handle,kata,path\n-alice,vector_add,a.py\n", "line 2: Invalid handle '-alice'"),
    ("handle,kata,path\n", "no submissions"),
])
def test_a_broken_manifest_says_what_is_wrong(tmp_path, text, problem):
    (tmp_path / "a.py").write_text("pass\n")
    manifest = tmp_path / "m.csv"
    manifest.write_text(text)
    result = invoke("batch", "grade", manifest, "--interpret", "--db", tmp_path / "r.sqlite")
    assert result.exit_code == 2 and problem in result.stderr


def test_a_folders_bad_workspaces_are_named(tmp_path):
    source = people(tmp_path / "subs", {"alice": REFERENCE})
    (source / "bob" / "vector_ad").mkdir(parents=True)
    (source / "bob" / "vector_ad" / "solution.py").write_text("pass\n")
    (source / "carol" / "vector_add").mkdir(parents=True)  # no solution.py
    result = invoke("batch", "grade", source, "--interpret", "--db", tmp_path / "r.sqlite")
    assert result.exit_code == 2
    assert "bob/vector_ad: unknown kata 'vector_ad' (did you mean 'vector_add'?)" in result.stderr
    assert "carol/vector_add: missing file solution.py" in result.stderr
    # --kata names a kata that exists.
    result = invoke("batch", "grade", source, "--interpret", "--kata", "softmx")
    assert result.exit_code == 2 and "Did you mean 'softmax'" in result.stderr


# ---- the driver and the ledger, without grading ------------------------------------------------

class _DyingEngine:
    """Every try of `doomed` dies; everything else is graded at once (with a stand-in result)."""
    slots = 2

    def __init__(self, doomed: str):
        self.doomed, self.queue, self.tries, self.closed = doomed, [], [], False

    def submit(self, job):
        self.tries.append(job.handle)
        self.queue.append(job)
        return len(self.tries)

    def wait(self, timeout):
        done = []
        for i, job in enumerate(self.queue):
            if job.handle == self.doomed:
                done.append((self._handle(job, i), Outcome("crash", reason=f"NodeDiedError: node {i} lost")))
            else:
                done.append((self._handle(job, i), Outcome("result", result=_stand_in(job))))
        self.queue = []
        return done

    def _handle(self, job, i):
        return len(self.tries) - len(self.queue) + i + 1

    def close(self):
        self.closed = True


def _stand_in(job):
    return ledger.lost_result(get_kata("vector_add"), job.path, job.sha256, "interpret", "stand-in", 1)


def _job(handle: str) -> Job:
    return Job(key=ledger.attempt_id("batch-test-1", handle, "vector_add", "0" * 64), handle=handle,
               kata="vector_add", path=f"/x/{handle}.py", sha256="0" * 64, files={}, kata_digest="",
               mode="interpret")


def test_a_grade_whose_every_try_dies_is_recorded_once_as_an_error_with_the_reason():
    engine = _DyingEngine("doomed")
    recorded: list[Finished] = []
    kata = get_kata("vector_add")
    finished = run_batch([_job("ok1"), _job("doomed"), _job("ok2")], engine, recorded.append,
                         lambda job, reason, tries: ledger.lost_result(kata, job.path, job.sha256,
                                                                       "interpret", reason, tries))
    assert engine.closed and engine.tries.count("doomed") == 3  # the first try and two retries
    assert [f.job.handle for f in recorded] == [f.job.handle for f in finished]
    assert sorted(f.job.handle for f in recorded) == ["doomed", "ok1", "ok2"]  # each once
    doomed = next(f for f in recorded if f.job.handle == "doomed")
    assert doomed.lost and doomed.tries == 3 and "NodeDiedError" in doomed.reason
    grade = doomed.result
    assert grade.status == "error" and grade.score == 0
    assert "tried 3 times" in grade.message and "NodeDiedError" in grade.message
    assert grade.diagnoses[0]["code"] == "internal_error"


def test_the_store_takes_a_batch_grade_once_and_exports_it(tmp_path):
    db = tmp_path / "r.sqlite"
    job = _job("alice")
    lost = ledger.lost_result(get_kata("vector_add"), job.path, job.sha256, "interpret", "node lost", 3)
    first = record_grade(lost, db, handle="alice", mode_label="batch-test-1", attempt_id=job.key)
    again = record_grade(lost, db, handle="alice", mode_label="batch-test-1", attempt_id=job.key)
    assert first == again
    assert sqlite3.connect(db).execute("SELECT COUNT(*) FROM grades").fetchone()[0] == 1
    assert invoke("export", "--all", "--db", db, "--out", tmp_path / "e.json").exit_code == 0
    (stored,) = read_results_file(tmp_path / "e.json")  # a valid export file
    assert stored.attempt_id == job.key and stored.label == "batch-test-1"


def test_a_new_batch_of_the_same_source_is_a_new_run(tmp_path):
    db = tmp_path / "r.sqlite"
    source = tmp_path / "subs"
    first = ledger.open_batch(db, source, "interpret", None, resume=False)
    assert first.label.endswith("-1") and not first.recorded
    lost = ledger.lost_result(get_kata("vector_add"), "/x.py", "0" * 64, "interpret", "x", 1)
    record_grade(lost, db, handle="alice", mode_label=first.label,
                 attempt_id=ledger.attempt_id(first.label, "alice", "vector_add", "0" * 64))
    resumed = ledger.open_batch(db, source, "interpret", None, resume=True)
    assert resumed.label == first.label and resumed.resumed and len(resumed.recorded) == 1
    fresh = ledger.open_batch(db, source, "interpret", None, resume=False)
    assert fresh.label.endswith("-2") and fresh.earlier == 1
    assert ledger.open_batch(db, source, "gpu", None, resume=True).label != first.label


def test_gpu_grades_need_a_gpu(tmp_path, monkeypatch):
    from grader.grading import cuda_probe
    monkeypatch.setattr(cuda_probe, "device_count", lambda: 0)
    source = people(tmp_path / "subs", {"alice": REFERENCE})
    result = invoke("batch", "grade", source, "--gpu", "--engine", "local", "--db", tmp_path / "r.sqlite")
    assert result.exit_code == 2
    assert "--gpu needs a CUDA GPU" in result.stderr or "no CUDA GPU is visible" in result.stderr


def test_a_node_that_cannot_see_the_file_grades_the_shipped_copy_with_its_helpers(tmp_path):
    from grader.batch.engine import EngineError, kata_digest, run_job, shipped
    workspace = tmp_path / "alice" / "vector_add"
    workspace.mkdir(parents=True)
    (workspace / "solution.py").write_text("from kata_helper import *  # noqa\n")
    shutil.copyfile(REFERENCE, workspace / "kata_helper.py")
    data = (workspace / "solution.py").read_bytes()
    job = shipped(Job("0" * 32, "alice", "vector_add", str(workspace / "solution.py"),
                      hashlib.sha256(data).hexdigest(), {"solution.py": data},
                      kata_digest(get_kata("vector_add").directory), "interpret", seed=SEED))
    assert set(job.files) == {"solution.py", "kata_helper.py"}
    shutil.rmtree(tmp_path / "alice")  # the node does not see the driver's files
    result = run_job(job)
    assert result.status == "pass", result.message
    assert result.submission == job.path and result.submission_sha256 == job.sha256
    with pytest.raises(EngineError, match="differs from the driver's"):
        run_job(Job(**{**job.__dict__, "kata_digest": "f" * 64}))


def test_kata_batch_has_help():
    for args in (["batch", "--help"], ["batch", "grade", "--help"]):
        result = invoke(*args)
        assert result.exit_code == 0 and "Usage:" in result.output
    assert "--resume" in invoke("batch", "grade", "--help").output


def test_gpu_slots_get_their_own_share_of_the_cores(monkeypatch):
    # Two grades on two GPUs of one host must not fight over cores: each slot's processes run on
    # physical cores of its own (hyper-threads kept together), and torch's thread pools are sized
    # to match. One slot runs exactly as `kata grade` does.
    from grader.batch import engine

    monkeypatch.setattr(engine, "_visible_gpus", lambda: ["0", "1"])
    monkeypatch.setattr(engine, "physical_cores", lambda: [[0, 4], [1, 5], [2, 6], [3, 7]])
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    first, second = engine.LocalEngine("gpu").slot_list
    assert first.cpus == [0, 1, 4, 5] and second.cpus == [2, 3, 6, 7]
    assert first.env == {"CUDA_VISIBLE_DEVICES": "0", "OMP_NUM_THREADS": "4"}
    alone, = engine.LocalEngine("gpu", slots=1).slot_list
    assert alone.cpus is None and alone.env == {"CUDA_VISIBLE_DEVICES": "0"}
    interpreted = engine.LocalEngine("interpret", cpus=2)
    assert [s.cpus for s in interpreted.slot_list] == [None, None]  # the OS spreads CPU grades
    assert {s.env["OMP_NUM_THREADS"] for s in interpreted.slot_list} == {"4"}


def test_physical_cores_groups_hyper_threads():
    from grader.batch.engine import _cpu_list, physical_cores

    assert _cpu_list("0-3,8\n") == [0, 1, 2, 3, 8] and _cpu_list("5") == [5]
    cores = physical_cores()
    assert sorted(c for core in cores for c in core) == sorted(os.sched_getaffinity(0))


def test_per_submission_caches_unused_for_weeks_are_removed_and_the_one_in_use_kept(tmp_path, monkeypatch):
    from grader.batch import engine

    root = tmp_path / "kata-batch"
    old, recent, in_use = root / "old", root / "recent", root / "in_use"
    for folder in (old, recent, in_use):
        (folder / "kernel").mkdir(parents=True)
    now = 1_000 * 86400.0
    os.utime(old, (now - 30 * 86400, now - 30 * 86400))
    os.utime(recent, (now - 2 * 86400, now - 2 * 86400))
    os.utime(in_use, (now - 60 * 86400, now - 60 * 86400))
    assert engine.prune_batch_caches(root, keep=in_use, now=now) == [old]
    assert not old.exists() and recent.exists() and in_use.exists()
    monkeypatch.setenv("KATA_BATCH_CACHE_DAYS", "1")
    assert engine.prune_batch_caches(root, keep=in_use, now=now) == [recent]
    assert engine.prune_batch_caches(tmp_path / "missing", now=now) == []


def test_a_batch_grade_touches_its_cache_and_prunes_the_stale_ones(tmp_path, monkeypatch):
    from grader.batch import engine

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton" / "cache"))
    stale = tmp_path / "triton" / "kata-batch" / "stale"
    stale.mkdir(parents=True)
    os.utime(stale, (0, 0))
    with engine.private_compiler_cache("ab" * 32):
        mine = Path(os.environ["TRITON_CACHE_DIR"])
        assert mine.parent == tmp_path / "triton" / "kata-batch" and mine.is_dir()
    assert not stale.exists() and os.environ["TRITON_CACHE_DIR"] == str(tmp_path / "triton" / "cache")
