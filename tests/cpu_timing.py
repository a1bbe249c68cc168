"""grader.timing.timer's call-by-call loop on the CPU, for tests of what the checker does with
kept timed calls: CUDA events and syncs faked, the same logic."""

from __future__ import annotations


class _FakeEvent:
    def __init__(self, enable_timing=True):
        pass


def cpu_timing(monkeypatch):
    """The timer module, its CUDA events, syncs and L2 flush faked (each call takes 1 ms)."""
    import torch

    from grader.timing import timer as timing

    monkeypatch.setattr(timing, "_Event", _FakeEvent)
    monkeypatch.setattr(timing, "_record", lambda event: None)
    monkeypatch.setattr(timing, "_elapsed", lambda start, end: 1.0)
    monkeypatch.setattr(timing, "_synchronize", lambda: None)
    monkeypatch.setattr(timing, "_flush_buffer", lambda: torch.empty(16, dtype=torch.int32))
    return timing


class KeepAt:
    """A sampler that keeps the timed calls in `picks` ({call: set})."""

    def __init__(self, picks):
        self.picks = picks

    def begin(self, calls, n_sets):
        self.calls, self.n_sets = calls, n_sets

    def keep(self, call):
        return self.picks.get(call)
