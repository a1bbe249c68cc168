"""The doors a stranger's submission tries (tests/cheats/sandbox/): the kit's reference by path or
as a module, the home folder, a sibling candidate's file in a batch, a TCP connection on the
loopback. Each finds the door closed, and a submission that needed what is behind it fails its
grade. Each file prints `DOOR <name> OPEN|CLOSED ...` for every attempt; `# door: PROTECTION`
names the protection that must have held. (On a GPU: tests/gpu/test_gpu_sandbox.py.)"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import TESTS
from grader.cli.main import main
from grader.grading.runner import grade
from grader.kata.catalog import get_kata
from grader.sandbox import lockdown, seccomp

DOORS = TESTS / "cheats" / "sandbox"
ONE_CASE = ["small"]  # the doors are tried at import: one case is enough
needs_landlock = pytest.mark.skipif(lockdown.landlock_abi() < 1, reason="Landlock is not available in this kernel")
needs_seccomp = pytest.mark.skipif(seccomp.available() is not None, reason="no seccomp socket filter here")


def door_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("DOOR ")]


def protection_of(path: Path) -> str:
    return re.search(r"^# door: (\S+)", path.read_text(), flags=re.M).group(1)


def grade_door(name: str, tmp_path: Path, **kwargs):
    """Grade tests/cheats/sandbox/NAME.py from a folder of its own (as a stranger's submission
    would be: not beside the other test files) under the interpreter."""
    path = tmp_path / "submission" / "solution.py"
    path.parent.mkdir(parents=True)
    shutil.copyfile(DOORS / f"{name}.py", path)
    kata = "softmax" if name.startswith("softmax_") else "vector_add"
    return grade(get_kata(kata), path, "interpret", only_cases=ONE_CASE, **kwargs)


def assert_closed(result, protection: str) -> None:
    lines = door_lines(result.output)
    assert lines, result.output
    assert not [line for line in lines if " OPEN" in line], lines
    assert result.sandbox["protections"][protection]["held"], result.sandbox


@needs_landlock
@pytest.mark.parametrize("name", ["softmax_reference_by_path", "softmax_reference_import"])
def test_the_reference_cannot_be_borrowed(name, tmp_path):
    result = grade_door(name, tmp_path)
    assert_closed(result, "reads")
    assert result.status != "pass" and result.score == 0, result.message


@needs_landlock
def test_the_door_was_there_to_close(tmp_path, monkeypatch):
    # Without Landlock (an older kernel) the same file borrows the reference and passes: the
    # test above can fail.
    monkeypatch.setenv("KATA_SANDBOX_NO_LANDLOCK", "1")
    result = grade_door("softmax_reference_by_path", tmp_path)
    assert any(" OPEN" in line for line in door_lines(result.output)), result.output
    assert result.status == "pass", result.message
    assert not result.sandbox["protections"]["reads"]["held"]


@needs_landlock
def test_home_cannot_be_listed(tmp_path):
    result = grade_door("vector_add_lists_home", tmp_path)
    assert_closed(result, "reads")
    assert result.status == "pass", result.message  # the kernel is honest: only the door is shut


@needs_seccomp
def test_no_connection_on_the_loopback(tmp_path):
    result = grade_door("vector_add_tcp_loopback", tmp_path)
    assert_closed(result, "network")
    assert {"DOOR tcp-loopback CLOSED", "DOOR udp-loopback CLOSED"} <= {
        " ".join(line.split()[:3]) for line in door_lines(result.output)}
    assert result.status == "pass", result.message


@needs_landlock
def test_a_sibling_candidates_file_is_out_of_reach_in_a_batch(tmp_path):
    source = tmp_path / "subs"
    for handle, file in (("alice", DOORS / "vector_add_reads_siblings.py"),
                         ("bob", TESTS.parent / "reference" / "vector_add.py")):
        (source / handle / "vector_add").mkdir(parents=True)
        shutil.copyfile(file, source / handle / "vector_add" / "solution.py")
    ran = CliRunner().invoke(main, ["batch", "grade", str(source), "--interpret", "--engine", "local",
                                    "--db", str(tmp_path / "r.sqlite"), "--json", "--seed", "7"],
                             catch_exceptions=False)
    assert ran.exit_code == 0, ran.output
    alice = next(r["grade"] for r in json.loads(ran.stdout)["results"] if r["handle"] == "alice")
    lines = door_lines(alice["output"])
    assert {"DOOR siblings-list CLOSED", "DOOR sibling-file CLOSED"} <= {" ".join(l.split()[:3]) for l in lines}, lines
    assert alice["sandbox"]["protections"]["reads"]["held"]


def test_a_batch_refuses_a_machine_that_cannot_confine_reads(tmp_path, monkeypatch):
    monkeypatch.setenv("KATA_SANDBOX_NO_LANDLOCK", "1")  # as on a kernel without Landlock
    monkeypatch.setenv("KATA_SANDBOX_NO_SECCOMP", "1")
    source = tmp_path / "subs" / "alice" / "vector_add"
    source.mkdir(parents=True)
    shutil.copyfile(TESTS.parent / "reference" / "vector_add.py", source / "solution.py")
    args = ["batch", "grade", str(tmp_path / "subs"), "--interpret", "--engine", "local",
            "--db", str(tmp_path / "r.sqlite")]
    refused = CliRunner().invoke(main, args, catch_exceptions=False)
    assert refused.exit_code == 2
    assert "cannot confine" in refused.stderr and "reads: " in refused.stderr and "network: " in refused.stderr
    assert "--trust-submissions" in refused.stderr


def test_a_learner_keeps_grading_with_the_weaker_sandbox_stated(tmp_path, monkeypatch):
    monkeypatch.setenv("KATA_SANDBOX_NO_LANDLOCK", "1")
    monkeypatch.setenv("KATA_SANDBOX_NO_SECCOMP", "1")
    path = tmp_path / "vector_add" / "solution.py"
    path.parent.mkdir()
    shutil.copyfile(TESTS.parent / "reference" / "vector_add.py", path)
    ran = CliRunner().invoke(main, ["grade", str(path), "--interpret", "--case", "small"],
                             catch_exceptions=False)
    assert "PASS" in ran.output, ran.output
    assert "reads NOT confined" in ran.output and "network NOT confined" in ran.output
    assert "processes confined" in ran.output
