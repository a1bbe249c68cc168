"""A warm start for the grading processes: a server that has imported torch and triton forks the
worker and the checker of each grade, so that a grade does not pay those imports (seconds).

What it may do, and why it is safe:
- It imports torch, triton and the grader, and nothing else: never a kata's spec, never a
  submission, and it never starts CUDA (a CUDA context does not survive a fork; the fork starts
  its own, as a DataLoader worker does). Each grade gets a fresh fork of that pristine state.
- It forks only the grader's own two roles (worker, checker), each with a request file.
- Its socket lives in a private folder (mode 0700) outside everything the sandbox lets a
  submission write. A request must prove its sender can create a file in that folder, named by a
  nonce the server sent on that connection; a sandboxed worker cannot (Landlock), so a submission
  cannot have processes started for it outside its own sandbox and watchdog.

Life: the first grade that finds no server starts one in the background and grades the usual
way; later grades are forked. The server exits after IDLE_S without a request. Its socket's name
is a digest of the grader's files, the Python and the environment that matters to imports, so a
changed grader or environment gets a fresh server. KATA_WARM_START=0 turns it off.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import secrets
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

from grader.paths import package_dir

ENV_SWITCH = "KATA_WARM_START"
IDLE_S = 600.0
CONNECT_TIMEOUT_S = 5.0
# The grader's two roles the server forks, and the module each runs as without it (`python -m`).
ROLE_MODULES = {"worker": "grader.sandbox.worker", "checker": "grader.judge.checker"}
ROLES = tuple(ROLE_MODULES)
# In a wheel the data folders sit inside the package: their .py files are katas, not the grader.
DATA_FOLDERS = ("katas", "reference", "templates")
MAX_MESSAGE = 1 << 20
FD_PARKING = 100  # received descriptors wait above this while the low numbers are laid out
# Variables read while torch and triton import (or that change what imports): part of the key.
KEY_PREFIXES = ("PATH", "LD_", "PYTHON", "TORCH", "PYTORCH", "TRITON_", "CUDA", "NVIDIA", "OMP_",
                "MKL_", "HOME")
# TRITON_CACHE_DIR is read when a kernel compiles, not at import: a batch gives each submission
# its own (grader.batch.engine), and one server forks them all. So is TRITON_REPRODUCER_PATH,
# which names a file in each grade's own folder (grader.grading.processes.copy_reproducer).
KEY_IGNORED = ("TRITON_KATA_PATH", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "TRITON_CACHE_DIR",
               "TRITON_REPRODUCER_PATH")


def enabled() -> bool:
    """On unless KATA_WARM_START says no; Linux only (sequenced-packet Unix sockets, /proc)."""
    return (sys.platform.startswith("linux") and hasattr(socket, "send_fds")
            and os.environ.get(ENV_SWITCH, "1").strip().lower() not in ("0", "false", "no", "off"))


# ---------------------------------------------------------------------------------------------
# Where the server lives, and which server a grade may use.

def private_dir() -> Path | None:
    """A folder only this user can enter, outside every path the sandbox lets a grade write; None
    when there is no such folder (the warm start is then off)."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    root = Path(base) / "triton-kata" if base and os.path.isdir(base) else \
        Path("/tmp") / f"triton-kata-{os.getuid()}"
    try:
        root.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(root)
    except OSError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        return None  # someone else's, or a link: not ours to trust
    return root


class _SocketAddress:
    """A socket's path short enough for AF_UNIX (108 bytes): a long one is reached through
    /proc/self/fd and a descriptor of its folder, held while in use."""

    def __init__(self, path: Path):
        self.fd = None
        self.address = str(path)
        if len(os.fsencode(self.address)) > 100:
            self.fd = os.open(path.parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            self.address = f"/proc/self/fd/{self.fd}/{path.name}"

    def __enter__(self) -> str:
        return self.address

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            os.close(self.fd)


def server_key(env: dict[str, str]) -> str:
    """A digest of what the server's imported state depends on."""
    package = package_dir()
    digest = hashlib.sha256()
    digest.update(sys.executable.encode() + b"\0" + str(package).encode() + b"\0")
    for path in _code_files(package):
        info = path.stat()
        digest.update(f"{path.relative_to(package)}:{info.st_mtime_ns}:{info.st_size}\0".encode())
    for name in sorted(env):
        if name.startswith(KEY_PREFIXES) and name not in KEY_IGNORED:
            digest.update(f"{name}={env[name]}\0".encode())
    return digest.hexdigest()[:16]


def _code_files(package: Path) -> list[Path]:
    """Every .py file of the grader package, in its subpackages too (not the katas' data)."""
    found = []
    for folder, subfolders, files in os.walk(package):
        subfolders[:] = [d for d in subfolders if d != "__pycache__"
                         and not (folder == str(package) and d in DATA_FOLDERS)]
        found += [Path(folder, name) for name in files if name.endswith(".py")]
    return sorted(found)


# ---------------------------------------------------------------------------------------------
# The client: what the runner calls instead of subprocess.Popen.

class ForkedProcess:
    """A process the server forked for us: enough of subprocess.Popen's interface for the runner
    and the watchdog (pid, returncode, wait, poll, kill). Its exit status comes from the server,
    which is its parent."""

    def __init__(self, conn: socket.socket, pid: int):
        self._conn = conn
        self.pid = pid
        self.returncode: int | None = None
        self.stdin = self.stdout = None  # pipes, set by the caller where it made them

    def poll(self) -> int | None:
        if self.returncode is None:
            self._receive(0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self._receive(timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout)
        return self.returncode

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def _receive(self, timeout: float | None) -> None:
        self._conn.settimeout(timeout)
        try:
            message = self._conn.recv(MAX_MESSAGE)
        except (socket.timeout, BlockingIOError):
            return
        except OSError:
            message = b""
        if message:
            self.returncode = int(json.loads(message)["exit"])
            self._conn.close()
            return
        # The server is gone (killed?): the process is an orphan now; wait for it to end.
        self._conn.close()
        deadline = None if timeout is None else time.monotonic() + timeout
        while _alive(self.pid):
            if deadline is not None and time.monotonic() > deadline:
                return
            time.sleep(0.02)
        self.returncode = -signal.SIGKILL  # its real status went with the server


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def spawn(role: str, request_path: Path, *, cwd: Path, env: dict[str, str], fds: dict[int, int],
          new_session: bool) -> ForkedProcess | None:
    """Have the warm server fork `role` (`python -m ROLE_MODULES[role] REQUEST`) with this working
    folder, environment and file descriptors ({number in the child: descriptor here}). None when the
    warm start is off or no server answers (one is then started in the background for next
    time): the caller starts the process itself."""
    if not enabled() or role not in ROLES:
        return None
    folder = private_dir()
    if folder is None:
        return None
    key = server_key(env)
    path = folder / f"{key}.sock"
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    conn.settimeout(CONNECT_TIMEOUT_S)
    try:
        with _SocketAddress(path) as address:
            conn.connect(address)
        nonce = json.loads(conn.recv(MAX_MESSAGE))["nonce"]
        if not (isinstance(nonce, str) and len(nonce) == 32 and all(c in "0123456789abcdef" for c in nonce)):
            raise ValueError("bad nonce")
        proof = folder / f"proof-{nonce}"
        proof.touch(mode=0o600, exist_ok=False)
        request = {"role": role, "request": str(request_path), "cwd": str(cwd), "env": env,
                   "fds": list(fds), "new_session": new_session}
        socket.send_fds(conn, [json.dumps(request).encode()], list(fds.values()))
        answer = json.loads(conn.recv(MAX_MESSAGE) or b"{}")
    except (OSError, ValueError, KeyError) as exc:
        conn.close()
        if isinstance(exc, (FileNotFoundError, ConnectionRefusedError)):
            _start_server(path, env)  # for the next grade
        return None
    if "pid" not in answer:
        conn.close()
        return None
    return ForkedProcess(conn, int(answer["pid"]))


def _start_server(path: Path, env: dict[str, str]) -> None:
    """Start a server for next time, detached from this process (it outlives the grade)."""
    lock = path.with_suffix(".starting")
    try:  # one start at a time per key; a stale lock (a server that died starting) is retried
        if lock.exists() and time.time() - lock.stat().st_mtime < 120:
            return
        lock.touch()
    except OSError:
        return
    package_parent = str(package_dir().parent)
    server_env = dict(env)
    server_env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
    server_env.pop("TMPDIR", None)
    try:
        subprocess.Popen([sys.executable, "-m", "grader.grading.warm_start", str(path)], cwd="/",
                         env=server_env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
    except OSError:
        pass


# ---------------------------------------------------------------------------------------------
# The server.

# The point of the server: these imports, done once. No CUDA, no kata, no submission.
PRELOAD = (
    "torch",
    # torch.autograd.grad imports this (and sympy) at its first call: a second or more of the
    # first backward case of every grade whose baseline runs autograd (docs/PERFORMANCE.md).
    "torch.fx.experimental.symbolic_shapes",
    "triton",
    "grader.judge.checker",
    "grader.sandbox.worker",
)


def preload() -> None:
    for name in PRELOAD:
        importlib.import_module(name)


def serve(path: Path, idle_s: float = IDLE_S) -> int:
    import selectors

    preload()

    folder = path.parent
    try:
        path.unlink()  # a stale socket of a server that died
    except FileNotFoundError:
        pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with _SocketAddress(path) as address:
        listener.bind(address)
    os.chmod(path, 0o600)
    inode = os.stat(path).st_ino
    listener.listen(16)
    path.with_suffix(".starting").unlink(missing_ok=True)

    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the wake-up fd is written
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "accept")
    selector.register(wake_r, selectors.EVENT_READ, "child")
    children: dict[int, socket.socket] = {}
    last = time.monotonic()
    try:
        while children or time.monotonic() - last < idle_s:
            if not _same_socket(path, inode):  # removed, or a newer server took over
                break
            for item, _ in selector.select(timeout=1.0):
                if item.data == "accept":
                    conn, _ = listener.accept()
                    last = time.monotonic()
                    pid = _handle(conn, folder, listener, (wake_r, wake_w), children)
                    if pid is not None:
                        selector.register(children[pid], selectors.EVENT_READ, pid)
                elif item.data == "child":
                    os.read(wake_r, 4096)
                    _reap(children, selector)
                else:
                    _client_spoke(item.data, children)
            _reap(children, selector)
    finally:
        if _same_socket(path, inode):
            path.unlink(missing_ok=True)
        listener.close()
    return 0


def _same_socket(path: Path, inode: int) -> bool:
    try:
        return os.stat(path).st_ino == inode
    except OSError:
        return False


def _reap(children: dict[int, socket.socket], selector) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is not None:
            try:
                selector.unregister(conn)
            except (KeyError, ValueError):  # its pid never reached the client
                pass
            try:
                conn.send(json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode())
            except OSError:
                pass
            conn.close()


def _client_spoke(pid: int, children: dict[int, socket.socket]) -> None:
    """The connection of the grade that asked for `pid` is readable. A client never sends after
    its request, so this is its end of the connection closing: the grade's process died (a batch
    worker killed mid-grade, say) and nobody is left to watch or stop what it asked for. Stop it
    now, with every process it started, rather than let it run on, holding the GPU, until its
    next exchange with the dead grader fails."""
    conn = children.get(pid)
    if conn is None:
        return
    try:
        still_there = conn.recv(MAX_MESSAGE, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
    except BlockingIOError:
        still_there = True
    except OSError:
        still_there = False
    if still_there:
        conn.recv(MAX_MESSAGE, socket.MSG_DONTWAIT)  # out of protocol: drop it
        return
    from grader.sandbox import watchdog

    watchdog.kill_tree(pid)  # reaped, and its connection closed, by _reap as any child


def _handle(conn: socket.socket, folder: Path, listener, wake, children) -> int | None:
    """Answer one request: fork the role it asks for, and return the child's pid."""
    conn.settimeout(CONNECT_TIMEOUT_S)
    fds: list[int] = []
    try:
        nonce = secrets.token_hex(16)
        conn.send(json.dumps({"nonce": nonce}).encode())
        message, fds, _, _ = socket.recv_fds(conn, MAX_MESSAGE, 16)
        proof = folder / f"proof-{nonce}"
        try:
            info = os.lstat(proof)
            proof.unlink()
        except OSError:
            raise PermissionError("no proof") from None
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
            raise PermissionError("bad proof")
        request = json.loads(message)
        if (request.get("role") not in ROLES or len(request.get("fds", ())) != len(fds)
                or not all(0 <= int(t) < FD_PARKING for t in request["fds"])):
            raise ValueError("bad request")
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                conn.close()
                listener.close()
                for fd in wake:
                    os.close(fd)
                code = _become(request, fds)
            finally:
                os._exit(code)
        children[pid] = conn
        conn.send(json.dumps({"pid": pid}).encode())
        conn = None
        return pid
    except (OSError, ValueError, KeyError, PermissionError):
        return None
    finally:
        for fd in fds:
            os.close(fd)
        if conn is not None:
            conn.close()


def _close_all_but(keep: set[int]) -> None:
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass  # the listing's own descriptor, already closed


def _become(request: dict, fds: list[int]) -> int:
    """In the forked child: take on the request's session, folder, environment and descriptors,
    then run the role as `python -m ROLE_MODULES[role] REQUEST` would."""
    import fcntl
    import io
    import tempfile

    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if request["new_session"]:
        os.setsid()
    # Descriptors: move what we received out of the way, then onto the numbers asked for, and
    # close everything else the server had open (its socket, its selector).
    targets = [int(t) for t in request["fds"]]
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, FD_PARKING) for fd in fds]
    for fd, target in zip(high, targets):
        os.dup2(fd, target, inheritable=True)
    _close_all_but(set(targets))
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile.tempdir = None  # TMPDIR is the grade's own
    sys.path[0] = os.getcwd()  # as for `python -m` started in that folder
    sys.argv = [f"-m {ROLE_MODULES[request['role']]}", request["request"]]
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True, line_buffering=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True, line_buffering=True)
    if request["role"] == "worker":
        from grader.sandbox.worker import run_process
    else:
        from grader.judge.checker import run_process
    try:
        return run_process(request["request"])
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - reported as `python -m` would, on stderr
        # The caller reads what a role said last from its stderr (a checker that ran out of GPU
        # memory is named so, not as a grader bug); _exit() would otherwise leave it silent.
        import traceback

        traceback.print_exc()
        return 1


if __name__ == "__main__":
    sys.exit(serve(Path(sys.argv[1])))
