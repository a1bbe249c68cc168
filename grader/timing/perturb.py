"""The change made to the timed inputs before every call, replayable from a seed.

Before each timed call of the submission, every floating-point input of the call's set is changed
densely: a random half of its elements is halved, the elements halved before the previous call
are doubled back first, so every element is always its drawn value or half of it (finite, same
sign: valid wherever the input was). A kata with no float input (an INT8 GEMM) has its integer
inputs changed the same way, halved toward zero (sign and range kept, so a valid index stays
valid). The random half is a pattern of PERIOD elements, drawn afresh for every change, repeated
along the input in memory order: one pass over it, as cheap as a copy.

Why dense: no call sees the contents of an earlier one, so a cache keyed on the contents misses;
and a kernel that keeps its previous inputs and result cannot patch that result cheaply. A change
confined to a short span would let a compute-bound submission diff its inputs and correct its
last result (a rank-k update of a GEMM, the changed rows of an attention) far faster than doing
the work, padded above the physical floor where no correctness check can see it. With half of
every input changed, the correction costs what the work costs.

The masks come from a `random.Random` seeded per case, consumed by the submission's calls alone,
and from torch generators seeded by it on the inputs' device, so the trusted checker, drawing the
same sets on the same device, can replay them and rebuild the exact inputs of any timed call.
"""

from __future__ import annotations

import random

import torch

PERIOD = 1 << 20  # one mask of this many elements is drawn per input and repeated along it

# Bound here, before the submission is imported (grader.sandbox.integrity watches the public
# names): a submission that patched them to make the changes vanish changes nothing.
_Generator = torch.Generator
_randint = torch.randint
_exp2 = torch.exp2
_sub = torch.sub
_mul_ = torch.Tensor.mul_
_copy_ = torch.Tensor.copy_


def tensors(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in tensors(v)]
    return []


def changed_tensors(args) -> list[torch.Tensor]:
    """The tensors of a call's arguments the timing changes: the floating-point ones, or the
    integer ones where there is no float input."""
    floats = [t for t in tensors(args) if t.is_floating_point() and t.numel()]
    if floats:
        return floats
    return [t for t in tensors(args) if t.dtype != torch.bool and t.numel()]


class Perturber:
    """perturb(args) changes, in place, every tensor of changed_tensors(args): before, each
    element is its drawn value times 2**-m_prev (m_prev: the mask of args' previous change, 0
    before the first); after, times 2**-m_new, with m_new a fresh random mask.

    A mask is PERIOD random bits repeated along the tensor in memory order: one pass over the
    input, as cheap as a copy, and still a dense change wherever the work is. (A GEMM's rows i
    and i + PERIOD / K share a pattern; correcting a kept result still takes one product per
    pattern, each with its share of the rows: the whole GEMM.)"""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        # id(args) -> (args, the mask of each changed tensor's last change): at most PERIOD bytes
        # each, kept rather than drawn again
        self._last: dict[int, tuple[object, list[torch.Tensor]]] = {}

    def __call__(self, args) -> None:
        key = self.rng.getrandbits(63)  # drawn even where nothing changes: replay stays in step
        held = self._last.get(id(args))
        previous = held[1] if held is not None and held[0] is args else None
        masks = []
        for index, t in enumerate(changed_tensors(args)):
            new = _mask(key, index, min(t.numel(), PERIOD), t.device)
            halvings = new if previous is None else _sub(new, previous[index])
            masks.append(new)
            _rescale(t, halvings)
        self._last[id(args)] = (args, masks)


def _mask(key: int, index: int, length: int, device) -> torch.Tensor:
    """`length` random 0/1 (int8) for the index-th changed tensor of a change drawn as `key`."""
    generator = _Generator(device=device)
    generator.manual_seed((key + index * 0x9E3779B97F4A7C15) % (1 << 63))
    return _randint(0, 2, (length,), generator=generator, device=device, dtype=torch.int8)


def _in_memory_order(t: torch.Tensor) -> torch.Tensor | None:
    """A flat view of t's elements in memory order (t contiguous in some order of its dims,
    a transposed weight say), or None."""
    order = sorted(range(t.dim()), key=lambda d: -t.stride(d))
    flat = t.permute(order)
    return flat.reshape(-1) if flat.is_contiguous() else None


# Float dtypes torch has no arithmetic kernels for (mul_ raises "not implemented" on the CPU and
# on CUDA): they are rescaled through float32.
_NO_ARITHMETIC = {getattr(torch, name) for name in (
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
    if hasattr(torch, name)}


def _rescale(t: torch.Tensor, halvings: torch.Tensor) -> None:
    """t *= 2**-halvings (int8, -1 to 1), repeated along t in memory order. Multiplying by a
    power of two is exact in every float format but where a halved value is subnormal, which
    rounds to nearest even, the same on every device; integers are halved toward zero."""
    flat = _in_memory_order(t)
    if flat is None:  # strided with gaps: through a contiguous copy
        copy = t.contiguous()
        _rescale(copy, halvings)
        _copy_(t, copy)
        return
    arithmetic = t.is_floating_point() and t.dtype not in _NO_ARITHMETIC
    # The factors in t's own dtype where it has arithmetic (0.5, 1 and 2 are exact in all):
    # a multiply of one dtype is the cheap one.
    factor = _exp2(-halvings.to(t.dtype if arithmetic else torch.float32))
    period = factor.numel()
    whole = flat.numel() // period * period
    for run, f in ((flat[:whole].view(-1, period), factor), (flat[whole:], factor[:flat.numel() - whole])):
        if not run.numel():
            continue
        if arithmetic:
            _mul_(run, f)
        elif run.is_floating_point():
            _copy_(run, _mul_(run.float(), f))
        else:
            _copy_(run, _mul_(run.double(), f).trunc_())


class Replay:
    """Input sets brought forward call by call: advance(call) applies the changes made before
    every submission call up to `call`, so the inputs of several timed calls, visited in
    ascending order, are rebuilt from one draw of the sets.

    per_call_all_sets: graph timing changes every set before each replay; call-by-call timing
    changes only the set the call uses (set `call % len(sets)`).
    """

    def __init__(self, sets: list, seed: int, per_call_all_sets: bool):
        self.sets = sets
        self._perturb = Perturber(seed)
        self._all_sets = per_call_all_sets
        self.applied = -1  # the last call whose change the sets hold

    def advance(self, call: int) -> None:
        if call < self.applied:
            raise ValueError(f"the sets already hold the changes up to call {self.applied}: "
                             f"draw them again to rebuild call {call}")
        for c in range(self.applied + 1, call + 1):
            for i in (range(len(self.sets)) if self._all_sets else (c % len(self.sets),)):
                self._perturb(self.sets[i])
        self.applied = max(self.applied, call)


def replay(sets: list, seed: int, calls: int, per_call_all_sets: bool) -> None:
    """Apply, in place, the changes made before the first `calls` + 1 submission calls."""
    Replay(sets, seed, per_call_all_sets).advance(calls)
