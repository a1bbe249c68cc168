"""The panel of honest formulations (tests/honest/) on a GPU: every checked case (not the timed
bench cases) under one seed, and the cases that separate the formulations under two more, in
float32 and the low precisions the interpreter cannot run. tests/test_honest_panel.py runs the
separating cases on the interpreter."""

from __future__ import annotations

import pytest
import torch

from conftest import kata_of_wrong
from grader.grading.runner import grade
from grader.kata.catalog import get_kata
from test_honest_panel import FILES, panel_cases

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _checked_cases(kata) -> list[str]:
    return sorted({c.name for t in kata.tasks for c in t.cases if not c.bench and "gpu" in c.modes})


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_honest_variant_passes_on_the_gpu(path):
    kata = get_kata(kata_of_wrong(path))
    for seed, cases in ((1, _checked_cases(kata)), (2, panel_cases(path)), (3, panel_cases(path))):
        result = grade(kata, path, "gpu", seed=seed, only_cases=cases)
        failed = [(c.name, c.dtype, c.message) for c in result.cases if c.status not in ("pass", "skipped")]
        assert result.status == "pass" and not failed, (seed, result.message, failed)
        assert result.cheats == [] and result.cheat is None, (seed, result.cheats)
