"""The change made to the timed inputs before every call, replayable from a seed.

Before each timed call of the submission, every floating-point input of the call's set, and every
int8 or uint8 one (quantized data, not indices), is changed densely: each element becomes its
drawn value times 2^-(a + b), with a and b fresh random bits for every change, so a quarter of
the elements keep their drawn value, half are halved and a quarter quartered (finite, same sign:
valid wherever the drawn value was). A kata whose inputs are all wider integers has those changed
instead, halved toward zero (sign and range kept). Where halving rounds (a subnormal float, an odd
integer), doubling back does not restore the value: the replay repeats every step, so it rebuilds
the same values.

The bits: `a` is a random pattern of PERIOD elements repeated along the input in memory order,
`b` one random bit per run of PERIOD elements. Two passes over the input, about the cost of a
copy. The pattern alone would leave a full reduction cheap to correct (every run of the input
changes alike, so one run's ratios and the per-position sums kept from before give the new sum);
with a bit per run the new sum is a product of the input with two fresh vectors, which takes
reading the input.

Why dense: no call sees the contents of an earlier one, so a cache keyed on the contents misses;
and a kernel that keeps its previous inputs and result cannot patch that result cheaply. A change
confined to a short span would let a compute-bound submission diff its inputs and correct its
last result (a rank-k update of a GEMM, the changed rows of an attention) far faster than doing
the work, padded above the physical floor where no correctness check can see it.

Each call's change is drawn from a key, and the bits from torch generators seeded by it on the
inputs' device. In a grade the parent process draws the keys and sends each with its answer to the
previous call (grader.sandbox.referee), so nothing in the worker's memory tells a submission the
inputs of a later call; it keeps them, and the trusted checker, drawing the same sets on the same
device, replays the changes from them to rebuild the exact inputs of any timed call. Elsewhere
(tests, in-place tasks, which keep no calls) the keys come from a seed (seeded_keys).
"""

from __future__ import annotations

import random

import torch

PERIOD = 1 << 20  # the pattern's length, and the run each bit of `b` scales

# Bound here, before the submission is imported (grader.sandbox.integrity watches the public
# names): a submission that patched them to make the changes vanish changes nothing.
_Generator = torch.Generator
_randint = torch.randint
_exp2 = torch.exp2
_sub = torch.sub
_mul_ = torch.Tensor.mul_
_copy_ = torch.Tensor.copy_

_DATA_INTEGERS = (torch.int8, torch.uint8)  # quantized values: changed beside float inputs


def tensors(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in tensors(v)]
    return []


def changed_tensors(args) -> list[torch.Tensor]:
    """The tensors of a call's arguments the timing changes: the floating-point and 8-bit integer
    ones, or the other integer ones where there are none (indices are left alone otherwise)."""
    data = [t for t in tensors(args) if t.numel() and (t.is_floating_point() or t.dtype in _DATA_INTEGERS)]
    if data:
        return data
    return [t for t in tensors(args) if t.dtype != torch.bool and t.numel()]


class Perturber:
    """perturb(args, key) changes, in place, every tensor of changed_tensors(args) from its drawn
    value times 2^-(a_prev + b_prev) (0 before the first change) to its drawn value times
    2^-(a_new + b_new), the new bits drawn from `key`: the previous change's bits are kept
    (PERIOD bytes and one per run, at most)."""

    def __init__(self):
        self._last: dict[int, tuple[object, list[tuple[torch.Tensor, torch.Tensor]]]] = {}

    def __call__(self, args, key: int) -> None:
        held = self._last.get(id(args))
        previous = held[1] if held is not None and held[0] is args else None
        bits = []
        for index, t in enumerate(changed_tensors(args)):
            new = _bits(key, index, t.numel(), t.device)
            bits.append(new)
            if previous is None:
                _rescale(t, *new)
            else:
                (a_new, b_new), (a_old, b_old) = new, previous[index]
                _rescale(t, _sub(a_new, a_old), _sub(b_new, b_old))
        self._last[id(args)] = (args, bits)


def _bits(key: int, index: int, numel: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """(a: min(numel, PERIOD) bits, b: one bit per run of PERIOD elements), int8 0/1, for the
    index-th changed tensor of a change drawn as `key`."""
    generator = _Generator(device=device)
    generator.manual_seed((key + index * 0x9E3779B97F4A7C15) % (1 << 63))
    a = _randint(0, 2, (min(numel, PERIOD),), generator=generator, device=device, dtype=torch.int8)
    b = _randint(0, 2, (-(-numel // PERIOD),), generator=generator, device=device, dtype=torch.int8)
    return a, b


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


def _rescale(t: torch.Tensor, pattern: torch.Tensor, runs: torch.Tensor) -> None:
    """t *= 2^-pattern (repeated along t in memory order) * 2^-runs (one per run of PERIOD),
    both int8 in -1..1. Multiplying by a power of two is exact in every float format but where
    the result is subnormal, which rounds to nearest even, the same on every device; integers are
    halved toward zero."""
    flat = _in_memory_order(t)
    if flat is None:  # strided with gaps: through a contiguous copy
        copy = t.contiguous()
        _rescale(copy, pattern, runs)
        _copy_(t, copy)
        return
    arithmetic = t.is_floating_point() and t.dtype not in _NO_ARITHMETIC
    # Factors in t's own dtype where it has arithmetic (0.5, 1 and 2 are exact in all): a
    # multiply of one dtype is the cheap one.
    dtype = t.dtype if arithmetic else torch.float32
    by_position, by_run = _exp2(-pattern.to(dtype)), _exp2(-runs.to(dtype))
    period = by_position.numel()
    whole = flat.numel() // period
    for run, position, scale in ((flat[:whole * period].view(whole, period), by_position, by_run[:whole, None]),
                                 (flat[whole * period:], by_position[:flat.numel() - whole * period], by_run[whole:])):
        if not run.numel():
            continue
        if arithmetic:
            _mul_(_mul_(run, position), scale)  # each step keeps |value| <= its drawn value
        elif run.is_floating_point():
            _copy_(run, _mul_(_mul_(run.float(), position), scale))
        else:
            _copy_(run, _mul_(_mul_(run.double(), position).trunc_(), scale).trunc_())


def change_call(perturb: Perturber, sets: list, call: int, key: int, all_sets: bool) -> None:
    """The change made before submission call `call`, drawn as `key`: graph timing changes every
    set before each replay (each with its own key, drawn from `key`); call-by-call timing changes
    the set the call uses (set `call % len(sets)`)."""
    if all_sets:
        keys = random.Random(key)
        for args in sets:
            perturb(args, keys.getrandbits(63))
    else:
        perturb(sets[call % len(sets)], key)


def seeded_keys(seed: int):
    """One key per call from a seed: where no parent draws them (tests, in-place tasks)."""
    rng = random.Random(seed)
    return lambda: rng.getrandbits(63)


class Replay:
    """Input sets brought forward call by call: advance(call) applies the changes made before
    every submission call up to `call`, so the inputs of several timed calls, visited in
    ascending order, are rebuilt from one draw of the sets.

    keys: the key of every call's change, as the parent sent them to the worker (a list indexed
    by call), or the seed the worker drew them from (seeded_keys). per_call_all_sets: graph
    timing (change_call).
    """

    def __init__(self, sets: list, keys: list[int] | int, per_call_all_sets: bool):
        self.sets = sets
        self._perturb = Perturber()
        self._keys = keys if isinstance(keys, list) else None
        self._next_key = iter(keys).__next__ if isinstance(keys, list) else seeded_keys(keys)
        self._all_sets = per_call_all_sets
        self.applied = -1  # the last call whose change the sets hold

    def advance(self, call: int) -> None:
        if call < self.applied:
            raise ValueError(f"the sets already hold the changes up to call {self.applied}: "
                             f"draw them again to rebuild call {call}")
        if self._keys is not None and call >= len(self._keys):
            raise ValueError(f"no key for call {call}: the grader sent {len(self._keys)}")
        for c in range(self.applied + 1, call + 1):  # keys are taken in call order
            change_call(self._perturb, self.sets, c, self._next_key(), self._all_sets)
        self.applied = max(self.applied, call)


def replay(sets: list, keys: list[int] | int, calls: int, per_call_all_sets: bool) -> None:
    """Apply, in place, the changes made before the first `calls` + 1 submission calls."""
    Replay(sets, keys, per_call_all_sets).advance(calls)
