"""A case's inputs, drawn from the grade's seed: the worker and the checker draw the same ones.

Each draw is named by a salt: "" for the checked call, "/again" for the repeat call on the same
buffers, "/timing<i>" for the timed input sets (changed before every timed call:
grader.timing.perturb), "/limit" for the baseline run that sets a case's time limit.
"""

from __future__ import annotations

import hashlib

import torch

AGAIN = "/again"


def case_seed(seed: int, key: str) -> int:
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


def make_case_inputs(spec, task, case, dtype: str, device: str, seed: int, key: str,
                     salt: str = "") -> dict:
    gen = torch.Generator(device=device)
    gen.manual_seed(case_seed(seed, key + salt))
    make = getattr(spec, task.inputs_fn)
    return make(dict(case.params), getattr(torch, dtype), device, gen)


def flatten(value, label):
    """Yield (label, leaf) for nested lists/tuples of outputs or inputs."""
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from flatten(item, f"{label}[{i}]")
    else:
        yield label, value


def tensor_leaves(value, label="") -> list[torch.Tensor]:
    return [leaf for _, leaf in flatten(value, label) if isinstance(leaf, torch.Tensor)]


def clone(value):
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, (list, tuple)):
        return type(value)(clone(v) for v in value)
    if isinstance(value, dict):
        return {k: clone(v) for k, v in value.items()}
    return value


def output_dtype(output, inputs: dict) -> torch.dtype:
    """An output's declared dtype: a dtype name, or the name of the input whose dtype it takes.

    An input that is itself a torch.dtype (an argument such as `dtype` that chooses the output's
    precision, as in dequantize(q, scale, dtype)) gives that dtype.
    """
    if output.dtype in inputs:
        value = inputs[output.dtype]
        if isinstance(value, torch.dtype):
            return value
        return tensor_leaves(value)[0].dtype
    return getattr(torch, output.dtype)
