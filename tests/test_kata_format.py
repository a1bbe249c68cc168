"""The kata format: validation errors, the documented examples, and a fixture kata that exercises
what the first three katas do not (tasks x2, scalars, in-place lists, two outputs, exact ints)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from conftest import FIXTURES
from grader.grading.runner import grade
from grader.kata import catalog
from grader.kata.costexpr import CostExpressionError, evaluate
from grader.kata.format import KataFormatError, load_kata, parse_kata

ROOT = Path(__file__).resolve().parent.parent


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
    assert quant.tasks[0].forbidden_casts == ("float8_e4m3fn",)


def test_an_argument_holding_a_dtype_chooses_the_output_dtype():
    import torch

    from grader.judge.compare import compare_values
    from grader.judge.inputs import output_dtype

    kinds = {raw["name"]: raw for raw in documented_examples()}
    quant = parse_kata(kinds["quant_int8"], Path("katas/quant_int8"), Path("r.py"))
    quantize, dequantize = quant.tasks
    (out,) = dequantize.outputs
    assert out.dtype == "dtype" and dequantize.args == ("q", "scale", "dtype")
    inputs = {"q": torch.zeros(2, 3, dtype=torch.int8), "scale": torch.ones(2, 1),
              "dtype": torch.float16}
    assert output_dtype(out, inputs) == torch.float16
    assert output_dtype(out, dict(inputs, dtype=torch.bfloat16)) == torch.bfloat16
    # An output named after a tensor argument still takes that tensor's dtype.
    assert output_dtype(quantize.outputs[0], {"x": torch.ones(2, dtype=torch.float16)}) == torch.int8
    # Integer outputs against an unrounded truth: the nearest integer, or either neighbour of a
    # value within rtol of a .5 boundary.
    tol = quantize.tolerance("int8")
    assert (tol.atol, tol.rtol) == (0.5, 1e-6)
    truth = torch.tensor([2.4, 2.5, -2.5, 100.5 - 5e-5, 126.9], dtype=torch.float64)

    def ok(values):
        got = torch.tensor(values, dtype=torch.int8)
        return compare_values(got, truth, "q", mode="allclose", atol=tol.atol, rtol=tol.rtol).ok

    assert ok([2, 2, -2, 100, 127]) and ok([2, 3, -3, 101, 127])
    assert not ok([3, 2, -2, 100, 127]) and not ok([2, 2, -2, 100, 126])


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

    from grader.judge.checker import Checker
    kinds = {raw["name"]: raw for raw in documented_examples()}
    task = parse_kata(kinds["rms_norm_backward"], Path("katas/rms_norm_backward"), Path("r.py")).tasks[0]
    checker = Checker.__new__(Checker)  # compare() needs no spec: the truth is handed in
    checker.device = "cpu"
    inputs = {"dy": torch.zeros(2, 3), "x": torch.zeros(2, 3), "weight": torch.zeros(3),
              "rstd": torch.ones(2)}
    truth = (torch.zeros(2, 3, dtype=torch.float64), torch.zeros(3, dtype=torch.float64))
    # 5e-3 off: inside dweight's own atol (1e-2), far outside the task's float32 atol (1e-5).
    saved = {"dx": [torch.zeros(2, 3)], "dweight": [torch.full((3,), 5e-3)]}
    assert checker.compare(task, inputs, saved, task.cases[0].name, truth)["ok"]
    saved = {"dx": [torch.full((2, 3), 5e-3)], "dweight": [torch.zeros(3)]}
    verdict = checker.compare(task, inputs, saved, task.cases[0].name, truth)
    assert not verdict["ok"] and "'dx'" in verdict["message"]


def test_the_workspace_readme_lists_tolerances_by_output():
    from grader.kata.catalog import get_kata
    from grader.results.report import render_workspace_readme
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
    # Fine at 4-byte elements, a division by zero at 2-byte ones (the float16 cases' floor).
    (lambda r: r["tasks"][0]["cost"].update(bytes="3 * n * itemsize / (itemsize - 2)"),
     "cost at itemsize 2: '3 * n * itemsize / (itemsize - 2)' fails: division by zero"),
    (lambda r: r["tasks"][0]["cost"].update(bytes="(itemsize - 8) ** 0.5"), "is not a real number"),
    (lambda r: r["tasks"][0]["cost"].update(bytes="n * 1e308 * 1e10"), "is not finite"),
    # The worker evaluates a memory budget at the case's dtype's element size too.
    (lambda r: r["tasks"][0].update(memory_budget={"bytes": "n * itemsize / (itemsize - 2)"}),
     "memory_budget: 'n * itemsize / (itemsize - 2)' fails: division by zero"),
    (lambda r: r["tasks"][0]["cases"]["hidden"].append({"name": "one", "n": 3}), "unique"),
    (lambda r: r["tasks"][0]["cases"]["hidden"].append({"name": "x", "n": 3, "modes": ["tpu"]}), "unknown mode"),
    (lambda r: r["tasks"][0].update(check="check_add"), "check must be {property: FUNCTION}"),
    (lambda r: r["tasks"][0].update(check={"property": 3}), "check must be {property: FUNCTION}"),
    (lambda r: r["tasks"][0].update(check={"property": "f", "mode": "x"}), "check must be {property: FUNCTION}"),
    (lambda r: r.update(gpu_memory_gib=0), "gpu_memory_gib must be a positive number"),
    (lambda r: r.update(gpu_memory_gib="72 GB"), "gpu_memory_gib must be a positive number"),
    (lambda r: r.update(gpu_memory_gib=True), "gpu_memory_gib must be a positive number"),
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


def test_a_task_skipped_whole_in_a_mode_is_not_graded_there():
    from grader.results.schema import CaseResult, TaskResult
    from grader.results.scoring import summarise_task, tasks_correct

    def task(name, *statuses):
        cases = [CaseResult(task=name, name=f"c{i}", dtype="float32", shape=None, hidden=False,
                            status=s) for i, s in enumerate(statuses)]
        t = TaskResult(name=name, threshold=1.0, baseline="eager", cases=cases, correct=False)
        summarise_task(t, 0.85)
        return t

    fp8_on_the_interpreter = task("fp8", "skipped", "skipped")
    assert tasks_correct([task("int8", "pass", "skipped"), fp8_on_the_interpreter])
    assert not tasks_correct([task("int8", "pass", "fail"), fp8_on_the_interpreter])
    assert not tasks_correct([fp8_on_the_interpreter])  # nothing ran: no verdict, no pass


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
def test_fixture_kata_catches_format_level_bugs(fixture_katas, wrong, message, tmp_path):
    # The wrong files borrow the fixture's reference kernels; the sandbox keeps a kata root's
    # reference/ out of the worker's reach, so the kernels travel beside the file, as a
    # learner's own helper module would.
    shutil.copyfile(FIXTURES / "reference" / "toy_multi.py", tmp_path / "toy_multi.py")
    shutil.copyfile(FIXTURES / "wrong" / wrong, tmp_path / wrong)
    result = _grade_fixture(tmp_path / wrong)
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


def test_first_call_outputs_are_handed_over_as_copies(fixture_katas, monkeypatch):
    """On a GPU the worker hands outputs over by reference (CUDA IPC). An in-place output is an
    input buffer, and the second checked call writes new results into it before the checker
    reads the first call's (so may a returned output the submission reuses across calls): so
    the first call's outputs go over as copies."""
    import torch

    from grader.sandbox import case_runner as worker
    runner = worker.CaseRunner.__new__(worker.CaseRunner)
    runner.task = catalog.get_kata("toy_multi").tasks[0]  # sgd_step: params updated in place
    runner.device, runner.shared = "cuda", []
    handed = []
    monkeypatch.setattr(worker.handover, "share", lambda t: handed.append(t) or {})
    monkeypatch.setattr(worker.torch.cuda, "synchronize", lambda: None)
    params = [torch.arange(4.0), torch.arange(3.0)]
    runner._save({"params": params}, copy_first=True)  # the first call
    assert [t.data_ptr() for t in handed] != [p.data_ptr() for p in params]
    assert all(torch.equal(t, p) for t, p in zip(handed, params))
    handed.clear()
    runner._save({"params": params})  # the second call: nothing overwrites its outputs
    assert [t.data_ptr() for t in handed] == [p.data_ptr() for p in params]


def test_every_builtin_kata_declares_its_measured_gpu_memory():
    # A learner on a smaller GPU is warned before the grade and told why a case ran out of
    # memory (grader.kata.gpu_memory_fit); compile-ahead helpers start only where it leaves room.
    undeclared = [k.name for k in catalog.all_katas() if not k.gpu_memory_gib]
    assert not undeclared, f"declare gpu_memory_gib (measured: docs/PERFORMANCE.md) in {undeclared}"
    raw = _minimal()
    raw.pop("gpu_memory_gib")  # optional in the format: None, and no warning is ever given
    assert parse_kata(raw, Path("katas/vector_add"), Path("reference/vector_add.py")).gpu_memory_gib is None


def test_every_builtin_kata_loads():
    for kata in catalog.all_katas():
        assert load_kata(kata.directory).name == kata.name


def test_no_spec_imports_torch_dynamo_when_it_loads():
    # Every grade loads its kata's spec in the worker and in the checker: torch._dynamo (pulled
    # in by a decorator such as @torch.compiler.disable) cost flash_attention's grades seconds
    # of start-up on a GPU machine. A fresh interpreter, since this one may have loaded it.
    import subprocess
    import sys

    script = (
        "import sys, torch\n"
        "from grader.kata import catalog\n"
        "from grader.judge.checker import load_spec\n"
        "heavy = []\n"
        "for kata in catalog.all_katas():\n"
        "    load_spec(kata)\n"
        "    if 'torch._dynamo' in sys.modules and not heavy:\n"
        "        heavy.append(kata.name)\n"
        "print(heavy)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", f"these specs import torch._dynamo when they load: {out.stdout}"


def test_documented_property_check_example_dropout():
    """The "Property checks" example: parsed with its property function, and the dropout kata
    itself declares the same one."""
    raw = {r["name"]: r for r in documented_examples()}["dropout"]
    kata = parse_kata(raw, Path("katas/dropout"), Path("reference/dropout.py"))
    task = kata.tasks[0]
    assert task.property_fn == "check_dropout"
    assert [c.params["seed"] for c in task.cases] == [1234, "per_call", 23]
    assert catalog.get_kata("dropout").tasks[0].property_fn == "check_dropout"
    assert all(t.property_fn is None for t in catalog.get_kata("vector_add").tasks)


def test_documented_property_function_sketch_dropout():
    """The sketch of a property function in docs/KATA_FORMAT.md runs and means what it says."""
    import torch

    text = (ROOT / "docs" / "KATA_FORMAT.md").read_text()
    section = text.split("## Property checks", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    namespace = {}
    exec(compile(code, "KATA_FORMAT.md", "exec"), namespace)
    check = namespace["check_dropout"]
    x = torch.rand(4, 64, generator=torch.Generator().manual_seed(0)) + 0.5
    keep = torch.rand(4, 64, generator=torch.Generator().manual_seed(1)) >= 0.5
    right = torch.where(keep, x * 2, 0.0)
    tol = {"out": (0.0, 1e-6)}

    def call(out, seed=7, x=x):
        return {"inputs": {"x": x, "p": 0.5, "seed": seed}, "outputs": {"out": out}}

    assert check([call(right), call(torch.where(keep, 2 * (x + 1), 0.0), x=x + 1)], tol)["ok"]
    assert not check([call(torch.where(keep, x, 0.0))], tol)["ok"]  # the scale forgotten
    other = torch.where(~keep, 2 * x, 0.0)
    assert "same seed" in check([call(right), call(other)], tol)["message"]
    assert check([call(right), call(other, seed=8)], tol)["ok"]


def _scan_example(**tolerance):
    raw = {raw["name"]: raw for raw in documented_examples()}["scan_example"]
    if tolerance:
        raw = yaml.safe_load(yaml.safe_dump(raw))
        raw["tasks"][0]["tolerance"] = {"float32": tolerance}
    return parse_kata(raw, Path("katas/scan_example"), Path("r.py")).tasks[0]


def test_a_tolerance_expression_is_evaluated_per_case():
    import math
    task = _scan_example()
    small, long_row = task.cases
    assert task.tolerance("float32", case=small).rtol == pytest.approx(1e-6 * math.log2(1000))
    assert task.tolerance("float32", case=long_row).rtol == pytest.approx(24e-6)
    assert task.tolerance("float32", case=small).atol == 1e-6
    assert task.tolerance("float32").rtol == "1e-6 * max(1, log2(N))"  # no case: as written
    assert task.outputs[0].scale_fn == "summed_magnitude"


@pytest.mark.parametrize("rule, error", [
    ({"atol": 0, "rtol": "1e-6 * K"}, "case 'small'.*'K'"),
    ({"atol": 0, "rtol": "__import__('os')"}, "only arithmetic"),
    ({"atol": 0, "rtol": "1e-6 *"}, "cannot parse"),
    ({"atol": "-1e-3 * N", "rtol": 0}, "negative"),
    ({"atol": True, "rtol": 0}, "number or an expression"),
])
def test_a_bad_tolerance_expression_is_refused_when_the_kata_loads(rule, error):
    with pytest.raises(KataFormatError, match=error):
        _scan_example(**rule)


def test_the_scale_judges_a_cancelling_sum_by_its_terms():
    import torch

    from grader.judge.checker import Checker
    task = _scan_example()
    checker = Checker.__new__(Checker)
    checker.device = "cpu"
    x = torch.tensor([[1000.0, -1000.0, 1e-3]])

    class Spec:
        @staticmethod
        def summed_magnitude(x):
            return x.double().abs().cumsum(-1)
    checker.spec = Spec
    truth = (x.double().cumsum(-1),)
    # The running sum after two terms is 0; a float32 scan may leave ~1e-4 there. Judged by
    # |expected| that fails; judged by the 2000 summed, it is well inside rtol.
    got = {"out": [truth[0].float() + torch.tensor([[0.0, 1e-4, 1e-4]])]}
    assert checker.compare(task, {"x": x}, got, "small", truth)["ok"]
    raw = {raw["name"]: raw for raw in documented_examples()}["scan_example"]
    raw = yaml.safe_load(yaml.safe_dump(raw))
    raw["tasks"][0]["returns"] = [{"name": "out"}]
    no_scale = parse_kata(raw, Path("katas/scan_example"), Path("r.py")).tasks[0]
    verdict = checker.compare(no_scale, {"x": x}, got, "small", truth)
    assert not verdict["ok"]
    # A real error is still caught under the scale.
    bad = {"out": [truth[0].float() + torch.tensor([[0.0, 0.5, 0.0]])]}
    verdict = checker.compare(task, {"x": x}, bad, "small", truth)
    assert not verdict["ok"] and "of the summed magnitude" in verdict["message"]


def test_the_allowance_widens_each_element_and_names_its_near_miss():
    import torch

    from grader.judge.checker import Checker
    raw = {raw["name"]: raw for raw in documented_examples()}["scan_example"]
    raw = yaml.safe_load(yaml.safe_dump(raw))
    raw["tasks"][0]["returns"] = [{"name": "out", "allowance": "slack",
                                   "near_miss": "a constant rounded on the device"}]
    task = parse_kata(raw, Path("katas/scan_example"), Path("r.py")).tasks[0]
    assert task.outputs[0].allowance_fn == "slack" and task.outputs[0].near_miss
    checker = Checker.__new__(Checker)
    checker.device = "cpu"
    x = torch.tensor([[1.0, 2.0, 3.0]])

    class Spec:
        @staticmethod
        def slack(x):
            return torch.full(x.shape, 1e-3, dtype=torch.float64)

        @staticmethod
        def reference(x):
            return x.double().cumsum(-1)
    checker.spec = Spec
    truth = (x.double().cumsum(-1),)
    inside = {"out": [truth[0].float() + 5e-4]}
    assert checker.compare(task, {"x": x}, inside, "small", truth)["ok"]
    near = {"out": [truth[0].float() + 3e-3]}
    verdict = checker.compare(task, {"x": x}, near, "small", truth)
    assert not verdict["ok"] and "allowance for honest rounding" in verdict["message"]
    found = checker.diagnosis(task, {"x": x}, near, verdict, "float32")
    assert found.code == "near_miss" and "a constant rounded on the device" in found.message, found
    far = {"out": [truth[0].float() + torch.tensor([[0.0, 0.5, 0.0]])]}
    verdict = checker.compare(task, {"x": x}, far, "small", truth)
    assert checker.diagnosis(task, {"x": x}, far, verdict, "float32").code != "near_miss"


def test_cost_expressions_refuse_calls_outside_the_safe_set():
    assert evaluate("sqrt(K) * 2", {"K": 16}) == 8.0
    with pytest.raises(CostExpressionError):
        evaluate("open('x')", {})
    with pytest.raises(CostExpressionError):
        evaluate("sqrt(-1)", {})


def _newton_schulz_example():
    raw = {raw["name"]: raw for raw in documented_examples()}["newton_schulz_example"]
    return parse_kata(raw, Path("katas/newton_schulz_example"), Path("r.py")).tasks[0]


def test_a_norm_compared_output_parses_with_its_tolerance_per_case():
    task = _newton_schulz_example()
    (out,) = task.outputs
    assert out.compare == "norm" and out.norm == "0.01 + 0.02 * steps + 0.3 / min(M, N)"
    small, one_step, bench = task.cases
    # Whatever the dtype: (atol 0, rtol TOL), TOL evaluated on the case.
    for dtype in ("bfloat16", "float32"):
        tol = task.tolerance(dtype, out, small)
        assert tol.atol == 0.0 and tol.rtol == pytest.approx(0.01 + 0.1 + 0.3 / 64)
    assert task.tolerance("bfloat16", out, one_step).rtol == pytest.approx(0.01 + 0.02 + 0.15)
    assert task.tolerance("bfloat16", out, bench).rtol == pytest.approx(0.11 + 0.3 / 8192)
    assert task.tolerance("bfloat16", out).rtol == out.norm  # no case: as written


def _norm_output_checker():
    """A CPU checker, the Newton-Schulz task, a float64 truth with a noise direction, its inputs
    and the normwise tolerance of its small case."""
    import torch

    from grader.judge.checker import Checker
    checker = Checker.__new__(Checker)
    checker.device = "cpu"
    truth = torch.randn(64, 96, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    noise = torch.randn(64, 96, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    return _newton_schulz_example(), checker, truth, noise, {"g": truth.float(), "steps": 5}, 0.01 + 0.1 + 0.3 / 64


def test_the_checker_compares_a_norm_output_as_a_whole():
    import torch

    task, checker, truth, noise, inputs, tol = _norm_output_checker()

    def saved(rel):
        return {"out": [(truth + rel * noise * truth.norm() / noise.norm()).to(torch.bfloat16)]}
    verdict = checker.compare(task, inputs, saved(0.9 * tol), "small", (truth,))
    assert verdict["ok"] and verdict["max_rel_err"] == pytest.approx(0.9 * tol, rel=0.02)
    verdict = checker.compare(task, inputs, saved(1.2 * tol), "small", (truth,))
    assert not verdict["ok"] and "relative Frobenius error" in verdict["message"]
    assert f"tolerance {tol:g}" in verdict["message"] and verdict["leaf"]["mode"] == "norm"
    found = checker.diagnosis(task, inputs, saved(1.2 * tol), verdict, "float32")
    assert found.code == "wrong_values" and "relative Frobenius error" in found.message


@pytest.mark.parametrize("compare, error", [
    ({"norm": -0.1}, "negative"),
    ({"norm": "0.1 * K"}, "case 'small'.*'K'"),
    ({"norm": "__import__('os')"}, "only arithmetic"),
    ({"norm": 0.1, "ulp": 1}, "{norm: TOL} alone"),
    ({"norm": True}, "number or an expression"),
])
def test_a_bad_norm_tolerance_is_refused_when_the_kata_loads(compare, error):
    raw = {raw["name"]: raw for raw in documented_examples()}["newton_schulz_example"]
    raw = yaml.safe_load(yaml.safe_dump(raw))
    raw["tasks"][0]["returns"][0]["compare"] = compare
    with pytest.raises(KataFormatError, match=error):
        parse_kata(raw, Path("katas/newton_schulz_example"), Path("r.py"))


def test_a_norm_output_takes_no_tolerance_table_nor_scale():
    raw = {raw["name"]: raw for raw in documented_examples()}["newton_schulz_example"]
    for extra, error in (({"tolerance": {"bfloat16": {"atol": 0, "rtol": 0.1}}}, "not from `tolerance`"),
                         ({"scale": "magnitude"}, "allclose outputs only"),
                         ({"allowance": "slack"}, "allclose outputs only"),
                         ({"allowance": "not a name"}, "must name a function")):
        bad = yaml.safe_load(yaml.safe_dump(raw))
        bad["tasks"][0]["returns"][0].update(extra)
        with pytest.raises(KataFormatError, match=re.escape(error)):
            parse_kata(bad, Path("katas/newton_schulz_example"), Path("r.py"))


def test_the_workspace_readme_says_a_norm_output_is_compared_as_a_whole():
    from grader.kata.catalog import get_kata
    from grader.results.report import render_workspace_readme
    text = render_workspace_readme(get_kata("muon"))
    assert "- how each output is compared:" in text
    assert "`out`: normwise" in text and "||got - truth||_F / ||truth||_F <= 0.01 + 0.02 * steps" in text


def _cross_entropy_example(**budget):
    raw = yaml.safe_load(yaml.safe_dump({raw["name"]: raw for raw in documented_examples()}["cross_entropy"]))
    if budget:
        raw["tasks"][0]["memory_budget"] = budget["budget"]
    return parse_kata(raw, Path("katas/cross_entropy"), Path("r.py")).tasks[0]


def test_a_memory_budget_is_parsed_and_evaluated_per_case():
    task = _cross_entropy_example()
    budget = task.memory_budget
    assert budget.what == "2% of the logits, plus 1 MiB" and "float32 copy" in budget.advice
    assert budget.limit(task.case("bench").params, itemsize=2) == pytest.approx(
        0.02 * 8192 * 128256 * 2 + 2 ** 20)
    assert budget.limit(task.case("small").params, itemsize=4) == pytest.approx(0.02 * 8000 * 4 + 2 ** 20)
    # A bare number is the bytes; a task that declares nothing has no budget.
    assert _cross_entropy_example(budget=1048576).memory_budget.limit({}, itemsize=2) == 1048576
    adamw = {raw["name"]: raw for raw in documented_examples()}["adamw"]
    assert all(t.memory_budget is None for t in parse_kata(adamw, Path("katas/adamw"), Path("r.py")).tasks)


@pytest.mark.parametrize("budget, error", [
    ({"bytes": "0.02 * B * K"}, "case 'small'.*'K'"),
    ({"what": "2% of the logits"}, "needs 'bytes'"),
    ({"bytes": "1", "limit": 2}, "unknown key.*limit"),
    ({"bytes": "__import__('os')"}, "only arithmetic"),
    ({"bytes": "-0.02 * B * V"}, "negative"),
    ({"bytes": True}, "number or an expression"),
    ({"bytes": "1", "advice": 3}, "advice must be text"),
    ([1, 2], "memory_budget must be"),
])
def test_a_bad_memory_budget_is_refused_when_the_kata_loads(budget, error):
    with pytest.raises(KataFormatError, match=error):
        _cross_entropy_example(budget=budget)


def test_the_workspace_readme_states_the_memory_budget_and_where_it_is_checked():
    from grader.results.report import render_workspace_readme
    text = render_workspace_readme(catalog.get_kata("cross_entropy"))
    assert "memory budget" in text and "0.02 * B * V * itemsize" in text
    assert "checked on a GPU only" in text
    assert "memory budget:" not in render_workspace_readme(catalog.get_kata("softmax"))


def _with_timed_rows(name: str, value):
    raw = yaml.safe_load(yaml.safe_dump({r["name"]: r for r in documented_examples()}[name]))
    raw["tasks"][0]["timed_rows"] = value
    return parse_kata(raw, Path("katas") / name, Path("r.py")).tasks[0]


def test_timed_rows_are_parsed_from_the_documented_example():
    from grader.kata.format import TimedRows
    attention = {r["name"]: r for r in documented_examples()}["attention_backward_example"]
    task = parse_kata(attention, Path("katas/attention_backward_example"), Path("r.py")).tasks[0]
    assert task.timed_rows == TimedRows(dim=2, count=512)
    assert _cross_entropy_example().timed_rows is None


@pytest.mark.parametrize("value", [
    {"dim": 2}, {"dim": -1, "count": 8}, {"dim": 0, "count": 0}, {"dim": True, "count": 8},
    {"dim": 0, "count": 8.5}, [2, 512], {"dim": 0, "count": 8, "seed": 1},
])
def test_a_bad_timed_rows_is_refused_when_the_kata_loads(value):
    with pytest.raises(KataFormatError, match="timed_rows must be"):
        _with_timed_rows("cross_entropy", value)


def test_timed_rows_need_a_ground_truth():
    with pytest.raises(KataFormatError, match="needs a ground truth"):
        _with_timed_rows("dropout", {"dim": 0, "count": 8})


def test_timed_rows_refuse_an_output_compared_by_norm():
    raw = yaml.safe_load(yaml.safe_dump({r["name"]: r for r in documented_examples()}["newton_schulz_example"]))
    raw["tasks"][0]["timed_rows"] = {"dim": 0, "count": 8}
    with pytest.raises(KataFormatError, match="norm"):
        parse_kata(raw, Path("katas/newton_schulz_example"), Path("r.py"))


def test_every_timed_rows_task_can_ask_its_spec_for_rows():
    # The checker calls the reference and every scale function with rows=: a spec without it
    # would crash the grade's first timed check, not the kata's load.
    import inspect

    from grader.judge.checker import load_spec

    users = 0
    for kata in catalog.all_katas():
        spec = None
        for task in (t for t in kata.tasks if t.timed_rows):
            spec = spec or load_spec(kata)
            for name in [task.reference_fn] + [o.scale_fn for o in task.outputs if o.scale_fn]:
                assert "rows" in inspect.signature(getattr(spec, name)).parameters, (kata.name, name)
            users += 1
    assert users >= 1


def test_the_checker_reports_the_tolerance_used_per_output():
    import torch

    task, checker, truth, noise, inputs, tol = _norm_output_checker()
    got = (truth + 0.5 * tol * noise * truth.norm() / noise.norm()).to(torch.bfloat16)
    verdict = checker.compare(task, inputs, {"out": [got]}, "small", (truth,))
    assert verdict["ok"] and verdict["tolerance_used"]["out"] == pytest.approx(0.5, rel=0.02)
