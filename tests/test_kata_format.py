"""The kata format: validation errors, the documented examples, and a fixture kata that exercises
what the first three katas do not (tasks x2, scalars, in-place lists, two outputs, exact ints)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from grader import catalog
from grader.costexpr import CostExpressionError, evaluate
from grader.kata import KataFormatError, load_kata, parse_kata
from grader.runner import grade

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def documented_examples() -> list[dict]:
    text = (ROOT / "docs" / "KATA_FORMAT.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", text, flags=re.S)
    return [yaml.safe_load(b) for b in blocks]


@pytest.mark.parametrize("raw", documented_examples(), ids=lambda r: r["name"])
def test_documented_declarations_parse(raw):
    kata = parse_kata(raw, Path("katas") / raw["name"], Path("reference") / f"{raw['name']}.py")
    assert kata.tasks and all(t.cases for t in kata.tasks)
    for task in kata.tasks:
        for case in task.cases:
            nbytes, _ = task.cost(case, itemsize=2)
            assert nbytes > 0


def test_documented_examples_cover_the_catalogue_to_come():
    kinds = {raw["name"]: raw for raw in documented_examples()}
    assert {"adamw", "spmv_csr", "quant_fp8"} <= set(kinds)
    adamw = parse_kata(kinds["adamw"], Path("katas/adamw"), Path("r.py"))
    assert adamw.tasks[0].inplace == ("param", "exp_avg", "exp_avg_sq")
    quant = parse_kata(kinds["quant_fp8"], Path("katas/quant_fp8"), Path("r.py"))
    assert [(o.compare, o.ulp) for o in quant.tasks[0].outputs] == [("ulp", 1), ("allclose", 0)]


def test_an_output_may_declare_its_own_tolerance():
    kinds = {raw["name"]: raw for raw in documented_examples()}
    kata = parse_kata(kinds["rms_norm_backward"], Path("katas/rms_norm_backward"), Path("r.py"))
    task = kata.tasks[0]
    dx, dweight = task.outputs
    assert dx.tolerances == {} and task.tolerance("float32", dx) == task.tolerance("float32")
    assert task.tolerance("float32", dweight).atol == 1e-2
    assert task.tolerance("float32", dweight).rtol == 1e-4
    assert task.tolerance("bfloat16", dweight) == task.tolerance("bfloat16")  # falls back


def test_the_checker_grades_an_output_by_its_own_tolerance():
    import torch

    from grader.checker import Checker
    kinds = {raw["name"]: raw for raw in documented_examples()}
    task = parse_kata(kinds["rms_norm_backward"], Path("katas/rms_norm_backward"), Path("r.py")).tasks[0]
    checker = Checker.__new__(Checker)  # compare() needs no spec: the truth is handed in
    checker.device = "cpu"
    inputs = {"dy": torch.zeros(2, 3), "x": torch.zeros(2, 3), "weight": torch.zeros(3),
              "rstd": torch.ones(2)}
    truth = (torch.zeros(2, 3, dtype=torch.float64), torch.zeros(3, dtype=torch.float64))
    # 5e-3 off: inside dweight's own atol (1e-2), far outside the task's float32 atol (1e-5).
    saved = {"dx": [torch.zeros(2, 3)], "dweight": [torch.full((3,), 5e-3)]}
    assert checker.compare(task, inputs, saved, truth)["ok"]
    saved = {"dx": [torch.full((2, 3), 5e-3)], "dweight": [torch.zeros(3)]}
    verdict = checker.compare(task, inputs, saved, truth)
    assert not verdict["ok"] and "'dx'" in verdict["message"]


def test_the_workspace_readme_lists_tolerances_by_output():
    from grader.catalog import get_kata
    from grader.report import render_workspace_readme
    text = render_workspace_readme(get_kata("layer_norm"))
    assert "`dweight`: float32 atol 0.005, rtol 5e-05" in text  # the output's own
    assert "`dx`: float32 atol 1e-05, rtol 1e-05; float16" in text  # the task's, per dtype
    reduce = render_workspace_readme(get_kata("reduce"))
    assert "`index`: exact" in reduce and "`out`: float32 atol 0.002, rtol 2e-05\n" in reduce


def test_an_output_tolerance_needs_atol_and_rtol():
    raw = _minimal()
    raw["tasks"][0]["returns"][0]["tolerance"] = {"float32": {"atol": 1.0}}
    with pytest.raises(KataFormatError, match="needs atol and rtol"):
        parse_kata(raw, Path("katas/vector_add"), Path("r.py"))
    raw["tasks"][0]["returns"][0]["tolerance"] = {"float33": {"atol": 1.0, "rtol": 0.0}}
    with pytest.raises(KataFormatError, match="unknown dtype 'float33'"):
        parse_kata(raw, Path("katas/vector_add"), Path("r.py"))


def _minimal() -> dict:
    return yaml.safe_load((ROOT / "katas" / "vector_add" / "kata.yaml").read_text())


@pytest.mark.parametrize("mutate, message", [
    (lambda r: r.pop("title"), "missing required key 'title'"),
    (lambda r: r.update(difficulty="extreme"), "difficulty must be one of"),
    (lambda r: r.update(hints=["only one"]), "exactly 3 hints"),
    (lambda r: r["tasks"][0].update(dtypes=["float31"]), "unknown dtype 'float31'"),
    (lambda r: r["tasks"][0].update(signature="add(x, y)"), "signature must start with 'vector_add('"),
    (lambda r: r["tasks"][0].pop("returns"), "neither 'returns' nor 'inplace'"),
    (lambda r: r["tasks"][0].update(inplace=["z"]), "in-place output 'z' is not an argument"),
    (lambda r: r["tasks"][0]["cost"].update(bytes="3 * n * __import__('os')"), "only arithmetic"),
    (lambda r: r["tasks"][0]["cost"].update(bytes="3 * m"), "'m'"),
    (lambda r: r["tasks"][0]["cases"]["hidden"].append({"name": "one", "n": 3}), "unique"),
    (lambda r: r["tasks"][0]["cases"]["hidden"].append({"name": "x", "n": 3, "modes": ["tpu"]}), "unknown mode"),
])
def test_invalid_declarations_are_rejected(mutate, message):
    raw = _minimal()
    mutate(raw)
    with pytest.raises(KataFormatError, match=re.escape(message)):
        parse_kata(raw, Path("katas/vector_add"), Path("reference/vector_add.py"))


def test_cost_expressions_are_arithmetic_only():
    assert evaluate("2 * M * N * itemsize + N", {"M": 3, "N": 4, "itemsize": 2}) == 52
    with pytest.raises(CostExpressionError):
        evaluate("open('x')", {})


def test_skip_rules_and_interpreter_defaults():
    kata = parse_kata(documented_examples()[2], Path("katas/quant_fp8"), Path("r.py"))
    task = kata.tasks[0]
    small = task.cases[0]
    assert "fp8" in task.skip_reason("interpret", "float32", small)
    assert "bf16" in task.skip_reason("interpret", "bfloat16", small)
    assert task.skip_reason("gpu", "bfloat16", small) is None
    assert "GPU only" in task.skip_reason("interpret", "bfloat16", task.cases[-1])


@pytest.fixture()
def fixture_katas(monkeypatch):
    monkeypatch.setenv("TRITON_KATA_PATH", str(FIXTURES))
    catalog._load.cache_clear()
    yield
    catalog._load.cache_clear()


def _grade_fixture(path: Path):
    return grade(catalog.get_kata("toy_multi"), path, "interpret")


def test_fixture_kata_reference_passes_every_task(fixture_katas):
    result = _grade_fixture(FIXTURES / "reference" / "toy_multi.py")
    assert result.status == "pass", result.message
    assert result.cheat is None and result.cheats == []
    assert [t.name for t in result.tasks] == ["sgd_step", "row_max"]
    assert all(t.correct for t in result.tasks)


@pytest.mark.parametrize("wrong, message", [
    ("toy_multi_first_tensor_only.py", "'params[1]':"),
    ("toy_multi_out_of_place.py", "no Triton kernel was launched"),
    ("toy_multi_one_output.py", "row_max must return 2 values (values, indices)"),
    ("toy_multi_int32_indices.py", "'indices' has dtype int32, expected int64"),
])
def test_fixture_kata_catches_format_level_bugs(fixture_katas, wrong, message):
    result = _grade_fixture(FIXTURES / "wrong" / wrong)
    assert result.status == "fail"
    assert message in result.message


def test_inputs_other_than_inplace_must_stay_unchanged(fixture_katas, tmp_path):
    solution = tmp_path / "solution.py"
    solution.write_text(
        (FIXTURES / "reference" / "toy_multi.py").read_text()
        + "\n_sgd = sgd_step\n\ndef sgd_step(params, grads, lr):\n    _sgd(params, grads, lr)\n"
          "    grads[-1].zero_()\n")
    result = _grade_fixture(solution)
    assert result.status == "fail" and "input 'grads[" in result.message


def test_every_builtin_kata_loads():
    for kata in catalog.all_katas():
        assert load_kata(kata.directory).name == kata.name
