"""Limits the worker puts on itself before it imports the submission (they cannot be lifted).

- Filesystem: with Landlock (Linux 5.13+, no privileges needed) the process and its children may
  write only inside the grade's temporary folder, the Triton and CUDA caches and the GPU's (and
  the null, random and shared-memory) device files; the results store, the reports and the
  user's files are out of reach. They may read only what grader.sandbox.readable allows: not
  the home folder, the results store, other submissions, the references or the katas' folders.
- Network: no socket can be opened (seccomp; Landlock's TCP rules where the kernel has them).
- Processes: a Python audit hook refuses fork, exec, system and spawn, and refuses to let
  subprocess start interpreters or shells (the compiler tools Triton runs are fine). The parent's
  watchdog (grader.sandbox.watchdog) bounds whatever gets past it.
- GPU memory: the caching allocator is capped at a fraction of the card, so a submission that
  asks for the whole card fails alone, with an out-of-memory error naming the limit.
"""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

# What subprocess may not start: interpreters and shells, the ways to run arbitrary code (or a
# fork bomb) outside this process's audit hook. Everything else (the compilers, ptxas, ldconfig,
# file and whatever else Triton and PyTorch run while compiling and loading kernels) is allowed;
# the watchdog bounds the rest.
REFUSED_PROGRAMS = frozenset({
    "sh", "bash", "dash", "zsh", "ksh", "csh", "tcsh", "fish", "busybox", "env", "nohup", "setsid",
    "xargs", "timeout", "su", "sudo", "perl", "ruby", "node", "lua", "php", "tclsh", "wish",
})
_REFUSED_EVENTS = {
    "os.fork": "os.fork()", "os.forkpty": "os.forkpty()", "os.system": "os.system()",
    "os.exec": "os.exec*()", "os.spawn": "os.spawn*()",
    "pty.spawn": "pty.spawn()",
}


class SandboxViolation(RuntimeError):
    """Raised inside the submission when it tries something the sandbox forbids."""


violations: list[str] = []  # what was refused, for the report


def _audit(event: str, args) -> None:
    what = _REFUSED_EVENTS.get(event)
    if what is None and event in ("subprocess.Popen", "os.posix_spawn"):
        # Popen: (executable, args, cwd, env); posix_spawn (which Popen itself may use): (path, argv, env)
        executable, argv = args[0], args[1]
        program = executable or (argv[0] if isinstance(argv, (list, tuple)) and argv else argv)
        name = Path(os.fsdecode(program)).name if program else ""
        if not _refused_program(name):
            return
        what = f"starting a process ({name or program!r})"
    if what is None:
        return
    violations.append(what)
    raise SandboxViolation(f"the grading sandbox does not allow {what}")


def _refused_program(name: str) -> bool:
    return not name or name in REFUSED_PROGRAMS or name.startswith(("python", "pypy"))


def refuse_processes() -> None:
    sys.addaudithook(_audit)  # an audit hook cannot be removed once added


gpu_memory_fraction = 1.0


def limit_gpu_memory(fraction: float) -> None:
    import torch

    global gpu_memory_fraction
    torch.cuda.set_per_process_memory_fraction(fraction, 0)
    gpu_memory_fraction = fraction


# Landlock (include/uapi/linux/landlock.h): access rights, by ABI version.
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_PR_SET_NO_NEW_PRIVS = 38
_RULE_PATH_BENEATH = 1
_WRITE_FILE, _READ_FILE, _READ_DIR = 1 << 1, 1 << 2, 1 << 3
_REMOVE_DIR, _REMOVE_FILE = 1 << 4, 1 << 5
_MAKE_CHAR, _MAKE_DIR, _MAKE_REG, _MAKE_SOCK, _MAKE_FIFO, _MAKE_BLOCK, _MAKE_SYM = (
    1 << 6, 1 << 7, 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12)
_REFER, _TRUNCATE = 1 << 13, 1 << 14  # ABI 2 and 3
_BIND_TCP, _CONNECT_TCP = 1 << 0, 1 << 1  # network rights, ABI 4
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1  # scopes, ABI 6
NETWORK_ABI, SCOPE_ABI = 4, 6


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # the kernel's struct is packed
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, or 0 where Landlock is unavailable."""
    if sys.platform != "linux":
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    version = libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(0, version)


def _landlock(fs: int, rules: list[tuple[Path, int]], net: int = 0, scoped: int = 0) -> str | None:
    """One Landlock layer: `fs` and `net` rights handled (refused but where `rules` allow them),
    `scoped` scopes; returns why it could not be put in force, or None. Layers add up: each
    restricts what the earlier ones left."""
    libc = ctypes.CDLL(None, use_errno=True)
    attr = _RulesetAttr(fs, net, scoped)
    # The struct's size tells the kernel which fields it knows: the oldest that carries ours.
    size = 24 if scoped else 16 if net else 8
    ruleset = libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        return f"landlock_create_ruleset failed: {os.strerror(ctypes.get_errno())}"
    try:
        for path, access in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a path that does not exist cannot be reached either
            try:
                rule = _PathBeneathAttr(access & fs, fd)
                if libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule),
                                ctypes.c_uint32(0)) < 0:
                    return f"landlock_add_rule({path}) failed: {os.strerror(ctypes.get_errno())}"
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return f"prctl(NO_NEW_PRIVS) failed: {os.strerror(ctypes.get_errno())}"
        if libc.syscall(_SYS_RESTRICT_SELF, ruleset, ctypes.c_uint32(0)) < 0:
            return f"landlock_restrict_self failed: {os.strerror(ctypes.get_errno())}"
    finally:
        os.close(ruleset)
    return None


def restrict_writes(writable: list[Path]) -> str | None:
    """Allow writes only beneath `writable`; returns why it could not, or None when in force."""
    abi = landlock_abi()
    if abi < 1:
        return "Landlock is not available in this kernel"
    access = (_WRITE_FILE | _REMOVE_DIR | _REMOVE_FILE | _MAKE_CHAR | _MAKE_DIR | _MAKE_REG
              | _MAKE_SOCK | _MAKE_FIFO | _MAKE_BLOCK | _MAKE_SYM)
    if abi >= 2:
        access |= _REFER
    if abi >= 3:
        access |= _TRUNCATE
    file_rights = _WRITE_FILE | _TRUNCATE  # all a rule on a file (not a folder) may carry
    # Device nodes are made nowhere: run as root, a worker could make one for a disk and read it.
    allowed = access & ~(_MAKE_CHAR | _MAKE_BLOCK)
    return _landlock(access, [(p, allowed if os.path.isdir(p) else access & file_rights) for p in writable])


def restrict_reads(rules) -> str | None:
    """Allow reads only where `rules` (grader.sandbox.readable.ReadRules) say; returns why it could
    not, or None when in force."""
    abi = landlock_abi()
    if abi < 1:
        return "Landlock is not available in this kernel"
    both = _READ_FILE | _READ_DIR
    # From ABI 2 every layer refuses renames and links across folders unless it handles REFER and
    # grants it: granted wherever reads are (the write layer decides where renames may happen).
    refer = _REFER if abi >= 2 else 0
    return _landlock(both | refer, [(p, both | refer) for p in rules.trees]
                     + [(p, _READ_FILE) for p in rules.files] + [(p, _READ_DIR | refer) for p in rules.listable])


def restrict_network(use_landlock: bool = True) -> tuple[str | None, str]:
    """No sockets: seccomp refuses socket() of every family (and io_uring, which could open one
    round it) for every thread; Landlock, where the kernel has its network rules, refuses TCP
    bind and connect, and scopes abstract Unix sockets and signals to the worker's own processes.
    The worker's line to the parent is a socket pair made before the lockdown. Returns (why the
    network is not confined, or None; how it is)."""
    from grader.sandbox import seccomp

    problem = seccomp.refuse_sockets()
    how = [] if problem else ["seccomp refuses socket() (every family) and io_uring"]
    abi = landlock_abi() if use_landlock else 0
    if abi >= NETWORK_ABI:
        scoped = (_SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL) if abi >= SCOPE_ABI else 0
        # REFER handled and granted everywhere: a layer that does not grant it refuses renames
        # across folders (Triton's cache moves its files into place), whatever else it handles.
        refer = _REFER if abi >= 2 else 0
        landlock_problem = _landlock(refer, [(Path("/"), refer)] if refer else [],
                                     net=_BIND_TCP | _CONNECT_TCP, scoped=scoped)
        if landlock_problem is None:
            how.append("Landlock refuses TCP bind/connect" + (
                ", abstract Unix sockets and signals outside the worker" if scoped else ""))
            if problem:  # TCP closed, but not UDP or raw sockets
                problem += " (only TCP is refused, by Landlock)"
    return problem, "; ".join(how)


def writable_paths(grade_dir: Path) -> list[Path]:
    """Where a grade legitimately writes: its own folder (its home folder is there:
    grader.sandbox.confine), the compiler caches, devices. The caches are Triton's and CUDA's
    own folders, not all of ~/.triton: a batch gives each submission a Triton cache of its own
    (grader.batch.engine), and the others' must stay out of reach."""
    from grader.sandbox.readable import device_paths

    home = Path.home()
    paths = [grade_dir, *device_paths(), home / ".nv" / "ComputeCache"]
    for var in ("TRITON_CACHE_DIR", "TRITON_DUMP_DIR", "TRITON_OVERRIDE_DIR", "CUDA_CACHE_PATH"):
        if os.environ.get(var):
            paths.append(Path(os.environ[var]))
    if os.environ.get("KATA_WORKER_PROFILE"):  # a developer profiling the worker asked for it
        paths.append(Path(os.environ["KATA_WORKER_PROFILE"]).resolve().parent)
    try:
        from triton import knobs

        paths.append(Path(knobs.cache.dir))
    except Exception:  # noqa: BLE001 - older triton: its default cache
        paths.append(Path(os.environ.get("TRITON_HOME") or home) / ".triton" / "cache")
    for path in paths:  # create the caches now: a folder made later could not be allowed
        if path.parent != Path("/dev") and path != grade_dir:
            try:
                path.mkdir(parents=True, exist_ok=True)
            except OSError:
                pass
    return paths
