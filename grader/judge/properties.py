"""Property checks: judging outputs that have no single right answer.

Some tasks cannot be graded against a ground truth. Dropout's mask is random: any generator is
right as long as every element is 0 or x / (1 - p), about a fraction 1 - p is kept, the same seed
gives the same mask and another seed another one. Such a task declares, in kata.yaml,

    check: {property: FUNCTION}

and the checker (trusted: it never imports the submission) calls spec.FUNCTION on the inputs it
regenerated from the grade's seed and on the outputs the worker saved, in place of comparing them
with spec.reference (which such a task need not have). docs/KATA_FORMAT.md documents it:

    FUNCTION(calls: list[dict], tolerance: dict[str, tuple[float, float]]) -> dict

- `calls`: the calls judged together, in call order. A checked case gives two: the first call,
  then the second one the worker makes on the same buffers holding new contents. Its scalar
  arguments are make_inputs' from the second draw: a scalar make_inputs takes from the case (a
  seed: 7) is the same in both calls, one it draws from the generator changes. A sampled timed
  call is judged alone (one entry). Each entry is {"inputs": {...}, "outputs": {...}}: the inputs
  as make_inputs returned them, each output by name as a tensor on the checker's device (a list
  output as a list of tensors). Outputs arrive already checked to exist with the declared dtype.
- `tolerance`: {output name: (atol, rtol)}, the task's tolerance for that output's dtype.
- Returns {"ok": bool, "message": str}, the message saying what is wrong in words a candidate can
  act on, and optionally max_abs_err, max_rel_err, mismatched, total (shown in the report).
"""

from __future__ import annotations

import torch

from grader.judge.inputs import output_dtype

FIGURES = ("max_abs_err", "max_rel_err", "mismatched", "total")


def judge(spec, task, calls: list[tuple[dict, dict]], device: str, case=None) -> dict:
    """The checker's verdict {ok, message, max_abs_err, max_rel_err, mismatched, total} on
    calls = [(inputs, saved outputs), ...] of a task that declares a property check."""
    prepared = []
    for inputs, saved in calls:
        outputs = {}
        for output in task.outputs:
            leaves = saved.get(output.name)
            if not isinstance(leaves, list) or not leaves or \
                    not all(isinstance(t, torch.Tensor) for t in leaves):
                return _verdict(False, f"'{output.name}' is missing from the saved outputs")
            dtype = output_dtype(output, inputs)
            for leaf in leaves:
                if leaf.dtype != dtype:
                    return _verdict(False, f"'{output.name}' has dtype {_name(leaf.dtype)}, "
                                           f"expected {_name(dtype)}")
            leaves = [t.to(device) for t in leaves]
            outputs[output.name] = leaves[0] if len(leaves) == 1 else leaves
        prepared.append({"inputs": inputs, "outputs": outputs})
    first_inputs = calls[0][0]
    tolerance = {}
    for output in task.outputs:
        tol = task.tolerance(_name(output_dtype(output, first_inputs)), output, case)
        tolerance[output.name] = (tol.atol, tol.rtol)
    try:
        raw = getattr(spec, task.property_fn)(prepared, tolerance)
    except Exception as exc:  # noqa: BLE001 - outputs the check cannot even read are wrong outputs
        return _verdict(False, f"the property check could not judge the outputs "
                               f"({type(exc).__name__}: {exc})")
    if not isinstance(raw, dict) or "ok" not in raw:
        raise TypeError(f"{task.property_fn} must return a dict with 'ok' and 'message', got {raw!r}")
    ok = bool(raw["ok"])
    message = str(raw.get("message") or ("" if ok else "the outputs fail the property check"))
    verdict = _verdict(ok, message)
    for key in FIGURES:
        value = raw.get(key)
        if value is not None:
            verdict[key] = int(value) if key in ("mismatched", "total") else float(value)
    verdict["mismatches"] = list(raw.get("mismatches", []))
    return verdict


def _verdict(ok: bool, message: str) -> dict:
    return dict(dict.fromkeys(FIGURES), ok=ok, message=message, mismatches=[])


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
