"""One clear paragraph for every kind of bad input, never a grader traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli import main

GOOD_KERNEL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def launch(x, y, out):
    add_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, out, x.numel(), BLOCK=1024)
'''


def workspace(tmp_path: Path, body: str) -> Path:
    """A vector_add workspace whose solution.py is GOOD_KERNEL plus body."""
    CliRunner().invoke(main, ["new", "vector_add", "--dir", str(tmp_path)], catch_exceptions=False)
    ws = tmp_path / "vector_add"
    (ws / "solution.py").write_text(GOOD_KERNEL + body)
    return ws


def grade(path, *extra):
    result = CliRunner().invoke(main, ["grade", str(path), "--interpret", "--json", *extra])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


def grade_json(path, *extra):
    result = grade(path, *extra)
    assert result.exit_code == 1, result.output
    data = json.loads(result.output)
    assert "grader/" not in data["message"], "grader internals leaked into the message"
    return data


def test_path_does_not_exist(tmp_path):
    result = CliRunner().invoke(main, ["grade", str(tmp_path / "nope")])
    assert result.exit_code == 2
    assert "Path does not exist" in result.output and "Traceback" not in result.output


def test_kata_name_instead_of_path_suggests_new(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["grade", "softmax"])
    assert result.exit_code == 2 and "kata new softmax" in result.output


def test_not_a_workspace(tmp_path):
    (tmp_path / "solution.py").write_text("x = 1\n")
    result = CliRunner().invoke(main, ["grade", str(tmp_path)])
    assert result.exit_code == 2
    assert "not a kata workspace" in result.output and "kata new" in result.output


def test_workspace_without_solution(tmp_path):
    ws = workspace(tmp_path, "")
    (ws / "solution.py").unlink()
    result = CliRunner().invoke(main, ["grade", str(ws)])
    assert result.exit_code == 2 and "No solution.py" in result.output


def test_unknown_report_extension_is_a_usage_error(tmp_path):
    ws = workspace(tmp_path, "")
    result = CliRunner().invoke(main, ["grade", str(ws), "--report", str(tmp_path / "r.pdf")])
    assert result.exit_code == 2 and ".md or .html" in result.output


def test_syntax_error_names_file_and_line(tmp_path):
    ws = workspace(tmp_path, "\ndef vector_add(x, y)\n    return x\n")
    data = grade_json(ws)
    assert data["status"] == "error"
    lineno = (GOOD_KERNEL + "\ndef vector_add(x, y)\n").count("\n")
    assert f"Syntax error in solution.py, line {lineno}" in data["message"]
    assert "def vector_add(x, y)" in data["message"]


def test_missing_entry_function(tmp_path):
    ws = workspace(tmp_path, "\ndef vectoradd(x, y):\n    return x\n")
    data = grade_json(ws)
    assert data["status"] == "error"
    assert "has no function 'vector_add'" in data["message"] and "vectoradd" in data["message"]


def test_wrong_signature(tmp_path):
    ws = workspace(tmp_path, "\ndef vector_add(x):\n    return x\n")
    data = grade_json(ws)
    assert data["status"] == "error" and "wrong signature" in data["message"]
    assert "vector_add(x: torch.Tensor, y: torch.Tensor)" in data["message"]


def test_exception_traceback_is_trimmed_to_user_code(tmp_path):
    ws = workspace(tmp_path, "\ndef helper(x):\n    raise ValueError('boom')\n\n\ndef vector_add(x, y):\n    return helper(x)\n")
    data = grade_json(ws)
    msg = data["tasks"][0]["cases"][0]["message"]
    assert "ValueError: boom" in msg and 'File "solution.py"' in msg and "in helper" in msg
    assert "grader" not in msg and "site-packages" not in msg


def test_exception_at_import(tmp_path):
    ws = workspace(tmp_path, "\nimport no_such_module_here\n")
    data = grade_json(ws)
    assert data["status"] == "error" and "No module named 'no_such_module_here'" in data["message"]


def test_time_limit_exceeded(tmp_path):
    ws = workspace(tmp_path, "\ndef vector_add(x, y):\n    while True:\n        pass\n")
    data = grade_json(ws, "--timeout", "10")
    assert data["status"] == "error"
    assert "Time limit exceeded" in data["message"] and "vector_add/small/float32" in data["message"]


def test_killed_by_signal(tmp_path):
    ws = workspace(tmp_path, "\nimport ctypes\n\ndef vector_add(x, y):\n    ctypes.string_at(0)\n")
    data = grade_json(ws)
    assert data["status"] == "error" and "SIGSEGV" in data["message"]


def test_os_exit_is_not_a_pass(tmp_path):
    ws = workspace(tmp_path, "\nimport os\n\ndef vector_add(x, y):\n    os._exit(0)\n")
    data = grade_json(ws)
    assert data["status"] == "error" and "os._exit()" in data["message"]
    assert data["score"] == 0


def test_sys_exit_is_not_a_pass(tmp_path):
    ws = workspace(tmp_path, "\nimport sys\n\ndef vector_add(x, y):\n    sys.exit(0)\n")
    data = grade_json(ws)
    assert data["status"] in ("error", "fail") and data["score"] == 0


def test_junk_on_stdout_cannot_forge_a_result(tmp_path):
    fake = json.dumps({"type": "done"})
    body = (f"\nimport sys\nprint({fake!r})\nprint('{{\"status\": \"pass\", \"score\": 100}}')\n"
            "sys.stderr.write('\\x00\\xff junk')\n\ndef vector_add(x, y):\n    print('debug', x.shape)\n"
            "    return x.clone()\n")
    ws = workspace(tmp_path, body)
    data = grade_json(ws)
    assert data["status"] == "fail" and data["score"] == 0
    assert '"score": 100' in data["output"] and "debug" in data["output"]


def test_wrong_output_shape(tmp_path):
    ws = workspace(tmp_path, "\ndef vector_add(x, y):\n    out = torch.empty(x.numel() + 1, dtype=x.dtype)\n"
                   "    return out\n")
    data = grade_json(ws)
    assert "has shape" in data["message"] and "expected" in data["message"]


def test_wrong_output_dtype(tmp_path):
    ws = workspace(tmp_path, "\ndef vector_add(x, y):\n    out = torch.empty_like(x, dtype=torch.float64)\n"
                   "    launch(x, y, out)\n    return out\n")
    data = grade_json(ws)
    assert "has dtype float64, expected float32" in data["message"]


def test_tensor_subclass_rejected(tmp_path):
    ws = workspace(tmp_path, "\nclass Lazy(torch.Tensor):\n    pass\n\n\ndef vector_add(x, y):\n"
                   "    out = torch.empty_like(x)\n    launch(x, y, out)\n    return out.as_subclass(Lazy)\n")
    data = grade_json(ws)
    assert "torch.Tensor subclass" in data["message"]


def test_not_a_tensor(tmp_path):
    ws = workspace(tmp_path, "\ndef vector_add(x, y):\n    return [1.0, 2.0]\n")
    data = grade_json(ws)
    assert "is a list, expected a torch.Tensor" in data["message"]


def test_wrong_device(tmp_path):
    ws = workspace(tmp_path, "\ndef vector_add(x, y):\n    return torch.empty(x.shape, dtype=x.dtype, device='meta')\n")
    data = grade_json(ws)
    assert "is on meta" in data["message"]


def test_unwritten_output_elements_fail(tmp_path):
    # Writes every element but the last: the poisoned (NaN) remainder must be caught.
    ws = workspace(tmp_path, "\ndef vector_add(x, y):\n    out = torch.empty_like(x)\n"
                   "    if x.numel() > 1:\n        launch(x[:-1], y[:-1], out[:-1])\n    return out\n")
    data = grade_json(ws)
    case = data["tasks"][0]["cases"][0]
    assert case["status"] == "fail" and case["mismatched"] == 1
    assert case["mismatches"][0]["index"] == [case["shape"][0] - 1]
    assert case["mismatches"][0]["got"] == "nan"
    assert "never wrote" in case["message"]


def test_mismatch_lists_indices_got_and_expected(tmp_path):
    ws = workspace(tmp_path, "\ndef vector_add(x, y):\n    out = torch.empty_like(x)\n    launch(x, y, out)\n"
                   "    out[::7] = 0\n    return out\n")
    data = grade_json(ws)
    case = data["tasks"][0]["cases"][0]
    assert case["mismatched"] > 10 and len(case["mismatches"]) == 5
    first = case["mismatches"][0]
    assert first["index"] == [0] and first["got"] == 0.0 and isinstance(first["expected"], float)


def test_input_mutation_fails(tmp_path):
    ws = workspace(tmp_path, "\ndef vector_add(x, y):\n    out = torch.empty_like(x)\n    launch(x, y, out)\n"
                   "    y.zero_()\n    return out\n")
    data = grade_json(ws)
    assert "input 'y' was modified" in data["message"]


def test_forbidden_op_through_a_lambda(tmp_path):
    ws = workspace(tmp_path, "\nadd = lambda a, b: a + b\n\ndef vector_add(x, y):\n    return add(x, y)\n")
    data = grade_json(ws)
    assert "forbidden" in data["message"]


def test_forbidden_op_swallowed_is_still_caught(tmp_path):
    ws = workspace(tmp_path, "\ndef vector_add(x, y):\n    try:\n        torch.add(x, y)\n    except Exception:\n"
                   "        pass\n    out = torch.empty_like(x)\n    launch(x, y, out)\n    return out\n")
    data = grade_json(ws)
    assert "forbidden op: torch.add" in data["message"]


def test_flood_of_output_is_trimmed_not_lost(tmp_path):
    ws = workspace(tmp_path, "\nimport sys\nsys.stdout.write('x' * 3_000_000 + '\\nLAST LINE\\n')\n"
                   "\ndef vector_add(x, y):\n    return x.clone()\n")
    data = grade_json(ws)
    assert "bytes trimmed" in data["output"] and data["output"].rstrip().endswith("LAST LINE")
    assert len(data["output"]) < 10_000


def test_broken_kata_definition_is_reported_as_such(tmp_path, monkeypatch):
    import shutil

    from grader import catalog
    from grader.catalog import get_kata
    root = tmp_path / "extra"
    shutil.copytree(get_kata("vector_add").directory, root / "katas" / "bad_kata")
    (root / "katas" / "bad_kata" / "kata.yaml").write_text("name: bad_kata\ntitle: [unclosed\n")
    monkeypatch.setenv("TRITON_KATA_PATH", str(root))
    catalog._load.cache_clear()
    try:
        result = CliRunner().invoke(main, ["show", "bad_kata"])
        assert result.exit_code == 2 and "not valid YAML" in result.output
        result = CliRunner().invoke(main, ["list"])
        assert result.exit_code == 2 and "bad_kata" in result.output
    finally:
        catalog._load.cache_clear()


def test_fault_in_a_kata_spec_is_not_blamed_on_the_submission(tmp_path, monkeypatch):
    import shutil

    from grader import catalog
    from grader.catalog import get_kata
    root = tmp_path / "extra"
    shutil.copytree(get_kata("vector_add").directory, root / "katas" / "spec_bug")
    yaml_path = root / "katas" / "spec_bug" / "kata.yaml"
    yaml_path.write_text(yaml_path.read_text().replace("name: vector_add\n", "name: spec_bug\n", 1))
    spec = root / "katas" / "spec_bug" / "spec.py"
    spec.write_text(spec.read_text().replace('n = case["n"]', 'n = case["no_such_field"]'))
    monkeypatch.setenv("TRITON_KATA_PATH", str(root))
    catalog._load.cache_clear()
    try:
        # Here the grader's own traceback is the useful part, so it is kept.
        result = grade(get_kata("vector_add").reference_path, "--kata", "spec_bug")
        data = json.loads(result.output)
    finally:
        catalog._load.cache_clear()
    assert data["status"] == "error" and "Internal grader error" in data["message"]
    assert "no_such_field" in data["message"]
