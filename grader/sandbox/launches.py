"""Which Triton kernels the submission launches, from which thread, on which stream.

The launch methods of Triton's JIT functions (compiled and interpreted) are wrapped once, in the
worker, before the submission is imported. A checked call must launch at least one Triton kernel,
from the calling thread, on the stream the grader is timing.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


@dataclass
class LaunchLog:
    active: bool = False
    count: int = 0
    thread: int | None = None  # the grader's thread
    stream: int | None = None  # the CUDA stream the grader times (None on the CPU)
    foreign_threads: list[str] = field(default_factory=list)
    foreign_streams: list[str] = field(default_factory=list)

    def start(self, stream: int | None) -> None:
        self.active, self.count, self.thread, self.stream = True, 0, threading.get_ident(), stream
        self.foreign_threads.clear()
        self.foreign_streams.clear()

    def stop(self) -> None:
        self.active = False


log = LaunchLog()
_wrapped: dict[type, object] = {}


def _current_stream() -> int | None:
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch.cuda.current_stream().cuda_stream
    return None


def _record(name: str) -> None:
    if not log.active:
        return
    log.count += 1
    if threading.get_ident() != log.thread:
        log.foreign_threads.append(name)
    elif log.stream is not None and _current_stream() != log.stream:
        log.foreign_streams.append(name)


def _wrap(cls) -> None:
    original = cls.run

    def run(self, *args, **kwargs):
        if not kwargs.get("warmup", False):
            _record(getattr(getattr(self, "fn", None), "__name__", "a Triton kernel"))
        return original(self, *args, **kwargs)

    run.__wrapped__ = original
    cls.run = run
    _wrapped[cls] = run


def install() -> None:
    from triton.runtime.jit import JITFunction

    _wrap(JITFunction)
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError:
        return
    _wrap(InterpretedFunction)


def still_installed() -> bool:
    return all(cls.run is run for cls, run in _wrapped.items())
