"""Where a batch's grades run: Ray (an embedded local instance, or a cluster), or, without Ray,
a local pool of grading processes. Both run `run_job`, which grades one submission with
grader.grading.runner.grade exactly as `kata grade` does, and both give one grade a GPU to itself.

The driver (grader.batch.driver) keeps the grades in flight at most `slots`, submits a job
when a slot frees, and is told of each job's end as an Outcome: the GradeResult, a crash (the
process or node running it died: the driver retries it) or an error (the grading code raised:
not retried). Ray's own retries are off (max_retries=0) so that each death reaches the driver,
which retries the grade and says so; the local pool behaves the same way.

Only the grading processes import torch (the runner's in-process checker, for CPU grades); the
driver, which is the command-line process, never does.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import multiprocessing
import os
import shutil
import signal
import tempfile
import time
import traceback
from dataclasses import dataclass, replace
from multiprocessing.connection import wait as wait_for
from pathlib import Path
from typing import Any

SIBLINGS_MAX_FILES = 32  # .py files beside a submission (helpers it may import) shipped with it
SIBLINGS_MAX_BYTES = 1 << 20
STOP_GRACE_S = 10.0  # a grading process told to stop gets this long to kill its grade's processes
PACKAGE_PARENT = str(Path(__file__).resolve().parent.parent.parent)


class EngineError(Exception):
    """The engine cannot start or cannot grade in this mode; the message says why."""


@dataclass(frozen=True)
class Job:
    """One grade, as shipped to the process that runs it (pickled: small, and torch-free)."""
    key: str  # the attempt id it is recorded under (grader.batch.ledger)
    handle: str
    kata: str
    path: str  # the submission on the driver's machine (absolute)
    sha256: str
    files: dict[str, bytes]  # the submission's file by name (shipped() adds the .py files beside it)
    kata_digest: str  # of the kata's folder on the driver: a node with other katas refuses
    mode: str  # gpu | interpret
    seed: int | None = None
    timeout_s: float | None = None
    memory_gib: float | None = None

    @property
    def name(self) -> str:
        return f"{self.handle}/{self.kata}"


@dataclass
class Outcome:
    kind: str  # "result" | "crash" (retry) | "error" (not retried)
    result: Any = None  # a GradeResult when kind == "result"
    reason: str = ""
    where: str = ""  # the node or process that ran it, when known


def kata_digest(directory: Path) -> str:
    """sha256 of a kata's folder (every file but caches): the same digest, the same hidden tests."""
    digest = hashlib.sha256()
    for path in sorted(Path(directory).rglob("*")):
        rel = path.relative_to(directory)
        if path.is_file() and "__pycache__" not in rel.parts and not rel.name.startswith("."):
            digest.update(str(rel).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def shipped(job: Job) -> Job:
    """The job as it is sent: its file as read when the batch started, and the .py files beside
    it now (a few, small: helpers it may import), read only when it is submitted."""
    path = Path(job.path)
    files, total = {}, 0
    try:
        siblings = sorted(p for p in path.parent.glob("*.py") if p.name not in job.files)
    except OSError:
        siblings = []
    for sibling in siblings[:SIBLINGS_MAX_FILES]:
        try:
            data = sibling.read_bytes()
        except OSError:
            continue
        if total + len(data) > SIBLINGS_MAX_BYTES:
            break
        files[sibling.name] = data
        total += len(data)
    return replace(job, files={**files, **job.files})


def run_job(job: Job):
    """Grade one submission (in a Ray worker or a pool process): in place when this machine sees
    the driver's file unchanged, else from the shipped copy in a private temporary folder. The
    result is what `kata grade --json` would print for the file."""
    from grader.kata.catalog import get_kata
    from grader.grading.runner import grade

    kata = get_kata(job.kata)
    here = kata_digest(kata.directory)
    if here != job.kata_digest:
        raise EngineError(f"this node's kata '{job.kata}' differs from the driver's (digest {here[:12]} "
                          f"vs {job.kata_digest[:12]}): install the same triton-kata on every node")
    path = Path(job.path)
    options = dict(seed=job.seed, timeout_s=job.timeout_s, memory_gib=job.memory_gib)
    try:
        in_place = hashlib.sha256(path.read_bytes()).hexdigest() == job.sha256
    except OSError:
        in_place = False
    with private_compiler_cache(job.sha256):
        if in_place:
            return grade(kata, path, job.mode, **options)
        with tempfile.TemporaryDirectory(prefix="kata-batch-") as tmp:
            for name, data in job.files.items():
                (Path(tmp) / name).write_bytes(data)
            result = grade(kata, Path(tmp) / path.name, job.mode, **options)
    result.submission = job.path  # the same JSON as a grade of the driver's file
    return result


def batch_cache_dir(sha256: str) -> Path:
    """The Triton cache of one submission of a batch: beside Triton's own, named by its digest
    (the same file graded again finds its kernels)."""
    shared = os.environ.get("TRITON_CACHE_DIR") or os.path.join(
        os.environ.get("TRITON_HOME") or os.path.expanduser("~"), ".triton", "cache")
    return Path(shared).parent / "kata-batch" / sha256[:32]


# A submission's cache not used for this long is removed when a batch next grades on the machine
# (KATA_BATCH_CACHE_DAYS): the folder would otherwise grow by one cache per submission, forever.
CACHE_DAYS = 14.0


def prune_batch_caches(root: Path, keep: Path | None = None, now: float | None = None) -> list[Path]:
    """Remove the per-submission caches under root (kata-batch/) last used over
    KATA_BATCH_CACHE_DAYS days ago; never `keep`. Returns what was removed. A cache in use was
    touched when its grade began, so it is never the one removed."""
    try:
        days = float(os.environ.get("KATA_BATCH_CACHE_DAYS", CACHE_DAYS))
    except ValueError:
        days = CACHE_DAYS
    cutoff = (time.time() if now is None else now) - days * 86400
    removed = []
    try:
        entries = list(root.iterdir())
    except OSError:
        return removed
    for entry in entries:
        try:
            stale = entry.is_dir() and entry != keep and entry.stat().st_mtime < cutoff
        except OSError:
            continue
        if stale:
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


@contextlib.contextmanager
def private_compiler_cache(sha256: str):
    """Triton's cache for this grade only: a shared one would hand each candidate what the ones
    graded before compiled (their kernels' IR and cubins; Triton 3.9+ keeps their source), and
    the sandbox lets a grade read its compiler cache (docs/SCORING.md, "The sandbox"). It is
    touched as it is used; the others left unused for KATA_BATCH_CACHE_DAYS are removed."""
    before = os.environ.get("TRITON_CACHE_DIR")
    cache = batch_cache_dir(sha256)
    try:
        cache.mkdir(parents=True, exist_ok=True)
        os.utime(cache)
    except OSError:
        pass  # Triton makes it, or says why it cannot
    prune_batch_caches(cache.parent, keep=cache)
    os.environ["TRITON_CACHE_DIR"] = str(cache)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TRITON_CACHE_DIR", None)
        else:
            os.environ["TRITON_CACHE_DIR"] = before


def _error_text(exc: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()


# ---------------------------------------------------------------------------------------------
# Ray

def ray_installed() -> bool:
    import importlib.util
    return importlib.util.find_spec("ray") is not None


def _ray_job(job: Job):
    return run_job(job)


class RayEngine:
    """Grades as Ray tasks: num_gpus=1 each on a GPU (Ray sets CUDA_VISIBLE_DEVICES, and places
    them on GPU nodes only), num_cpus=1 each under the interpreter. Without an address Ray starts
    its own local instance on this machine (the embedded default) and stops it at the end."""

    name = "ray"

    def __init__(self, mode: str, slots: int | None = None, address: str | None = None,
                 cpus: int | None = None):
        import ray

        self.ray = ray
        self.mode = mode
        self.started = False
        self.local = not address
        if not ray.is_initialized():
            quiet = dict(logging_level=logging.WARNING, log_to_driver=False, configure_logging=True)
            try:
                if address:
                    ray.init(address=address, **quiet)
                else:
                    gpus = 0
                    if mode == "gpu":  # Ray is told of the GPUs there are, never more
                        gpus = _visible_gpu_count()
                        if not gpus:
                            raise EngineError("no CUDA GPU is visible: grade with --interpret")
                        if slots and slots > gpus:
                            raise EngineError(f"--gpus {slots}: only {gpus} GPU(s) visible here")
                        gpus = slots or gpus
                    cores = cpus or ((os.cpu_count() or 1) if mode == "gpu" else default_cpu_slots())
                    ray.init(address="local", num_cpus=max(cores, slots or 1),
                             num_gpus=gpus, include_dashboard=False,
                             runtime_env=local_runtime_env(), **quiet)
            except EngineError:
                raise
            except Exception as exc:  # ConnectionError, RuntimeError, ...: say which and why
                raise EngineError(f"Ray could not {'connect to ' + address if address else 'start'}: "
                                  f"{_error_text(exc)}") from exc
            self.started = True
        resources = ray.cluster_resources()
        gpus, cpus_there = int(resources.get("GPU", 0)), int(resources.get("CPU", 0))
        if mode == "gpu" and gpus == 0:
            self.close()
            raise EngineError("the Ray cluster has no GPU: grade with --interpret, or start GPU nodes")
        capacity = gpus if mode == "gpu" else cpus_there
        self.slots = slots or max(1, capacity)
        nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
        where = "a local Ray instance" if self.local else f"the Ray cluster at {address}"
        what = f"{gpus} GPU(s)" if mode == "gpu" else f"{cpus_there} CPU(s)"
        self.description = (f"{where} ({nodes} node(s), {what}; {self.slots} grade(s) at a time, "
                            + ("one per GPU)" if mode == "gpu" else "one per CPU)"))
        self.remote = ray.remote(_ray_job)
        self.in_flight: dict[Any, Job] = {}

    def submit(self, job: Job) -> Any:
        resources = dict(num_gpus=1, num_cpus=1) if job.mode == "gpu" else dict(num_gpus=0, num_cpus=1)
        ref = self.remote.options(name=f"grade {job.name}", max_retries=0, **resources).remote(shipped(job))
        self.in_flight[ref] = job
        return ref

    def wait(self, timeout: float) -> list[tuple[Any, Outcome]]:
        if not self.in_flight:
            time.sleep(min(timeout, 0.1))
            return []
        refs = list(self.in_flight)
        ready, rest = self.ray.wait(refs, num_returns=1, timeout=timeout)
        if ready and rest:  # and whatever else has finished meanwhile
            ready += self.ray.wait(rest, num_returns=len(rest), timeout=0)[0]
        done = []
        for ref in ready:
            self.in_flight.pop(ref)
            done.append((ref, self._outcome(ref)))
        return done

    def _outcome(self, ref) -> Outcome:
        exceptions = self.ray.exceptions
        try:
            return Outcome("result", self.ray.get(ref))
        except exceptions.RayTaskError as exc:  # the grading code raised: the same again elsewhere
            cause = exc.cause if getattr(exc, "cause", None) is not None else exc
            return Outcome("error", reason=f"the grader failed: {_error_text(cause)}")
        except exceptions.TaskCancelledError:
            return Outcome("crash", reason="the grade was cancelled")
        except exceptions.RayError as exc:  # the worker or its node died, an object was lost, ...
            first = (str(exc).strip().splitlines() or [""])[0]
            return Outcome("crash", reason=f"{type(exc).__name__}: {first}"[:300])

    def close(self) -> None:
        for ref in list(self.in_flight):
            try:
                self.ray.cancel(ref, force=True)
            except Exception:  # already finished, or the cluster is gone
                pass
        self.in_flight.clear()
        if self.started:
            self.ray.shutdown()
            self.started = False


def local_runtime_env() -> dict:
    """The runtime environment of a local Ray instance's workers: this grader first on their path
    (a checkout that is not pip-installed is graded with itself, not another copy)."""
    path = os.pathsep.join(p for p in (PACKAGE_PARENT, os.environ.get("PYTHONPATH")) if p)
    return {"env_vars": {"PYTHONPATH": path}}


# ---------------------------------------------------------------------------------------------
# The local pool: one long-lived process per slot (per GPU, or per CPU under the interpreter),
# each grading one job at a time; a slot whose process dies is restarted for its next job, and
# the job it was running is known exactly.

def _visible_gpus() -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES names them (or their indexes)."""
    from grader.grading.cuda_probe import device_count

    listed = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    count = device_count()
    return listed[:count] if listed else [str(i) for i in range(count)]


def _visible_gpu_count() -> int:
    return len(_visible_gpus())


def physical_cores() -> list[list[int]]:
    """The CPUs this process may run on, grouped by physical core (hyper-threads together), in
    order of their first CPU."""
    if not hasattr(os, "sched_getaffinity"):
        return [[i] for i in range(os.cpu_count() or 1)]
    allowed = os.sched_getaffinity(0)
    groups: dict[tuple[int, ...], list[int]] = {}
    for cpu in sorted(allowed):
        try:
            text = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list").read_text()
            siblings = tuple(_cpu_list(text))
        except (OSError, ValueError):
            siblings = (cpu,)
        groups.setdefault(siblings, []).append(cpu)
    return sorted(groups.values())


def _cpu_list(text: str) -> list[int]:
    """'0-3,8' -> [0, 1, 2, 3, 8], as Linux lists CPUs."""
    cpus = []
    for part in text.strip().split(","):
        low, _, high = part.partition("-")
        cpus.extend(range(int(low), int(high or low) + 1))
    return cpus


def _slot_main(conn, env: dict[str, str], cpus: list[int] | None = None) -> None:
    os.environ.update(env)
    if cpus:
        os.sched_setaffinity(0, cpus)  # inherited by the grade's processes
    signal.signal(signal.SIGINT, signal.default_int_handler)  # stop: the runner's cleanup runs
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            return
        if job is None:
            return
        try:
            reply = ("result", run_job(job))
        except KeyboardInterrupt:
            return
        except Exception as exc:
            reply = ("error", f"the grader failed: {_error_text(exc)}")
        try:
            conn.send(reply)
        except (OSError, ValueError):  # the driver is gone
            return


@dataclass
class _Slot:
    env: dict[str, str]
    label: str  # "GPU 1" or "CPU slot 2"
    cpus: list[int] | None = None  # the cores its grades run on (GPU slots); None: any
    process: Any = None
    conn: Any = None
    job: Job | None = None
    token: int = 0


class LocalEngine:
    """A local process pool (multiprocessing, spawn): Ray is not installed, or --engine local."""

    name = "local"

    def __init__(self, mode: str, slots: int | None = None, cpus: int | None = None):
        self.mode = mode
        self.context = multiprocessing.get_context("spawn")
        if mode == "gpu":
            gpus = _visible_gpus()
            if not gpus:
                raise EngineError("no CUDA GPU is visible: grade with --interpret")
            if slots and slots > len(gpus):
                raise EngineError(f"--gpus {slots}: only {len(gpus)} GPU(s) visible here")
            gpus = gpus[:slots or len(gpus)]
            self.slot_list = [_Slot({"CUDA_VISIBLE_DEVICES": g}, f"GPU {g}") for g in gpus]
        else:
            count = slots or cpus or default_cpu_slots()
            self.slot_list = [_Slot({}, f"CPU slot {i}") for i in range(count)]
        self.slots = len(self.slot_list)
        # As Ray does for its tasks: with several slots, each slot's grades get their share of
        # the cores (torch's threads, the compiler's, the checker's) instead of every slot taking
        # them all. On a GPU host each slot is also pinned to physical cores of its own, so two
        # grades never share a core's time or caches: the grades of a two-GPU batch took 10%
        # longer than on one GPU without it. One slot is left exactly as `kata grade` runs.
        if self.slots > 1:
            cores = physical_cores()
            share = max(1, sum(len(c) for c in cores) // self.slots)
            per_slot = len(cores) // self.slots
            for index, slot in enumerate(self.slot_list):
                if "OMP_NUM_THREADS" not in os.environ:
                    slot.env["OMP_NUM_THREADS"] = str(share)
                if mode == "gpu" and per_slot >= 2:
                    mine = cores[index * per_slot:(index + 1) * per_slot]
                    slot.cpus = sorted(cpu for core in mine for cpu in core)
        self.description = (f"a local process pool on this machine ({self.slots} grading process(es), "
                            + ("one per GPU: " + ", ".join(s.label for s in self.slot_list) + ")"
                               if mode == "gpu" else "one interpreter grade each)"))
        self._tokens = 0

    def _start(self, slot: _Slot) -> None:
        ours, theirs = self.context.Pipe()
        slot.process = self.context.Process(target=_slot_main, args=(theirs, slot.env, slot.cpus), daemon=True,
                                            name=f"kata-batch {slot.label}")
        slot.process.start()
        theirs.close()
        slot.conn = ours

    def submit(self, job: Job) -> int:
        slot = next(s for s in self.slot_list if s.job is None)
        if slot.process is None or not slot.process.is_alive():
            self._start(slot)
        self._tokens += 1
        slot.job, slot.token = job, self._tokens
        try:
            slot.conn.send(shipped(job))
        except (OSError, ValueError):
            pass  # the process died already: wait() reports it
        return slot.token

    def wait(self, timeout: float) -> list[tuple[int, Outcome]]:
        busy = [s for s in self.slot_list if s.job is not None]
        if not busy:
            time.sleep(min(timeout, 0.1))
            return []
        ready = set(wait_for([s.conn for s in busy] + [s.process.sentinel for s in busy], timeout))
        done = []
        for slot in busy:
            if slot.conn not in ready and slot.process.sentinel not in ready:
                continue
            outcome = None
            if slot.conn.poll():
                try:
                    kind, value = slot.conn.recv()
                    outcome = Outcome("result", value) if kind == "result" else Outcome("error", reason=value)
                except (EOFError, OSError):
                    outcome = None
            if outcome is None:
                outcome = Outcome("crash", reason=self._death(slot))
            outcome.where = f"{slot.label}"
            done.append((slot.token, outcome))
            slot.job = None
        return done

    def _death(self, slot: _Slot) -> str:
        slot.process.join(timeout=5)
        code = slot.process.exitcode
        slot.process, slot.conn = None, None
        if code is not None and code < 0:
            try:
                how = f"killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"killed by signal {-code}"
        else:
            how = f"exited with code {code}"
        return f"the grading process ({slot.label}) died: {how}"

    @property
    def in_flight(self) -> list[Job]:
        return [s.job for s in self.slot_list if s.job is not None]

    def close(self) -> None:
        """Idle processes are told to leave; busy ones are interrupted (their grade's processes
        killed by the runner), then killed after STOP_GRACE_S."""
        for slot in self.slot_list:
            if slot.process is None:
                continue
            if slot.job is None:
                try:
                    slot.conn.send(None)
                except (OSError, ValueError):
                    pass
            else:
                try:
                    os.kill(slot.process.pid, signal.SIGINT)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + STOP_GRACE_S
        for slot in self.slot_list:
            if slot.process is None:
                continue
            slot.process.join(timeout=max(0.0, deadline - time.monotonic()))
            if slot.process.is_alive():
                slot.process.kill()
                slot.process.join(timeout=5)
            slot.process, slot.conn, slot.job = None, None, None


def default_cpu_slots() -> int:
    """Interpreter grades at once on this machine: each is a worker and its compilers, beside the
    in-process checker, so one per two cores (at least one)."""
    return max(1, (os.cpu_count() or 2) // 2)


def open_engine(kind: str, mode: str, slots: int | None, address: str | None, cpus: int | None):
    """kind: auto (Ray when installed, else the local pool), ray or local."""
    if kind == "local":
        return LocalEngine(mode, slots, cpus)
    if kind == "ray" or address or ray_installed():
        if not ray_installed():
            raise EngineError('Ray is not installed: pip install "triton-kata[cluster]" (or ".[cluster]" '
                              "in a checkout), or grade on a local process pool with --engine local")
        return RayEngine(mode, slots, address, cpus)
    return LocalEngine(mode, slots, cpus)
