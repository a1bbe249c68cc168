"""The panel of honest formulations (tests/honest/) on a GPU: the cases that separate the
formulations, in every dtype and task the kata grades (the interpreter skips bfloat16, and the
FP8 tasks of quantize and matmul_lowp), with the GPU's own exp2, sqrt and division, under three
seeds (all of them under the first, the first two under the others), as
tests/test_honest_panel.py does on the interpreter."""

from __future__ import annotations

import re

import pytest
import triton

from conftest import kata_of_wrong
from grader.grading.runner import grade
from grader.kata.catalog import get_kata
from test_honest_panel import FILES, SEEDS, panel_cases


def crashes_the_compiler(path) -> bool:
    """A variant that crashes this Triton's compiler on a GPU says so: `# gpu-compiler-crash: 3.6`
    (the versions, comma-separated, and why). Such a variant is still honest: its cases must be
    diagnosed compiler_error, never a bug or a cheat of the learner's."""
    found = re.search(r"^# gpu-compiler-crash:\s*([\d., ]+)", path.read_text(), flags=re.M)
    versions = [v.strip() for v in found.group(1).split(",") if v.strip()] if found else []
    return any(triton.__version__.startswith(v) for v in versions)


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_honest_variant_passes_on_the_gpu(path):
    kata = get_kata(kata_of_wrong(path))
    cases = panel_cases(path)
    crashed = False
    for seed in SEEDS:
        result = grade(kata, path, "gpu", seed=seed, only_cases=cases if seed == SEEDS[0] else cases[:2])
        failed = [(c.name, c.dtype, c.diagnosis, c.message) for c in result.cases
                  if c.status not in ("pass", "skipped")]
        assert result.cheats == [] and result.cheat is None, (seed, result.cheats)
        if crashes_the_compiler(path):  # only some shapes crash it (prefix_sum: the long rows)
            broken = [c for c in result.cases if c.status in ("fail", "error")]
            assert all(c.diagnosis == "compiler_error" for c in broken), (seed, failed)
            crashed = crashed or bool(broken)
            continue
        # The panel's cases are checked cases only: nothing is timed, and what the panel holds is
        # that every case passes.
        assert result.correct and not failed, (seed, result.message, failed)
        assert any(c.status == "pass" for c in result.cases)
    assert crashed or not crashes_the_compiler(path), "the compiler crash it is marked with was not seen"
