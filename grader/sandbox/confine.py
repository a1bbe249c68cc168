"""The worker's confinement, put in force once before the submission is imported, and what held.

Four protections, each reported as held or not (with how, or why not) in the grade's `sandbox`:
- processes: the audit hook (grader.sandbox.lockdown.refuse_processes); the parent's watchdog
  bounds whatever gets past it;
- writes: Landlock, beneath the grade's folder, the compiler caches and the GPU's device files;
- reads: Landlock, the allow-list of grader.sandbox.readable;
- network: seccomp and Landlock (grader.sandbox.lockdown.restrict_network).

Before the lockdown the worker starts what must read files it will not be allowed to read
later: CUDA's context and Triton's driver on a GPU. It also gets a home folder of its own inside
the grade's folder (HOME, XDG_*), so libraries that keep files under the home folder work (and
the user's own stay out of reach); the compiler caches stay where they were.
"""

from __future__ import annotations

import os
from pathlib import Path

from grader.sandbox import lockdown
from grader.sandbox.readable import device_paths, read_rules

# KATA_SANDBOX_NO_LANDLOCK: a test hook, to behave as on a kernel without Landlock (reads and
# writes open); KATA_SANDBOX_NO_SECCOMP likewise for the socket filter.
NO_LANDLOCK, NO_SECCOMP = "KATA_SANDBOX_NO_LANDLOCK", "KATA_SANDBOX_NO_SECCOMP"
PROTECTIONS = ("reads", "writes", "network", "processes")


def _held(how: str) -> dict:
    return {"held": True, "how": how}


def _open(why: str) -> dict:
    return {"held": False, "why": why}


def landlock_problem() -> str | None:
    """Why Landlock cannot confine a grade here, or None. Its first version (Linux 5.13-5.18)
    refuses every rename across folders, which Triton's cache does for each kernel it keeps."""
    if os.environ.get(NO_LANDLOCK):
        return f"disabled by {NO_LANDLOCK}"
    abi = lockdown.landlock_abi()
    if abi < 1:
        return "Landlock is not available in this kernel (Linux 5.13+ with Landlock enabled)"
    if abi < 2:
        return "this kernel's Landlock (ABI 1) would refuse the renames Triton's cache makes (Linux 5.19+)"
    return None


def support() -> dict[str, str | None]:
    """For each protection, why it cannot be put in force on this machine (None: it can): what
    `kata batch grade` asks before it grades strangers' code."""
    from grader.sandbox import seccomp

    landlock = landlock_problem()
    network = seccomp.available() or (f"disabled by {NO_SECCOMP}" if os.environ.get(NO_SECCOMP) else None)
    return {"reads": landlock, "writes": landlock, "network": network, "processes": None}


def _start_gpu() -> None:
    """CUDA's context and Triton's driver (libcuda found, its helper module built or loaded),
    while the driver's files are all still readable."""
    import torch

    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    try:
        from triton.runtime import driver

        driver.active.get_current_device()
        getattr(driver.active, "utils", None)
    except Exception:  # noqa: BLE001 - a Triton without these: it starts at the first launch
        pass


def _own_home(grade_dir: Path) -> Path:
    """A home folder for the worker inside the grade's folder, made; the compiler caches pinned
    where they are, so the grade still finds kernels compiled before."""
    real = Path.home()
    try:
        from triton import knobs

        os.environ.setdefault("TRITON_CACHE_DIR", str(knobs.cache.dir))
    except Exception:  # noqa: BLE001 - older triton: the cache under the real home
        os.environ.setdefault("TRITON_CACHE_DIR", str(real / ".triton" / "cache"))
    os.environ.setdefault("CUDA_CACHE_PATH", str(real / ".nv" / "ComputeCache"))
    home = grade_dir / "home"
    for sub in ("", ".cache", ".config", ".local/share"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    return home


def _move_home(home: Path) -> None:
    """HOME and the XDG folders to the worker's own."""
    os.environ.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"),
                      XDG_CONFIG_HOME=str(home / ".config"), XDG_DATA_HOME=str(home / ".local" / "share"))


def lock_down(grade_dir: Path, submission: Path, device: str) -> dict:
    """Put every protection in force for this process and its children; returns the grade's
    `sandbox` status: `protections` ({name: {"held", "how" or "why"}}), and the older keys."""
    lockdown.refuse_processes()
    protections = {"processes": _held("fork, exec, spawn and shells refused (audit hook); compiler "
                                      "tools allowed; the process tree bounded by the watchdog")}
    if device == "cuda":
        _start_gpu()
    writable = lockdown.writable_paths(grade_dir)  # computed with the real home
    devices = set(device_paths())
    caches = [p for p in writable if p != grade_dir and p not in devices]
    home = _own_home(grade_dir)
    own = [p for p in sorted(grade_dir.iterdir()) if p.is_dir()]
    rules = read_rules(own, caches, submission)  # with the real home, which it refuses
    _move_home(home)

    write_problem = read_problem = landlock_problem()
    if write_problem is None:
        write_problem = lockdown.restrict_writes(writable)
        read_problem = lockdown.restrict_reads(rules)
    protections["writes"] = _open(write_problem) if write_problem else _held(
        "Landlock: only beneath the grade's folder, the compiler caches and the GPU's device files")
    protections["reads"] = _open(read_problem) if read_problem else _held(
        "Landlock: only Python and its packages (the grader without its references and katas), "
        "the system's programs and libraries, the driver, /proc, /sys, the compiler caches, the "
        "grade's folder and the submission's own files")
    if os.environ.get(NO_SECCOMP):
        network_problem, how = f"disabled by {NO_SECCOMP}", ""
    else:
        network_problem, how = lockdown.restrict_network(use_landlock=landlock_problem() is None)
    protections["network"] = _open(network_problem) if network_problem else _held(
        how + "; the grade's only socket is the pair to the grader made before the lockdown")
    return {
        "protections": protections,
        "processes": protections["processes"]["how"],
        "filesystem": "writes confined to the grade's folder and compiler caches" if write_problem is None
        else f"not restricted ({write_problem})",
        "filesystem_restricted": write_problem is None,
        "reads_restricted": read_problem is None,
        "network_restricted": network_problem is None,
    }
