"""Where the tensors PyTorch computes on during a checked call come from: the rule broken vs the
grade gamed (docs/SCORING.md, "PyTorch may not do the work").

PyTorch computing on the kata's inputs (the input tensors, copies of them, anything torch
computed from them) is doing the kata's work: the cheat `torch_compute`. PyTorch computing only
on the submission's own results (tensors it allocated in the call, tensors handed to a Triton
kernel it launched in the call, and what torch computed from those alone) breaks the rule that
all the arithmetic is in Triton, but games nothing: a reduction over the partials its kernel
wrote, a dtype conversion of its result. So does an integer count or bounds check of integer
inputs read on the host (`(target != ignore_index).sum().item()`), in a task whose outputs are
all floating point, where such a count cannot be the answer. Both fail the grade with a
diagnosis and no cheat named.

A "partial" that is a copy of the inputs stays a cheat: each of the submission's own tensors
that torch computes on is copied (in the grader's machinery scope) and compared with the inputs
after the call. What this cannot tell apart: a kernel that rewrites the inputs reversibly (2 * x)
for torch to finish; that grade fails all the same, as a rule broken.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch.utils._pytree import tree_leaves

OWN, COUNT, INPUT = 0, 1, 2  # the worst operand decides

# Integer counts and bounds checks: comparisons, masks, their sums and extremes, and the read.
COUNT_OPS = frozenset({
    "aten.ne", "aten.eq", "aten.lt", "aten.le", "aten.gt", "aten.ge", "aten.logical_and",
    "aten.logical_or", "aten.logical_not", "aten.bitwise_and", "aten.bitwise_or", "aten.bitwise_not",
    "aten.mul", "aten.sum", "aten.count_nonzero", "aten.any", "aten.all", "aten.max", "aten.min",
    "aten.amax", "aten.amin", "aten._local_scalar_dense", "aten.is_nonzero",
})
FILLS = frozenset({"aten.fill_", "aten.zero_"})
COPIES_INTO_FIRST = frozenset({"aten.copy_"})  # (destination, source)
SNAPSHOT_BYTES = 1 << 28  # the own tensors copied for the copy-of-the-inputs check, at most


def _storage(t: torch.Tensor) -> int:
    try:
        return t.untyped_storage().data_ptr()
    except Exception:  # noqa: BLE001 - no storage (a meta tensor): nothing to trace
        return 0


def _tensors(args, kwargs) -> list[torch.Tensor]:
    return [t for t in tree_leaves((args, kwargs or {})) if isinstance(t, torch.Tensor)]


@dataclass
class Provenance:
    """One checked call's record of where tensors come from; `launched` is the launch log's set
    of storages handed to Triton kernels in this call (grader.sandbox.launches), read live."""

    inputs: list[tuple[str, torch.Tensor]]  # (label, tensor) of each of the kata's inputs
    launched: set[int]
    derived: dict[int, int] = field(default_factory=dict)  # storage -> OWN / COUNT / INPUT
    snapshots: list[tuple[str, torch.Tensor]] = field(default_factory=list)
    snapshot_bytes: int = 0
    forbidden: list[int] = field(default_factory=list)  # the kind of each forbidden op caught

    def __post_init__(self):
        self.inputs = [(label, t) for label, t in self.inputs if isinstance(t, torch.Tensor)]
        self.input_storages = {_storage(t) for _, t in self.inputs} - {0}

    def status(self, t: torch.Tensor) -> int:
        pointer = _storage(t)
        if pointer == 0:
            return OWN
        if pointer in self.input_storages:
            return INPUT
        if pointer in self.launched:
            return OWN  # a kernel of this call had it; a copy of the inputs is caught by content
        if pointer in self.derived:
            return self.derived[pointer]
        # Made without an op the recorder saw: a Python number torch wrapped (0-d, on the CPU),
        # or a tensor from before the call (a cache), whose origin is unknown.
        return OWN if t.dim() == 0 and t.device.type == "cpu" else INPUT

    def classify(self, name: str, args, kwargs=None, snapshot: bool = True) -> int:
        """OWN, COUNT or INPUT for a disallowed op about to run on these arguments. COUNT holds
        only where every output is floating point: the worker decides that after the call."""
        tensors = _tensors(args, kwargs)
        worst = max((self.status(t) for t in tensors), default=OWN)
        if worst == INPUT and name in COUNT_OPS and tensors and all(self._countable(t) for t in tensors):
            worst = COUNT
        if worst != INPUT and snapshot:
            self._snapshot(name, tensors)
        return worst

    def _countable(self, t: torch.Tensor) -> bool:
        """An integer input itself, or a count made from integer inputs: never a mask or a cast
        made from floating-point data (`x > 0`, `x.long()`)."""
        if t.is_floating_point() or t.is_complex():
            return False
        return _storage(t) in self.input_storages or self.status(t) != INPUT

    def follow(self, name: str, args, kwargs, result, kind: int | None = None) -> None:
        """What an op wrote inherits its operands' origin (`kind` when the op was classified)."""
        tensors = _tensors(args, kwargs)
        if name in FILLS:
            written, kind = tensors[:1], OWN
        elif name in COPIES_INTO_FIRST:
            written = tensors[:1]
            kind = max((self.status(t) for t in tensors[1:]), default=OWN) if kind is None else kind
        else:
            written = [t for t in tree_leaves(result) if isinstance(t, torch.Tensor)]
            if name.endswith("_") and tensors:
                written.append(tensors[0])
            if kind is None:
                kind = max((self.status(t) for t in tensors), default=OWN)
        for t in written:
            pointer = _storage(t)
            if pointer and pointer not in self.input_storages:
                self.derived[pointer] = kind

    def _snapshot(self, name: str, tensors) -> None:
        for t in tensors:
            if _storage(t) not in self.launched or t.numel() < 2:
                continue
            size = t.numel() * t.element_size()
            if self.snapshot_bytes + size > SNAPSHOT_BYTES:
                return
            self.snapshot_bytes += size
            self.snapshots.append((name, torch.ops.aten.clone.default(t)))

    def copies_of_inputs(self) -> list[str]:
        """"aten.sum on a copy of the input 'x'" for each own tensor torch computed on that holds
        an input's values (in order, cast to its dtype): a decoy kernel's copy, not a partial."""
        found = []
        for name, snap in self.snapshots:
            flat = snap.reshape(-1)
            for label, source in self.inputs:
                if source.numel() != flat.numel() or source.device != flat.device:
                    continue
                if torch.equal(source.reshape(-1).to(flat.dtype), flat):
                    found.append(f"{name} on a copy of the input '{label}' its kernel made")
                    break
        return list(dict.fromkeys(found))
