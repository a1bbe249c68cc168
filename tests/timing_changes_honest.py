"""Run in a fresh process with TRITON_INTERPRET=1 (tests/test_timing_changes_honest.py): for every
task of the katas named in argv with a ground truth, the reference solution on a case's timed
input set after three of the timing's changes (grader.timing.perturb) must still pass the
checker's comparison. The changes rescale every input: every value becomes its drawn value, half
or a quarter of it, which must be a valid input wherever the drawn one was. One JSON line per task."""

from __future__ import annotations

import importlib.util
import json
import sys

import torch

from grader.grading.plan import build_plan
from grader.judge.checker import Checker
from grader.judge.inputs import case_seed, flatten
from grader.kata.catalog import get_kata
from grader.timing.perturb import Perturber, seeded_keys, tensors

SEED = 5


def _reference(kata):
    spec = importlib.util.spec_from_file_location(f"reference_{kata.name}", kata.reference_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check(kata_name: str) -> list[dict]:
    kata = get_kata(kata_name)
    checker = Checker(kata, SEED, "cpu")
    reference = _reference(kata)
    plan = [p for p in build_plan(kata, "interpret") if p.skip_reason is None]
    rows = []
    for task in kata.tasks:
        if task.property_fn or task.inplace:
            continue
        for planned in [p for p in plan if p.task == task.name]:
            rows.append(_check_case(checker, reference, task, planned))
    return rows


def _check_case(checker, reference, task, planned) -> dict:
    inputs = checker._inputs(task, planned.case, planned.dtype, planned.key, "/timing0")
    args = tuple(inputs[a] for a in task.args)
    drawn = [t.clone() for t in tensors(args)]
    perturb, keys = Perturber(), seeded_keys(case_seed(SEED, planned.key + "/rng"))
    for _ in range(3):
        perturb(args, keys())
    changed = any(not torch.equal(a, b) for a, b in zip(tensors(args), drawn))
    got = getattr(reference, task.name)(*args)
    got = got if isinstance(got, tuple) and len(task.outputs) > 1 else (got,)
    saved = {o.name: [leaf for _, leaf in flatten(value, o.name)] for o, value in zip(task.outputs, got)}
    verdict = checker.compare(task, inputs, saved, planned.case)
    return {"key": planned.key, "ok": verdict["ok"], "changed": changed,
            "message": verdict.get("message", "")[:300]}


if __name__ == "__main__":
    for name in sys.argv[1:]:
        for row in check(name):
            print(json.dumps(row), flush=True)
