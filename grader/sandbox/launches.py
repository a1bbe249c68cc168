"""Which Triton kernels the submission launches, from which thread, on which stream.

Counted at the level every launch goes through, wrapped once in the worker before the submission
is imported:

- on a GPU, the driver's launcher (`CudaLauncher.__call__`, `HIPLauncher.__call__`): a compiled
  kernel's `run` is an instance of it, so it sees `JITFunction.run`, the autotuner and heuristics
  (which call it), a compiled kernel from `.warmup()` or `triton.compile` launched directly
  (`kernel[grid](...)`), and a library's own cache of compiled kernels (FlagGems' `LibEntry`);
  and it is handed the stream the kernel really goes to;
- under the interpreter (TRITON_INTERPRET=1), `GridExecutor.__call__`, which runs every
  interpreted launch (`InterpretedFunction.run`, the autotuner and heuristics above it).

A checked call must launch at least one Triton kernel, from the calling thread, on the stream the
grader is timing. The storages of the tensors handed to the kernels launched during a call are
kept: grader.sandbox.torch_compute tells the submission's own intermediate results (what its kernels
could have written) from the kata's inputs by them.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from grader.timing.launchers import launch_name, launcher_classes


@dataclass
class LaunchLog:
    active: bool = False
    count: int = 0
    thread: int | None = None  # the grader's thread
    stream: int | None = None  # the CUDA stream the grader times (None on the CPU)
    foreign_threads: list[str] = field(default_factory=list)
    foreign_streams: list[str] = field(default_factory=list)
    storages: set[int] = field(default_factory=set)  # data_ptr of each storage a launched kernel was handed
    keep_storages: bool = False  # only for checked calls: timed launches pay nothing for it

    def start(self, stream: int | None, keep_storages: bool = False) -> None:
        self.active, self.count, self.thread, self.stream = True, 0, threading.get_ident(), stream
        self.keep_storages = keep_storages
        self.foreign_threads.clear()
        self.foreign_streams.clear()
        self.storages.clear()

    def stop(self) -> None:
        self.active = False


log = LaunchLog()
_wrapped: dict[type, tuple[str, object]] = {}  # class -> (attribute, the wrapper installed)


def _current_stream() -> int | None:
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch.cuda.current_stream().cuda_stream
    return None


def _storage(arg) -> int | None:
    """The data pointer of a tensor argument's storage (a TMA descriptor's base tensor too)."""
    tensor = arg if hasattr(arg, "untyped_storage") else getattr(arg, "base", None)
    if not hasattr(tensor, "untyped_storage"):
        return None
    try:
        return tensor.untyped_storage().data_ptr()
    except Exception:  # noqa: BLE001 - a tensor without storage (a meta or fake tensor)
        return None


def _record(name: str, stream: int | None, args) -> None:
    if not log.active:
        return
    log.count += 1
    if log.keep_storages:
        for arg in args:
            pointer = _storage(arg)
            if pointer:
                log.storages.add(pointer)
    if threading.get_ident() != log.thread:
        log.foreign_threads.append(name)
    elif log.stream is not None and (stream if stream is not None else _current_stream()) != log.stream:
        log.foreign_streams.append(name)


def _wrap_launcher(cls) -> None:
    original = cls.__call__

    def __call__(self, *args, **kwargs):
        # (gridX, gridY, gridZ, stream, function, metadata..., kernel arguments...), positional
        # from every caller in Triton; keywords are taken too, whatever a library passes.
        stream = args[3] if len(args) > 3 else kwargs.get("stream")
        rest = (*args[5:], *kwargs.values())
        _record(launch_name(rest), stream if isinstance(stream, int) else None, rest)
        return original(self, *args, **kwargs)

    __call__.__wrapped__ = original
    cls.__call__ = __call__
    _wrapped[cls] = ("__call__", __call__)


def _wrap_interpreter(cls) -> None:
    original = cls.__call__

    def __call__(self, *args, **kwargs):
        _record(getattr(self.fn, "__name__", "a Triton kernel"), None, (*args, *kwargs.values()))
        return original(self, *args, **kwargs)

    __call__.__wrapped__ = original
    cls.__call__ = __call__
    _wrapped[cls] = ("__call__", __call__)


def install() -> None:
    for cls in launcher_classes():
        if cls not in _wrapped:
            _wrap_launcher(cls)
    try:
        from triton.runtime.interpreter import GridExecutor
    except ImportError:
        return
    if GridExecutor not in _wrapped:
        _wrap_interpreter(GridExecutor)


def still_installed() -> bool:
    return all(getattr(cls, attr, None) is wrapper for cls, (attr, wrapper) in _wrapped.items())
