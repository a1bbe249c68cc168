"""What is in force while the submission's entry function runs (in the worker; needs torch).

- Forbidden framework ops: a TorchFunctionMode catches Python-level calls however they are
  spelled (an alias, a lambda, a method), a TorchDispatchMode catches the aten op underneath.
- Poisoned outputs: with deterministic algorithms on and fill_uninitialized_memory set, every
  torch.empty* the submission makes is filled with NaN (floats) or the largest integer, so
  elements its kernel never writes cannot pass by inheriting a previous result.

Also the base every grader dispatch mode shares, and `grader_machinery`, the scope of the
grader's own tensor work inside a checked call. Whether PyTorch did the task's work is
grader.sandbox.torch_compute; writes past a tensor's ends, grader.sandbox.out_of_bounds.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
import warnings

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from grader.kata.allowed_ops import BASE_ALLOWED
from grader.sandbox.provenance import Provenance

class ForbiddenOpError(RuntimeError):
    pass


def resolve_forbidden(names) -> tuple[dict, set[str]]:
    """Split declared names into Python callables (by id) and aten op packet names."""
    python_level: dict[int, str] = {}
    aten_level: set[str] = set()
    for name in names:
        if name.startswith("aten."):
            aten_level.add(name)
            continue
        obj = _resolve_dotted(name)
        if obj is not None:
            python_level[id(obj)] = name
    return python_level, aten_level


def _resolve_dotted(name: str):
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None  # not in this torch version: nothing to forbid
        return obj
    return None


class GraderDispatchMode(TorchDispatchMode):
    """The base of the grader's dispatch modes (here, in grader.sandbox.torch_compute and grader.sandbox.out_of_bounds). It says
    _should_skip_dynamo() is False: otherwise torch wraps each mode's __torch_dispatch__ in
    torch._dynamo.disable, and the first op the submission runs imports torch._dynamo (5.7 s of
    a 17 s grade on an H100 host). The wrapper only matters when Dynamo traces the submission's
    own Python, which it is not there to do."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False


_machinery = threading.local()  # depth of Triton's own argument marshalling on this thread


def in_machinery() -> bool:
    return getattr(_machinery, "depth", 0) > 0


@contextlib.contextmanager
def grader_machinery():
    """The grader's or Triton's own tensor work inside a checked call (guard-band copies, the
    interpreter's argument copies): judged by the base allow-list, never by the kata's
    `forbidden`, so a kata may forbid aten.copy_ without tripping over them."""
    _machinery.depth = getattr(_machinery, "depth", 0) + 1
    try:
        yield
    finally:
        _machinery.depth -= 1


class _ForbiddenFunctions(TorchFunctionMode):
    def __init__(self, python_level: dict[int, str], seen: list[str], provenance: Provenance | None = None):
        super().__init__()
        self.python_level = python_level
        self.seen = seen
        self.provenance = provenance

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = self.python_level.get(id(func))
        if name is not None:
            self.seen.append(name)
            if self.provenance is not None:
                self.provenance.forbidden.append(self.provenance.classify(name, args, kwargs))
            raise ForbiddenOpError(f"{name} is forbidden in this kata")
        return func(*args, **(kwargs or {}))


class _ForbiddenAtenOps(GraderDispatchMode):
    def __init__(self, aten_level: set[str], seen: list[str], provenance: Provenance | None = None):
        super().__init__()
        self.aten_level = aten_level
        self.seen = seen
        self.provenance = provenance

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func.overloadpacket)
        if name in self.aten_level and not (in_machinery() and name in BASE_ALLOWED):
            self.seen.append(name)
            if self.provenance is not None:  # the recorder above has copied the operands already
                self.provenance.forbidden.append(self.provenance.classify(name, args, kwargs, snapshot=False))
            raise ForbiddenOpError(f"{name} (the op behind it) is forbidden in this kata")
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def poisoned_allocations():
    previous_enabled = torch.are_deterministic_algorithms_enabled()
    previous_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    previous_fill = torch.utils.deterministic.fill_uninitialized_memory
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # The C switch itself: torch.use_deterministic_algorithms also imports torch._inductor
        # (to set its config), seconds of start-up that do nothing for a grade.
        torch._C._set_deterministic_algorithms(True, warn_only=True)
        torch.utils.deterministic.fill_uninitialized_memory = True
        try:
            yield
        finally:
            torch._C._set_deterministic_algorithms(previous_enabled, warn_only=previous_warn)
            torch.utils.deterministic.fill_uninitialized_memory = previous_fill


@contextlib.contextmanager
def submission_guards(python_level: dict[int, str], aten_level: set[str], seen: list[str],
                      provenance: Provenance | None = None):
    """Everything in force during a checked call; `seen` collects forbidden names caught (and
    `provenance.forbidden`, when given, what each was called on)."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(poisoned_allocations())
        if python_level:
            stack.enter_context(_ForbiddenFunctions(python_level, seen, provenance))
        if aten_level:
            stack.enter_context(_ForbiddenAtenOps(aten_level, seen, provenance))
        yield
