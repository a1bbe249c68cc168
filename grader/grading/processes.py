"""The grade's processes from the parent's side: the worker's environment, starting it and
killing its whole tree, the checker in a process of its own (and its client here), what the
submission printed, and the files it must not touch.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

from grader.grading import warm_start
from grader.judge import kernel_anatomy
from grader.kata.format import Kata
from grader.paths import package_dir

OUTPUT_LIMIT = 8000  # characters of the submission's stdout/stderr kept in a report
OUTPUT_CAP_BYTES = 8 << 20  # printing more than this ends the grade
MAX_PROCESSES = 64  # the worker, Triton's compiler processes, and nothing like a fork bomb
GPU_MEMORY_FRACTION = 0.9
# Variables that point at the user's results or configuration: the worker never sees them.
PRIVATE_ENV = ("KATA_DB", "KATA_DATA_DIR", "KATA_HANDLE")
# Nor credentials, by the usual names: the submission could print them into its report.
SECRET_ENV = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|API_?KEY|ACCESS_KEY|PRIVATE_KEY|^AWS_|^SSH_AUTH_SOCK$"
                        r"|^GH_|^GITHUB_", re.I)
# Triton's crash reproducer (the compiler_error advice): the FILE asked for is out of the
# sandboxed worker's reach, so the worker writes it in its grade folder and it is copied out.
REPRODUCER_ENV, REPRODUCER_NAME = "TRITON_REPRODUCER_PATH", "triton-reproducer.mlir"


def worker_env(mode: str, tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in PRIVATE_ENV and not SECRET_ENV.search(k)}
    env.pop("TRITON_INTERPRET", None)
    env["TMPDIR"] = str(tmp)  # compilers' scratch files stay inside the grade's folder
    if mode == "interpret":
        env["TRITON_INTERPRET"] = "1"
    package_parent = str(package_dir().parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    # torch.compile off: a compiled function runs eagerly, where the op recorder sees its ops
    # (grader.sandbox.torch_compute.compile_evidence names a submission that switches it back on).
    env["TORCH_COMPILE_DISABLE"] = env["TORCHDYNAMO_DISABLE"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # keep the user's workspace free of __pycache__
    env.setdefault("KINETO_LOG_LEVEL", "5")  # the anatomy's profiler: no log lines in the output
    if env.get(REPRODUCER_ENV):
        env[REPRODUCER_ENV] = str(tmp / REPRODUCER_NAME)  # copied out by copy_reproducer
    return env


def copy_reproducer(worker_tmp: Path, wanted: str | None = None) -> str | None:
    """Triton's crash reproducer, written by the worker in its grade folder, copied to the file
    TRITON_REPRODUCER_PATH names (from this process's folder); where it went, or None. A plain
    file only, never a link."""
    wanted = wanted if wanted is not None else os.environ.get(REPRODUCER_ENV)
    written = worker_tmp / REPRODUCER_NAME
    if not wanted or written.is_symlink() or not written.is_file():
        return None
    target = Path(wanted).expanduser()
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(written.read_bytes())
    except OSError:
        return None
    return str(target)


def grade_folder() -> str | None:
    """Where a grade's files go: the default temp folder. Not /dev/shm, though it is faster: every
    worker may read there (PyTorch keeps the reference counts of CUDA IPC handles in it), so
    another grade's folder would be within a submission's reach (docs/SCORING.md, "The sandbox")."""
    return None


def start_worker(request_path: Path, workdir: Path, env: dict, output, control: socket.socket):
    """The worker: forked by the warm start when it runs (grader.grading.warm_start), else a fresh
    Python."""
    with open(os.devnull, "rb") as devnull:
        forked = warm_start.spawn("worker", request_path, cwd=workdir, env=env, new_session=True,
                                  fds={0: devnull.fileno(), 1: output.fileno(), 2: output.fileno(),
                                       control.fileno(): control.fileno()})
    if forked is not None:
        return forked
    return subprocess.Popen(
        [sys.executable, "-m", warm_start.ROLE_MODULES["worker"], str(request_path)],
        cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
        start_new_session=True, pass_fds=(control.fileno(),), preexec_fn=_dies_with_us())


def _dies_with_us():
    """A preexec_fn that has the kernel kill the worker if this process dies (a batch worker
    killed mid-grade): nobody would be left to watch it. Linux only; None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here, not after the fork
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def arm() -> None:
        prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # we died before it was armed
            os._exit(1)

    return arm


class CheckerError(Exception):
    """The checker itself failed: a fault of the kata or the grader, reported as such."""


def fingerprints(paths) -> dict[str, tuple | None]:
    prints = {}
    for path in paths:
        try:
            st = os.stat(path)
            prints[str(path)] = (st.st_size, st.st_mtime_ns, st.st_ino)
        except OSError:
            prints[str(path)] = None
    return prints


class CheckerProcess:
    """The checker in a process of its own, started now so that its imports (and on a GPU, CUDA's
    start-up) overlap the worker's; asked case by case over its stdin and stdout. Forked by the
    warm start, it has torch imported already: a checker in this process would import it first,
    1-1.6 s that were most of a small CPU grade (docs/PERFORMANCE.md)."""

    def __init__(self, kata: Kata, mode: str, seed: int, plan: list[dict], tmp_path: Path):
        request = {"kata_dir": str(kata.directory), "seed": seed,
                   "device": "cuda" if mode == "gpu" else "cpu", "plan": plan}
        request_path = tmp_path / "check-request.json"
        request_path.write_text(json.dumps(request))
        self.stderr = open(tmp_path / "checker-stderr.txt", "w+")
        env = worker_env(mode, tmp_path / "tmp")
        asks_r, asks_w = os.pipe()
        answers_r, answers_w = os.pipe()
        forked = warm_start.spawn("checker", request_path, cwd=tmp_path, env=env, new_session=False,
                                  fds={0: asks_r, 1: answers_w, 2: self.stderr.fileno()})
        if forked is not None:
            os.close(asks_r)
            os.close(answers_w)
            forked.stdin = open(asks_w, "w")
            forked.stdout = open(answers_r, "r")
            self.proc = forked
            return
        for fd in (asks_r, asks_w, answers_r, answers_w):
            os.close(fd)
        self.proc = subprocess.Popen([sys.executable, "-m", warm_start.ROLE_MODULES["checker"],
                                      str(request_path)], env=env, cwd=tmp_path,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr, text=True)

    def _ask(self, request: dict) -> dict:
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except OSError:
            line = ""
        if not line:
            self.stderr.seek(0)
            told = self.stderr.read()
            # Its last line (the exception) goes first: a case's message keeps only the first
            # line, and a CUDA out-of-memory there is the machine's state, not a grader bug.
            last = next((text.strip() for text in reversed(told.splitlines()) if text.strip()), "")
            raise CheckerError(f"the checker process ended: {last or self._how_it_ended()}\n"
                               f"{told[-4000:]}")
        return json.loads(line)

    def _how_it_ended(self) -> str:
        """A checker that said nothing: its exit status, and what a SIGKILL most often means."""
        try:
            code = self.proc.wait(timeout=5)
        except Exception:  # noqa: BLE001 - still running, or its status is lost: say nothing more
            return "it said nothing"
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            if -code == signal.SIGKILL:
                return (f"killed by {name}, without a word (the system's out-of-memory killer "
                        "does this when the machine runs out of CPU memory)")
            return f"killed by {name}"
        return f"it exited with status {code} without a word"

    def check_case(self, planned, result):
        return self._ask({"op": "case", "key": planned["key"], "result": result})["result"]

    def check_samples(self, planned, samples, method, n_sets, change_keys=None):
        return self._ask({"op": "samples", "key": planned["key"], "samples": samples,
                          "method": method, "sets": n_sets, "change_keys": change_keys})["failure"]

    def measure_ceilings(self) -> dict:
        """The device's ceilings measured again, here in the checker (it never imports the
        submission): the worker waits meanwhile, so the GPU holds only what else runs there."""
        return self._ask({"op": "ceilings"})["ceilings"]

    def close(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
        self.stderr.close()


def kill_group(proc: subprocess.Popen) -> None:
    """Kill the worker and anything it started (threads, forks, compile jobs)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def read_output(path: Path) -> str:
    """The tail of what the submission printed (it may have printed gigabytes)."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - OUTPUT_LIMIT))
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    text = kernel_anatomy.without_profiler_lines(text)
    if size > OUTPUT_LIMIT:
        text = f"... ({size - OUTPUT_LIMIT} bytes trimmed)\n" + text
    return text

