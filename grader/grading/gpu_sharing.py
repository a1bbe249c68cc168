"""Is anything else using the GPU a grade times on? Asked of the driver from the grading parent
(which never holds a CUDA context): NVML through nvidia-ml-py where it is importable, else
`nvidia-smi --query-compute-apps`. Neither is a dependency; without both, nothing is seen.

A process is "other" unless the grader started it: the workers, checkers and compile-ahead
helpers of every grade this process runs (selftest grades side by side), and this process.
Inside a container the driver may list process ids of another namespace, none of them ours:
then processes beyond the number of ours that hold a GPU device file count, and all are listed.
"""

from __future__ import annotations

import os
import subprocess
import threading
from dataclasses import dataclass, field

PID_MAX = 1 << 22  # the largest pid Linux hands out
_OURS: set[int] = set()
_LOCK = threading.Lock()


def register(pid: int | None) -> None:
    """A process the grader started, which may hold a CUDA context: never 'another process'."""
    if pid:
        with _LOCK:
            _OURS.add(int(pid))


def unregister(pid: int | None) -> None:
    with _LOCK:
        _OURS.discard(pid)


def ours() -> set[int]:
    with _LOCK:
        return set(_OURS) | {os.getpid()}


def _bare_uuid(uuid) -> str:
    text = uuid.decode() if isinstance(uuid, bytes) else str(uuid or "")
    return text.lower().removeprefix("gpu-")


def _nvml() -> list[dict] | None:
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        found = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            uuid = pynvml.nvmlDeviceGetUUID(handle)
            for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
                if not 0 < int(proc.pid) <= PID_MAX:  # a struct of another NVML version: garbage
                    return None
                try:
                    name = pynvml.nvmlSystemGetProcessName(proc.pid)
                except pynvml.NVMLError:
                    name = ""
                used = getattr(proc, "usedGpuMemory", None)
                found.append({"pid": int(proc.pid), "gpu_uuid": _bare_uuid(uuid),
                              "name": name.decode() if isinstance(name, bytes) else str(name),
                              "used_mib": round(used / 2**20) if isinstance(used, int) else None})
        return found
    except Exception:  # noqa: BLE001 - no driver, no permission: fall back to nvidia-smi
        return None


def _nvidia_smi() -> list[dict] | None:
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=pid,gpu_uuid,used_memory,process_name",
             "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return parse_nvidia_smi(done.stdout)


def parse_nvidia_smi(text: str) -> list[dict]:
    found = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",", 3)]
        if len(parts) < 4 or not parts[0].isdigit():
            continue
        found.append({"pid": int(parts[0]), "gpu_uuid": _bare_uuid(parts[1]), "name": parts[3],
                      "used_mib": int(parts[2]) if parts[2].isdigit() else None})
    return found


def compute_processes() -> tuple[list[dict] | None, str]:
    """Every process holding a CUDA context, on any GPU, and how they were found ("nvml",
    "nvidia-smi"); (None, "unavailable") when neither answers."""
    found = _nvml()
    if found is not None:
        return found, "nvml"
    found = _nvidia_smi()
    return (found, "nvidia-smi") if found is not None else (None, "unavailable")


def holds_gpu(pid: int) -> bool:
    """Whether the process has a GPU's device file open (/dev/nvidiaN): what a CUDA context
    needs. False where it cannot be told (gone, another user's)."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("/dev/nvidia") and target[len("/dev/nvidia"):].isdigit():
            return True
    return False


def others(listed: list[dict], gpu_uuid: str | None, mine: set[int], holding=holds_gpu) -> list[dict]:
    """The processes in `listed` on our GPU (all GPUs where its uuid is unknown) that are not ours."""
    here = [p for p in listed if not gpu_uuid or p.get("gpu_uuid") == _bare_uuid(gpu_uuid)]
    if gpu_uuid and not here:  # the uuid in another spelling: the GPUs our processes are on
        gpus = {p.get("gpu_uuid") for p in listed if p["pid"] in mine}
        here = [p for p in listed if not gpus or p.get("gpu_uuid") in gpus]
    if here and not any(p["pid"] in mine for p in here):
        # None of ours listed, though the worker holds a context: the driver lists the ids of
        # another namespace (a container). Count: more than ours that hold a GPU means others.
        return here if len(here) > sum(1 for pid in mine if holding(pid)) else []
    return [p for p in here if p["pid"] not in mine]


@dataclass
class Watch:
    """What one grade saw on its GPU, looked at when the ceilings were measured, before timing
    and after each timed case."""
    gpu_uuid: object = None  # a callable giving the uuid once the worker has told it
    lister: object = compute_processes
    seen: dict[int, dict] = field(default_factory=dict)
    method: str | None = None

    def look(self, when: str) -> None:
        listed, self.method = self.lister()
        if listed is None:
            return
        uuid = self.gpu_uuid() if callable(self.gpu_uuid) else self.gpu_uuid
        for proc in others(listed, uuid, ours()):
            self.seen.setdefault(proc["pid"], {k: v for k, v in proc.items() if k != "gpu_uuid"} | {"when": when})

    @property
    def processes(self) -> list[dict]:
        return list(self.seen.values())
