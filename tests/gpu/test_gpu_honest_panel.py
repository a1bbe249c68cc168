"""The panel of honest formulations (tests/honest/) on a GPU: the cases that separate the
formulations, in every dtype and task the kata grades (the interpreter skips bfloat16, and the
FP8 tasks of quantize and matmul_lowp), with the GPU's own exp2, sqrt and division, under three
seeds (all of them under the first, the first two under the others), as
tests/test_honest_panel.py does on the interpreter."""

from __future__ import annotations

import pytest

from conftest import kata_of_wrong
from grader.grading.runner import grade
from grader.kata.catalog import get_kata
from test_honest_panel import FILES, SEEDS, panel_cases


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_honest_variant_passes_on_the_gpu(path):
    kata = get_kata(kata_of_wrong(path))
    cases = panel_cases(path)
    for seed in SEEDS:
        result = grade(kata, path, "gpu", seed=seed, only_cases=cases if seed == SEEDS[0] else cases[:2])
        failed = [(c.name, c.dtype, c.message) for c in result.cases if c.status not in ("pass", "skipped")]
        assert result.status == "pass" and not failed, (seed, result.message, failed)
        assert result.cheats == [] and result.cheat is None, (seed, result.cheats)
        assert any(c.status == "pass" for c in result.cases)
