"""The warm start: grades forked from a server that has imported torch, graded exactly as a fresh
worker grades them, and a server no submission can use to escape its sandbox."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader.grading import processes, warm_start
from grader.grading.runner import grade
from grader.kata.catalog import get_kata
from grader.sandbox import lockdown as sandbox
from processes import left_running, running_named

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "reference" / "vector_add.py"

pytestmark = pytest.mark.skipif(not Path("/proc/self").is_dir() or not hasattr(socket, "send_fds"),
                                reason="the warm start forks on Linux only")


@pytest.fixture
def private_server(tmp_path, monkeypatch):
    """A server of our own (its own folder), started and up before the test grades."""
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(folder))
    monkeypatch.setenv("KATA_WARM_START", "1")
    env = processes.worker_env("interpret", tmp_path)
    path = warm_start.private_dir() / f"{warm_start.server_key(env)}.sock"
    warm_start._start_server(path, env)
    deadline = time.monotonic() + 60
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert path.exists(), "the warm-start server did not come up"
    yield path
    path.unlink(missing_ok=True)  # the server sees its socket gone and exits


def _spawned(monkeypatch) -> list:
    forked = []
    real = warm_start.spawn

    def spy(*args, **kwargs):
        process = real(*args, **kwargs)
        forked.append(process)
        return process
    monkeypatch.setattr(warm_start, "spawn", spy)
    return forked


def _verdict(result) -> list:
    return [(c.task, c.name, c.dtype, c.status) for c in result.cases]


def test_a_forked_worker_grades_as_a_fresh_one(private_server, monkeypatch, tmp_path):
    kata = get_kata("vector_add")
    forked = _spawned(monkeypatch)
    warm = grade(kata, REFERENCE, "interpret", seed=7)
    assert forked and all(p is not None for p in forked), "the grade did not use the warm server"
    assert isinstance(forked[0], warm_start.ForkedProcess)
    monkeypatch.setenv("KATA_WARM_START", "0")
    cold = grade(kata, REFERENCE, "interpret", seed=7)
    assert forked[-1] is None
    assert warm.status == cold.status == "pass"
    assert _verdict(warm) == _verdict(cold)
    assert [c.max_abs_err for c in warm.cases] == [c.max_abs_err for c in cold.cases]


def test_a_forked_checker_answers(private_server, monkeypatch):
    # Every grade checks in a process of its own, which the warm start forks like the worker.
    forked = _spawned(monkeypatch)
    result = grade(get_kata("vector_add"), REFERENCE, "interpret")
    assert result.status == "pass"
    assert len(forked) == 2 and all(isinstance(p, warm_start.ForkedProcess) for p in forked)


def test_a_forked_checker_that_raises_says_what_it_raised(private_server, private_kata, monkeypatch):
    # A forked role ends with os._exit: its exception must still reach its stderr, where the
    # grader reads it (a CUDA out-of-memory in the checker is named gpu_busy from there).
    spec = private_kata("checker_raises") / "spec.py"
    spec.write_text(spec.read_text().replace(
        "    return x.double() + y.double()", "    raise RuntimeError('the truth exploded')", 1))
    from grader.kata import catalog

    forked = _spawned(monkeypatch)
    result = grade(catalog.get_kata("checker_raises"), REFERENCE, "interpret")
    assert len(forked) == 2 and all(isinstance(p, warm_start.ForkedProcess) for p in forked)
    assert result.status == "error"
    assert "RuntimeError: the truth exploded" in result.message
    assert "RuntimeError: the truth exploded" in result.cases[0].message  # its first line


def test_a_crash_in_a_forked_worker_is_reported(private_server, tmp_path):
    source = REFERENCE.read_text() + "\nimport os\nos.abort()\n"
    path = tmp_path / "solution.py"
    path.write_text(source)
    result = grade(get_kata("vector_add"), path, "interpret")
    assert result.status == "error" and result.cheat is None
    assert "SIGABRT" in result.message


def test_a_request_without_proof_is_refused(private_server):
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    conn.settimeout(10)
    with warm_start._SocketAddress(private_server) as address:  # the test's paths are long
        conn.connect(address)
    json.loads(conn.recv(4096))["nonce"]  # and no proof file made for it
    request = {"role": "worker", "request": "/nonexistent", "cwd": "/", "env": {}, "fds": [],
               "new_session": True}
    socket.send_fds(conn, [json.dumps(request).encode()], [])
    assert conn.recv(4096) == b""  # closed without forking anything
    conn.close()


@pytest.mark.skipif(sandbox.landlock_abi() < 1, reason="without Landlock the sandbox cannot keep "
                    "a submission from writing the proof (nor from much else)")
@pytest.mark.parametrize("filter_sockets", [True, False], ids=["sockets-refused", "landlock-alone"])
def test_a_submission_cannot_use_the_server(private_server, tmp_path, monkeypatch, filter_sockets):
    # The attack: from inside the sandbox, ask the server to start a process outside it. With the
    # socket filter no socket can even be made; without it, Landlock refuses the proof.
    if not filter_sockets:
        monkeypatch.setenv("KATA_SANDBOX_NO_SECCOMP", "1")
    escape = tmp_path / "escaped"
    source = REFERENCE.read_text() + f'''
from pathlib import Path
from grader.grading import warm_start
import socket, json, sys
try:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
except OSError as exc:
    print("SOCKET REFUSED:", type(exc).__name__)
    raise ImportError("no socket")
with warm_start._SocketAddress(Path({str(private_server)!r})) as address:
    conn.connect(address)
nonce = json.loads(conn.recv(4096))["nonce"]
try:
    (warm_start.private_dir() / f"proof-{{nonce}}").touch()
    print("PROOF MADE")
except OSError as exc:
    print("PROOF REFUSED:", type(exc).__name__)
request = {{"role": "checker", "request": {str(escape)!r}, "cwd": "/", "env": {{}}, "fds": [],
           "new_session": True}}
socket.send_fds(conn, [json.dumps(request).encode()], [])
print("ANSWER", conn.recv(4096))
'''
    path = tmp_path / "solution.py"
    path.write_text(source)
    result = grade(get_kata("vector_add"), path, "interpret", only_cases=["small"])
    assert "PROOF MADE" not in result.output
    if filter_sockets:
        assert "SOCKET REFUSED: PermissionError" in result.output, result.output
    else:
        assert "PROOF REFUSED" in result.output and "ANSWER b''" in result.output


def test_the_server_leaves_when_idle(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    path = folder / "idle.sock"
    code = (f"import sys; sys.path.insert(0, {str(ROOT)!r}); from pathlib import Path; "
            f"from grader.grading.warm_start import serve; sys.exit(serve(Path({str(path)!r}), idle_s=1))")
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", code], timeout=120, check=True)
    assert time.monotonic() - started < 60
    assert not path.exists()


def test_off_switch(monkeypatch, tmp_path):
    monkeypatch.setenv("KATA_WARM_START", "0")
    assert warm_start.spawn("worker", tmp_path / "r.json", cwd=tmp_path, env=dict(os.environ),
                            fds={}, new_session=True) is None


@pytest.mark.parametrize("warm", ["1", "0"], ids=["forked-worker", "fresh-worker"])
def test_a_grade_killed_midway_leaves_no_worker_behind(tmp_path, monkeypatch, request, warm):
    # A batch worker killed mid-grade (issue 15): its grade's worker must not run on, holding
    # the GPU, with nobody left to watch it. The server kills what it forked when the requesting
    # grade's connection closes; a fresh worker has the kernel kill it when its parent dies.
    if warm == "1":
        request.getfixturevalue("private_server")
    else:
        monkeypatch.setenv("KATA_WARM_START", "0")
    marker = f"kk{os.getpid() % 10**6}{warm}{time.monotonic_ns() % 10**5}"[:15]
    solution = tmp_path / "solution.py"
    solution.write_text(REFERENCE.read_text().replace(
        "def vector_add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:", f'''def vector_add(x, y):
    import ctypes, time
    ctypes.CDLL(None).prctl(15, ctypes.c_char_p(b"{marker}"), 0, 0, 0)  # PR_SET_NAME
    time.sleep(300)''', 1))
    assert marker in solution.read_text()
    grading = subprocess.Popen([sys.executable, "-m", "grader", "grade", str(solution), "--kata",
                                "vector_add", "--interpret", "--no-record", "--json"],
                               cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        while not running_named(marker) and time.monotonic() < deadline and grading.poll() is None:
            time.sleep(0.1)
        workers = running_named(marker)
        assert workers, "the submission never ran"
        parent = int(Path(f"/proc/{workers[0]}/stat").read_text().rsplit(")", 1)[1].split()[1])
        assert (parent != grading.pid) == (warm == "1"), "forked by the server only when warm"
        grading.kill()
        grading.wait()
        assert left_running(marker) == []
    finally:
        grading.kill()
        for pid in running_named(marker):
            os.kill(pid, 9)


def test_a_forked_workers_first_autograd_call_imports_nothing_new():
    # Backward katas' baselines run torch.autograd.grad, whose first call imports sympy and
    # torch.fx's symbolic shapes: a second or more of every such grade unless the server has.
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from grader.grading.warm_start import preload\n"
        "preload()\n"
        "import torch\n"
        "before = set(sys.modules)\n"
        "x = torch.ones(3, requires_grad=True)\n"
        "torch.autograd.grad((x * 2).sum(), x, torch.ones(()))\n"
        "print(sorted(set(sys.modules) - before))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout


def test_kata_worker_profile_writes_the_workers_profile(tmp_path, monkeypatch):
    # A developer's tool (docs/PERFORMANCE.md): where a grade's worker spends its time.
    import json

    from click.testing import CliRunner

    from grader.cli.main import main
    from grader.kata.catalog import get_kata

    profile = tmp_path / "profiles" / "worker.txt"
    profile.parent.mkdir()
    monkeypatch.setenv("KATA_WORKER_PROFILE", str(profile))
    reference = get_kata("vector_add").reference_path
    result = CliRunner().invoke(main, ["grade", str(reference), "--kata", "vector_add", "--interpret",
                                       "--json", "--no-record", "--case", "small"])
    assert json.loads(result.output)["status"] == "pass", result.output
    text = profile.read_text()
    assert "Ordered by: cumulative time" in text and "worker.py" in text and "run_case" in text
