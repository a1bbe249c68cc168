"""A panel of honest formulations (tests/honest/<kata>_<variant>.py) passes: kernels written
another way than the reference, as learners write them (constants computed on the device,
exp(x - lse), base 2, three passes, a division by sqrt instead of rsqrt, atomics, other
accumulation orders). A tolerance that fails one of them is a defect of the kata
(docs/SCORING.md, "How tolerances are set").

Each variant names the cases that separate the formulations (`# panel-cases: a, b`, the most
telling first): on the interpreter it is graded on all of them under one seed and on the first
two under two more seeds (a whole interpreter grade of a softmax variant takes minutes). When
written, the adamw, cross_entropy, softmax, paged_decode, flash_attention, quantize, muon and
matmul_lowp variants passed whole interpreter grades, the others a wider set of cases than their panel's; the interpreter's time limit stops
one program per row on a thousand rows (prefix_sum's many_tiny_rows, rms_norm_backward's
many_rows), so the panel leaves those cases out. Where the interpreter cannot run a task at
all (quantize's and matmul_lowp's FP8, bfloat16 anywhere), the variant still implements it and
says so: the same panel cases grade it on a GPU.
tests/gpu/test_gpu_honest_panel.py grades the same panel cases on a GPU, bfloat16 and FP8 included.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import TESTS, kata_of_wrong
from grader.grading.runner import grade
from grader.kata.catalog import get_kata

HONEST = TESTS / "honest"
FILES = sorted(HONEST.glob("*.py"))
SEEDS = (1, 2, 3)
# Katas whose honest formulations differ in their rounding: each has at least three variants.
PANEL_KATAS = ("adamw", "cross_entropy", "softmax", "layer_norm", "rms_norm", "rms_norm_backward",
               "paged_decode", "prefix_sum", "reduce", "flash_attention", "quantize", "muon",
               "matmul_lowp")


def panel_cases(path: Path) -> list[str]:
    found = re.search(r"^# panel-cases:\s*(.+)$", path.read_text(), flags=re.M)
    return [c.strip() for c in found.group(1).split(",")] if found else []


def test_every_panel_kata_has_three_formulations():
    per_kata = {k: [p.stem for p in FILES if kata_of_wrong(p) == k] for k in PANEL_KATAS}
    assert all(len(v) >= 3 for v in per_kata.values()), per_kata
    assert all(panel_cases(p) for p in FILES), "every variant names its panel cases"


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_honest_variant_passes_under_three_seeds(path):
    kata = get_kata(kata_of_wrong(path))
    cases = panel_cases(path)
    for seed in SEEDS:
        result = grade(kata, path, "interpret", seed=seed, only_cases=cases if seed == SEEDS[0] else cases[:2])
        failed = [(c.name, c.dtype, c.message) for c in result.cases if c.status not in ("pass", "skipped")]
        assert result.status == "pass" and not failed, (seed, result.message, failed)
        assert result.cheats == [] and result.cheat is None, (seed, result.cheats)
        assert any(c.status == "pass" for c in result.cases)


@pytest.mark.parametrize("seed", SEEDS)
def test_the_allowance_does_not_excuse_a_trap(seed):
    # L2 regularisation instead of decoupled decay errs by lr * wd * p on the param of a
    # one-element tensor: near the allowance for constants computed on the device. Its moments
    # are far off, so it is no near miss; large_weight_decay puts it 250x outside.
    path = TESTS / "wrong" / "adamw_l2_regularisation.py"
    result = grade(get_kata("adamw"), path, "interpret", seed=seed,
                   only_cases=["one_element", "large_weight_decay"], keep_going=True)
    failed = {c.name for c in result.cases if c.status == "fail"}
    assert "large_weight_decay" in failed and result.cheats == []
    assert "near_miss" not in {d["code"] for d in result.diagnoses}, result.diagnoses


def test_a_grade_reports_the_tolerance_each_output_used():
    # The figure benchmarks/honest_envelope.py reads (docs/SCORING.md, "The measured envelope"):
    # per output, the worst error over what the tolerance allows there, <= 1 on a pass.
    kata = get_kata("adamw")
    result = grade(kata, kata.reference_path, "interpret", seed=1, only_cases=["one_element"])
    ran = [c for c in result.cases if c.status == "pass"]
    assert ran and result.status == "pass"
    for case in ran:
        assert set(case.tolerance_used) == {"params", "exp_avgs", "exp_avg_sqs"}, case.tolerance_used
        assert all(0 < used <= 1 for used in case.tolerance_used.values()), case.tolerance_used
