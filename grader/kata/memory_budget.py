"""Memory budgets: how much GPU memory one call may use beyond its inputs and outputs (a design
rule of the kata; whether the whole grade fits this GPU is grader.kata.gpu_memory_fit).

A kata whose point is not to materialise a large intermediate (cross_entropy: no float32 copy of
the logits, no (B, V) softmax) declares a budget per task in kata.yaml (docs/KATA_FORMAT.md,
"Memory budgets"):

    memory_budget:
      bytes: "0.02 * B * V * itemsize + 2 ** 20"   # over the case's fields and itemsize
      what: "2% of the logits, plus 1 MiB"         # how the budget reads in a message
      advice: "a float32 copy of the logits?"      # the likely cause of going over

On a GPU the worker measures each checked call with the CUDA caching allocator's counters:

    peak extra = max_memory_allocated() during the call - memory_allocated() before it
                 - the bytes of the outputs the call returned (they have to exist)
                 - what the grader itself allocates during the call

The grader's own part is the guard bands around every tensor the submission creates
(grader.sandbox.out_of_bounds) and the instant each new tensor is copied into its guarded storage, when
it exists twice: the meter is paused across that copy (`PeakMeter.excluded`). A call over the
budget fails with the diagnosis `memory_budget`: too much memory is a design flaw, never a cheat.
The Triton interpreter runs on the CPU, which has no peak-memory counter: there the check is
skipped (the workspace README says the budget is checked on a GPU only).

Triton's autotuner is paused out of the meter as well (`exclude_from_meter`): it benchmarks a
kernel's configs inside the first call that launches it, with a 256 MB buffer it flushes the L2
with, which is Triton's and not the submission's design. The second checked call finds the
configs tuned and is measured whole.

This module imports torch only inside the meter, so that grader.kata.format (which parses the
budget) stays free of it.
"""

from __future__ import annotations

import functools
from contextlib import contextmanager
from dataclasses import dataclass

from grader.kata.costexpr import CostExpressionError, evaluate, number_or_expression

KEYS = ("bytes", "what", "advice")
BLOCK_BYTES = 512  # the CUDA caching allocator rounds every block up to a multiple of this


class MemoryBudgetError(ValueError):
    """A `memory_budget` entry that does not follow docs/KATA_FORMAT.md."""


@dataclass(frozen=True)
class MemoryBudget:
    """A task's declared budget: an expression for the bytes, and the words for a message."""

    bytes: str  # an expression over the case's fields and `itemsize` (or a number, as text)
    what: str = ""
    advice: str = ""

    def limit(self, params: dict, itemsize: int) -> float:
        """The budget in bytes for a case (params: its fields; itemsize: the input dtype's)."""
        return float(evaluate(self.bytes, dict(params, itemsize=itemsize)))


def parse_memory_budget(raw) -> MemoryBudget | None:
    """kata.yaml's `memory_budget` -> MemoryBudget (None when absent); raises MemoryBudgetError."""
    if raw is None:
        return None
    if isinstance(raw, (int, float, str)) and not isinstance(raw, bool):
        raw = {"bytes": raw}
    if not isinstance(raw, dict):
        raise MemoryBudgetError("memory_budget must be {bytes: EXPRESSION, what: TEXT, advice: TEXT}")
    unknown = sorted(set(raw) - set(KEYS))
    if unknown:
        raise MemoryBudgetError(f"memory_budget: unknown key(s) {', '.join(unknown)} (known: {', '.join(KEYS)})")
    if "bytes" not in raw:
        raise MemoryBudgetError("memory_budget needs 'bytes', an expression over the case's fields and itemsize")
    try:
        expression = number_or_expression(raw["bytes"])
    except CostExpressionError as exc:
        raise MemoryBudgetError(f"memory_budget: bytes {exc}") from None
    for key in ("what", "advice"):
        if not isinstance(raw.get(key, ""), str):
            raise MemoryBudgetError(f"memory_budget: {key} must be text")
    return MemoryBudget(bytes=str(expression), what=raw.get("what", ""), advice=raw.get("advice", ""))


def human_bytes(n: float) -> str:
    """2.1 GB, 64 MB, 12 kB, 300 bytes (decimal units, three significant digits)."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n:.0f} bytes"


def judge(extra_bytes: int, limit_bytes: float, what: str = "", advice: str = "") -> str | None:
    """The failure message when a call's peak extra memory is over its budget, else None.

    extra_bytes: the peak the call allocated beyond what existed before it, net of its outputs
    and of the grader's own allocations (PeakMeter.extra, output_bytes).
    """
    if extra_bytes <= limit_bytes:
        return None
    budget = human_bytes(limit_bytes) + (f" ({what})" if what else "")
    message = f"peak extra GPU memory {human_bytes(extra_bytes)} exceeds the budget {budget}"
    return f"{message}: {advice}" if advice else message


def _rounded(nbytes: int) -> int:
    return -(-nbytes // BLOCK_BYTES) * BLOCK_BYTES


def output_bytes(tensors) -> int:
    """The allocator bytes the outputs' own elements need (each distinct tensor once, rounded
    up to the allocator's block): what a call must allocate whatever its design."""
    seen, total = set(), 0
    for t in tensors:
        key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), t.dtype)
        if key in seen or not t.numel():
            continue
        seen.add(key)
        total += _rounded(t.numel() * t.element_size())
    return total


class PeakMeter:
    """The peak of the CUDA caching allocator's allocated bytes during a call, net of what the
    grader allocates in it. Inactive (every figure 0) on the CPU or when no budget applies.

    `peak` is kept net of the grader's bytes that existed when it was reached: the guard bands
    of tensors made later do not shrink a peak reached before them."""

    def __init__(self, active: bool):
        self.active = active
        self.before = self.peak = self.grader_bytes = 0

    def _read_peak(self) -> None:
        import torch
        self.peak = max(self.peak, torch.cuda.max_memory_allocated() - self.grader_bytes)

    def start(self) -> None:
        global _measuring
        _measuring = self if self.active else None
        if not self.active:
            return
        import torch
        torch.cuda.synchronize()
        self.before = self.peak = torch.cuda.memory_allocated()
        self.grader_bytes = 0
        torch.cuda.reset_peak_memory_stats()

    def stop(self) -> None:
        global _measuring
        _measuring = None
        if not self.active:
            return
        import torch
        torch.cuda.synchronize()
        self._read_peak()

    @contextmanager
    def excluded(self):
        """A grader step inside the call (a tensor moved into guarded storage): the peak it
        causes is not the submission's, and what it leaves allocated is counted as the grader's."""
        if not self.active:
            yield
            return
        import torch
        self._read_peak()
        entered = torch.cuda.memory_allocated()
        try:
            yield
        finally:
            self.grader_bytes += max(0, torch.cuda.memory_allocated() - entered)
            torch.cuda.reset_peak_memory_stats()  # the peak restarts from what is allocated now

    @property
    def extra(self) -> int:
        """Peak bytes allocated beyond those before the call, less the grader's own."""
        return max(0, self.peak - self.before)


_measuring: PeakMeter | None = None  # the meter of the checked call running now, if any


def exclude_from_meter(owner, attribute: str) -> None:
    """Run owner.attribute (Triton's Autotuner._bench) outside the running meter's peak."""
    original = getattr(owner, attribute, None)
    if original is None or getattr(original, "kata_excluded", False):
        return

    @functools.wraps(original)
    def excluded(*args, **kwargs):
        meter = _measuring
        if meter is None:
            return original(*args, **kwargs)
        with meter.excluded():
            return original(*args, **kwargs)

    excluded.kata_excluded = True
    setattr(owner, attribute, excluded)
