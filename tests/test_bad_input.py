"""One clear paragraph for every kind of bad input, never a grader traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from grader.cli.main import main
import kernel_sources

GOOD_KERNEL = kernel_sources.with_launch()


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


# (submission body appended to a working kernel, the status, what the message must say)
MESSAGE_CASES = {
    "missing_entry": ("\ndef vectoradd(x, y):\n    return x\n", "error",
                      ["has no function 'vector_add'", "It defines: launch, vectoradd"]),
    "wrong_signature": ("\ndef vector_add(x):\n    return x\n", "error",
                        ["wrong signature", "vector_add(x: torch.Tensor, y: torch.Tensor)"]),
    "exception_at_import": ("\nimport no_such_module_here\n", "error",
                            ["No module named 'no_such_module_here'"]),
    "killed_by_signal": ("\nimport ctypes\n\ndef vector_add(x, y):\n    ctypes.string_at(0)\n", "error",
                         ["killed by SIGSEGV (segmentation fault)", "vector_add/small/float32"]),
    "wrong_shape": ("\ndef vector_add(x, y):\n    out = torch.empty(x.numel() + 1, dtype=x.dtype)\n"
                    "    launch(x, y, out[:-1])\n    return out\n", "fail", ["has shape (", "expected ("]),
    "wrong_dtype": ("\ndef vector_add(x, y):\n    out = torch.empty_like(x, dtype=torch.float64)\n"
                    "    launch(x, y, out)\n    return out\n", "fail", ["has dtype float64, expected float32"]),
    "tensor_subclass": ("\nclass Lazy(torch.Tensor):\n    pass\n\n\ndef vector_add(x, y):\n"
                        "    out = torch.empty_like(x)\n    launch(x, y, out)\n    return out.as_subclass(Lazy)\n",
                        "fail", ["a Lazy, a torch.Tensor subclass"]),
    "not_a_tensor": ("\ndef vector_add(x, y):\n    return [1.0, 2.0]\n", "fail",
                     ["is a list, expected a torch.Tensor"]),
    "wrong_device": ("\ndef vector_add(x, y):\n    return torch.empty(x.shape, dtype=x.dtype, device='meta')\n",
                     "fail", ["is on meta, expected cpu"]),
    "input_mutation": ("\ndef vector_add(x, y):\n    out = torch.empty_like(x)\n    launch(x, y, out)\n"
                       "    y.zero_()\n    return out\n", "fail", ["input 'y' was modified"]),
    "forbidden_through_lambda": ("\nadd = lambda a, b: a + b\n\ndef vector_add(x, y):\n    return add(x, y)\n",
                                 "fail", ["forbidden op: torch.Tensor.add"]),
    "forbidden_swallowed": ("\ndef vector_add(x, y):\n    try:\n        torch.add(x, y)\n    except Exception:\n"
                            "        pass\n    out = torch.empty_like(x)\n    launch(x, y, out)\n    return out\n",
                            "fail", ["forbidden op: torch.add"]),
}


@pytest.mark.parametrize("case", sorted(MESSAGE_CASES))
def test_bad_submission_gets_a_clear_message(tmp_path, case):
    body, status, fragments = MESSAGE_CASES[case]
    data = grade_json(workspace(tmp_path, body))
    assert data["status"] == status and data["score"] == 0
    for fragment in fragments:
        assert fragment in data["message"]


def test_exception_traceback_is_trimmed_to_user_code(tmp_path):
    ws = workspace(tmp_path, "\ndef helper(x):\n    raise ValueError('boom')\n\n\ndef vector_add(x, y):\n    return helper(x)\n")
    data = grade_json(ws)
    msg = data["tasks"][0]["cases"][0]["message"]
    assert "ValueError: boom" in msg and 'File "solution.py"' in msg and "in helper" in msg
    assert "grader" not in msg and "site-packages" not in msg


def test_time_limit_exceeded(tmp_path):
    ws = workspace(tmp_path, "\ndef vector_add(x, y):\n    while True:\n        pass\n")
    data = grade_json(ws, "--timeout", "10")
    assert data["status"] == "error"
    assert "Time limit exceeded" in data["message"] and "vector_add/small/float32" in data["message"]


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


def test_unwritten_output_elements_fail(tmp_path):
    # Writes every element but the last: the poisoned (NaN) remainder must be caught.
    ws = workspace(tmp_path, "\ndef vector_add(x, y):\n    out = torch.empty_like(x)\n"
                   "    if x.numel() > 1:\n        launch(x[:-1], y[:-1], out[:-1])\n"
                   "    else:\n        launch(x, y, out)\n    return out\n")
    data = grade_json(ws)
    case = data["tasks"][0]["cases"][0]
    assert case["status"] == "fail" and case["mismatched"] == 1
    assert case["mismatches"][0]["index"] == [case["shape"][0] - 1]
    assert case["mismatches"][0]["got"] == "nan"
    assert "never wrote" in case["message"]
    assert case["diagnosis"] == "tail_wrong" and case["cheat"] is None
    assert "element 999 (the last of 1000) was never written" in case["message"]
    assert data["cheats"] == []


def test_mismatch_lists_indices_got_and_expected(tmp_path):
    ws = workspace(tmp_path, "\ndef vector_add(x, y):\n    out = torch.empty_like(x)\n    launch(x, y, out)\n"
                   "    out[::7] = 0\n    return out\n")
    data = grade_json(ws)
    case = data["tasks"][0]["cases"][0]
    assert case["mismatched"] > 10 and len(case["mismatches"]) == 5
    first = case["mismatches"][0]
    assert first["index"] == [0] and first["got"] == 0.0 and isinstance(first["expected"], float)


def test_flood_of_output_is_trimmed_not_lost(tmp_path):
    ws = workspace(tmp_path, "\nimport sys\nsys.stdout.write('x' * 3_000_000 + '\\nLAST LINE\\n')\n"
                   "\ndef vector_add(x, y):\n    return x.clone()\n")
    data = grade_json(ws)
    assert "bytes trimmed" in data["output"] and data["output"].rstrip().endswith("LAST LINE")
    assert len(data["output"]) < 10_000


def test_broken_kata_definition_is_reported_as_such(private_kata):
    folder = private_kata("bad_kata")
    (folder / "kata.yaml").write_text("name: bad_kata\ntitle: [unclosed\n")
    result = CliRunner().invoke(main, ["show", "bad_kata"])
    assert result.exit_code == 2 and "not valid YAML" in result.output
    result = CliRunner().invoke(main, ["list"])
    assert result.exit_code == 2 and "bad_kata" in result.output


def test_fault_in_a_kata_spec_is_not_blamed_on_the_submission(private_kata):
    spec = private_kata("spec_bug") / "spec.py"
    spec.write_text(spec.read_text().replace('n = case["n"]', 'n = case["no_such_field"]'))
    # Here the grader's own traceback is the useful part, so it is kept.
    result = grade(spec.parent.parent.parent / "reference" / "spec_bug.py", "--kata", "spec_bug")
    data = json.loads(result.output)
    assert data["status"] == "error" and "Internal grader error" in data["message"]
    assert "no_such_field" in data["message"]
    assert {d["code"] for d in data["diagnoses"]} == {"internal_error"}  # not the submission's exception


def _grade_with_a_broken_truth(private_kata, name: str, body: str) -> dict:
    """Grade vector_add's reference against a copy of the kata whose ground truth runs `body`
    in the checker instead of computing; the grade's JSON."""
    spec = private_kata(name) / "spec.py"
    spec.write_text(spec.read_text().replace("    return x.double() + y.double()", body, 1))
    result = grade(spec.parent.parent.parent / "reference" / f"{name}.py", "--kata", name)
    data = json.loads(result.output)
    assert data["status"] == "error" and data["cheat"] is None
    return data


def test_a_full_gpu_during_checking_is_named_as_such_not_as_a_grader_bug(private_kata):
    # Several grades on one GPU can leave the checker no memory for a large case: that is the
    # machine's state, and the learner should be told to grade again, not to report a bug.
    data = _grade_with_a_broken_truth(
        private_kata, "gpu_full",
        "    raise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 4.00 GiB')")
    assert data["message"].startswith("The GPU ran out of memory while the grader itself worked")
    assert "Internal grader error" not in data["message"]
    assert "CUDA out of memory" in data["message"] and "Traceback" not in data["message"]
    assert [d["code"] for d in data["diagnoses"]] == ["gpu_busy"]


def test_a_checker_killed_without_a_word_says_how_it_ended(private_kata):
    # SIGKILL leaves no traceback: the exit status is all there is, and most often it means the
    # machine's out-of-memory killer chose the checker.
    data = _grade_with_a_broken_truth(
        private_kata, "checker_killed", "    import os, signal\n    os.kill(os.getpid(), signal.SIGKILL)")
    assert "killed by SIGKILL" in data["message"] and "out of CPU memory" in data["message"]
    assert {d["code"] for d in data["diagnoses"]} == {"internal_error"}
