"""Grading a library's kernels as a submission: a thin wrapper in the kata's signature, written
to a file and graded on the GPU like anyone's. What each task is expected to get:

- "pass": every case correct, no cheat named;
- "rule": failed as the rule broken (`torch_outside_kernels`: PyTorch finished the kernels'
  partials or counted integer inputs), no cheat named;
- "limit: WHY": the library's documented limit fails some cases (said in WHY); no cheat named;
- "stored low: WHY": fails only in float16/bfloat16 cases, each diagnosed `low_precision`, since
  the library keeps a float32 output in the input's dtype (said in WHY);
- "absent": the library has no such op; the wrapper raises NotImplementedError.

No grade of a library's kernels may name a cheat: they are honest work, whatever rule they break."""

from __future__ import annotations

import json
import os
from pathlib import Path

from grader.grading.runner import grade
from grader.kata.catalog import get_kata

FAILED = ("fail", "error")


def grade_wrapper(tmp_path: Path, kata: str, source: str, only_cases=None):
    path = tmp_path / "solution.py"
    path.write_text(source)
    result = grade(get_kata(kata), path, "gpu", only_cases=only_cases)
    _record(kata, result)
    return result


def _record(kata: str, result) -> None:
    """With EXTERNAL_VERDICTS set to a file, append each task's verdicts there (one JSON line a
    grade), so a GPU run's expectations can be read and corrected without another run."""
    target = os.environ.get("EXTERNAL_VERDICTS")
    if not target:
        return
    cases = [{"task": c.task, "case": c.name, "dtype": c.dtype, "status": c.status,
              "diagnosis": c.diagnosis, "cheat": c.cheat, "speedup": c.speedup,
              "message": c.message[:400]} for c in result.cases]
    line = {"kata": kata, "status": result.status, "cheats": result.cheats,
            "message": result.message[:400], "cases": cases}
    with open(target, "a") as out:
        out.write(json.dumps(line, default=str) + "\n")


def check(result, expected: dict[str, str]) -> None:
    """Every task's cases as `expected` says, and no cheat anywhere."""
    assert result.cheats == [], (result.cheats, result.message)
    for task, want in expected.items():
        cases = [c for c in result.cases if c.task == task and c.status not in ("skipped", "not_run")]
        failed = [(c.name, c.dtype, c.diagnosis, c.message[:300]) for c in cases if c.status in FAILED]
        assert cases, f"{task}: no case ran"
        if want == "pass":
            assert not failed, (task, failed)
        elif want == "rule":
            assert failed and all(f[2] == "torch_outside_kernels" for f in failed), (task, failed)
        elif want.startswith("stored low: "):
            assert failed and all(f[1] in ("float16", "bfloat16") and f[2] == "low_precision"
                                  for f in failed), (task, failed)
        elif want == "absent":
            assert all(f[2] == "not_implemented" for f in failed), (task, failed)
        else:
            assert want.startswith("limit: "), want  # failures allowed, never a cheat
