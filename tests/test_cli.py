"""The `kata` command line, through click's CliRunner."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from grader.cli.main import main
from grader.kata.catalog import get_kata

COMMANDS = ["list", "show", "new", "grade", "selftest"]


def invoke(*args, **kwargs):
    return CliRunner().invoke(main, list(args), catch_exceptions=False, **kwargs)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help(command):
    result = invoke(command, "--help")
    assert result.exit_code == 0
    assert "Usage:" in result.output and len(result.output.splitlines()) > 3


def test_list_shows_the_catalogue():
    result = invoke("list")
    assert result.exit_code == 0
    for name in ("vector_add", "softmax", "rms_norm"):
        assert name in result.output
    assert "difficulty" in result.output and "min" in result.output


def test_list_filters_by_track(monkeypatch):
    from grader.kata.catalog import kata_dirs
    monkeypatch.setenv("COLUMNS", "200")  # the track's description on one line
    from grader.kata.tracks import load_tracks
    fundamentals = load_tracks(kata_dirs())["fundamentals"]
    result = invoke("list", "--track", "fundamentals")
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"Track fundamentals: {fundamentals.description}")
    listed = {line.split()[0] for line in result.output.splitlines()[4:] if line.strip()}
    assert listed == set(fundamentals.katas) & set(kata_dirs())  # katas still to come are skipped
    assert {"vector_add", "matmul"} <= listed and "cross_entropy" not in listed
    everything = invoke("list", "--track", "all").output
    assert everything.splitlines()[2:] == invoke("list").output.splitlines()
    unknown = invoke("list", "--track", "nope")
    assert unknown.exit_code == 2 and "Unknown track 'nope'" in unknown.output and "llm-training" in unknown.output


def test_show_prints_statement_signature_tolerances_and_public_cases():
    result = invoke("show", "softmax")
    assert result.exit_code == 0
    kata = get_kata("softmax")
    assert kata.tasks[0].signature in result.output
    assert "atol" in result.output and "rtol" in result.output
    public = [c.name for c in kata.tasks[0].cases if not c.hidden]
    hidden = [c.name for c in kata.tasks[0].cases if c.hidden]
    assert all(name in result.output for name in public)
    assert not any(f"| {name} |" in result.output for name in hidden)


def test_show_says_what_pytorch_may_do():
    result = invoke("show", "softmax")
    assert result.exit_code == 0
    assert "What PyTorch may do" in result.output and "torch_compute" in result.output
    assert "allocate tensors" in result.output and "views and metadata" in result.output
    assert "forbidden: torch.softmax" in result.output


def test_show_lists_what_a_kata_also_allows(fixture_katas):
    result = invoke("show", "toy_gemm")
    assert "PyTorch ops this task also allows: aten.constant_pad_nd" in result.output


def test_show_names_the_rule_of_outputs_not_compared_by_tolerance():
    # activations' relu output is compared {ulp: 0}: no tolerance applies to it, and the
    # statement says so instead of listing atol/rtol defaults; its allclose tasks keep theirs.
    result = invoke("show", "activations")
    assert result.exit_code == 0
    relu = result.output.split("## Task `relu`")[1].split("## Task `gelu`")[0]
    gelu = result.output.split("## Task `gelu`")[1].split("## Task `silu`")[0]
    assert "`out` is compared with the ground truth rounded to its dtype: equal values" in relu
    assert "atol" not in relu
    assert "atol" in gelu and "compared with the ground truth rounded" not in gelu


def test_unknown_kata_suggests_the_closest():
    result = CliRunner().invoke(main, ["show", "sofmax"])
    assert result.exit_code == 2
    assert "Did you mean 'softmax'" in result.output and "vector_add" in result.output
    result = CliRunner().invoke(main, ["new", "gemmm"])
    assert result.exit_code == 2 and "Known katas" in result.output


def test_new_creates_stub_readme_and_marker(tmp_path):
    result = invoke("new", "rms_norm", "--dir", str(tmp_path))
    assert result.exit_code == 0
    ws = tmp_path / "rms_norm"
    assert (ws / "solution.py").read_text() == get_kata("rms_norm").stub_path.read_text()
    readme = (ws / "README.md").read_text()
    assert get_kata("rms_norm").tasks[0].signature in readme
    assert (ws / ".kata.yaml").is_file()


def test_new_refuses_to_overwrite_then_force_keeps_a_backup(tmp_path):
    invoke("new", "vector_add", "--dir", str(tmp_path))
    solution = tmp_path / "vector_add" / "solution.py"
    solution.write_text("# my work\n")
    result = CliRunner().invoke(main, ["new", "vector_add", "--dir", str(tmp_path)])
    assert result.exit_code == 1 and "--force" in result.output
    assert solution.read_text() == "# my work\n"
    result = invoke("new", "vector_add", "--dir", str(tmp_path), "--force")
    assert result.exit_code == 0
    assert (tmp_path / "vector_add" / "solution.py.bak").read_text() == "# my work\n"
    assert "NotImplementedError" in solution.read_text()


@pytest.fixture(scope="module")
def solved_workspace(tmp_path_factory):
    root = tmp_path_factory.mktemp("ws")
    invoke("new", "vector_add", "--dir", str(root))
    shutil.copyfile(get_kata("vector_add").reference_path, root / "vector_add" / "solution.py")
    return root / "vector_add"


def test_grade_workspace_passes_with_json(solved_workspace):
    result = invoke("grade", str(solved_workspace), "--interpret", "--json")
    assert result.exit_code == 0
    data = json.loads(result.output)
    for key in ("kata", "status", "mode", "correct", "score", "speedup", "threshold", "tasks"):
        assert key in data
    assert (data["kata"], data["status"], data["mode"], data["correct"]) == ("vector_add", "pass", "interpret", True)
    assert data["score"] == 50 and data["speedup"] is None
    case = data["tasks"][0]["cases"][0]
    for key in ("name", "shape", "dtype", "status", "max_abs_err", "message", "time_ms", "baseline_ms", "speedup"):
        assert key in case
    assert any(s["reason"].startswith("too large") for s in data["skipped"])


def test_grade_defaults_to_the_current_folder(solved_workspace, monkeypatch):
    monkeypatch.chdir(solved_workspace)
    result = invoke("grade", "--interpret")
    assert result.exit_code == 0
    assert "vector_add: PASS" in result.output and "speed not measured" in result.output
    assert "skipped" in result.output


def test_grade_one_case_is_partial_and_not_recorded(solved_workspace, tmp_path):
    db = tmp_path / "results.db"
    result = invoke("grade", str(solved_workspace), "--interpret", "--json", "--case", "pow2_plus_1",
                    "--db", str(db))
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["only_cases"] == ["pow2_plus_1"]
    assert {c["name"] for t in data["tasks"] for c in t["cases"]} == {"pow2_plus_1"}
    history = invoke("history", "--db", str(db))
    assert "vector_add" not in history.output


def test_grade_an_unknown_case_is_a_usage_error(solved_workspace):
    result = CliRunner().invoke(main, ["grade", str(solved_workspace), "--interpret", "--case", "pow2_plus_2"])
    assert result.exit_code == 2
    assert "no case named pow2_plus_2" in result.output and "pow2_plus_1" in result.output


def test_grade_a_solution_file(solved_workspace):
    result = invoke("grade", str(solved_workspace / "solution.py"), "--interpret")
    assert result.exit_code == 0


@pytest.mark.parametrize("suffix", [".md", ".html"])
def test_grade_writes_reports(solved_workspace, tmp_path, suffix):
    report = tmp_path / f"report{suffix}"
    result = invoke("grade", str(solved_workspace), "--interpret", "--report", str(report))
    assert result.exit_code == 0
    text = report.read_text()
    assert "vector_add" in text and "odd_tail" in text and "score = 0 unless" in text
    assert "Speed was not measured" in text and "Skipped cases" in text
    if suffix == ".html":
        assert text.startswith("<!DOCTYPE html>") and "<table>" in text
    else:
        assert text.startswith("# vector_add: PASS")


def test_grade_stub_fails_with_exit_1(tmp_path):
    invoke("new", "softmax", "--dir", str(tmp_path))
    result = CliRunner().invoke(main, ["grade", str(tmp_path / "softmax"), "--interpret"])
    assert result.exit_code == 1
    assert "not implemented" in result.output


def test_failing_report_shows_mismatches(tmp_path):
    invoke("new", "vector_add", "--dir", str(tmp_path))
    from conftest import WRONG
    shutil.copyfile(WRONG / "vector_add_floor_grid.py", tmp_path / "vector_add" / "solution.py")
    report = tmp_path / "r.md"
    result = CliRunner().invoke(main, ["grade", str(tmp_path / "vector_add"), "--interpret",
                                       "--report", str(report)])
    assert result.exit_code == 1
    text = report.read_text()
    assert "FAIL" in text and "Mismatches in" in text and "| Index | Got | Expected |" in text
    # An honest bug: what went wrong and what to try, never "rejected as a cheat".
    assert "## What went wrong" in text and "`tail_wrong`" in text and "Rejected" not in text
    assert "what went wrong:" in result.output and "tail_wrong" in result.output
    assert "triton.cdiv" in result.output and "cheat" not in result.output


def test_gpu_flag_without_cuda_is_a_usage_error(solved_workspace):
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    result = CliRunner().invoke(main, ["grade", str(solved_workspace), "--gpu"])
    assert result.exit_code == 2 and "--interpret" in result.output


def test_interpret_and_gpu_exclude_each_other(solved_workspace):
    result = CliRunner().invoke(main, ["grade", str(solved_workspace), "--gpu", "--interpret"])
    assert result.exit_code == 2


def test_selftest_passes_for_a_kata():
    result = invoke("selftest", "vector_add", "--interpret")
    assert result.exit_code == 0
    assert "vector_add" in result.output and "ok" in result.output


def test_selftest_fails_when_a_reference_is_broken(private_kata):
    # A kata whose "reference" is only the stub: selftest must say so and exit 1.
    private_kata("broken_add", reference=get_kata("vector_add").stub_path)
    result = CliRunner().invoke(main, ["selftest", "broken_add", "--interpret"])
    assert result.exit_code == 1 and "BROKEN" in result.output


def test_grade_any_file_against_a_named_kata():
    from conftest import WRONG
    result = CliRunner().invoke(main, ["grade", str(WRONG / "vector_add_bad_mask.py"), "--kata", "vector_add",
                                       "--interpret"])
    assert result.exit_code == 1 and "FAIL" in result.output
    result = CliRunner().invoke(main, ["grade", str(WRONG / "vector_add_bad_mask.py"), "--kata", "vector_ad"])
    assert result.exit_code == 2 and "Did you mean 'vector_add'" in result.output


def test_html_report_escapes_what_the_submission_printed(tmp_path):
    invoke("new", "vector_add", "--dir", str(tmp_path))
    (tmp_path / "vector_add" / "solution.py").write_text(
        'print("<script>alert(1)</script>")\n\ndef vector_add(x, y):\n    return x.clone()\n')
    report = tmp_path / "r.html"
    CliRunner().invoke(main, ["grade", str(tmp_path / "vector_add"), "--interpret", "--report", str(report)])
    text = report.read_text()
    assert "<script>" not in text and "&lt;script&gt;" in text
