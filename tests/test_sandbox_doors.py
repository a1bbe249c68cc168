"""The doors a stranger's submission tries (tests/cheats/sandbox/): the kit's reference by path or
as a module, the home folder, a sibling candidate's file in a batch, a TCP connection on the
loopback. Each finds the door closed, and a submission that needed what is behind it fails its
grade. Each file prints `DOOR <name> OPEN|CLOSED ...` for every attempt; `# door: PROTECTION`
names the protection that must have held. (On a GPU: tests/gpu/test_gpu_sandbox.py.)"""

from __future__ import annotations

import json
import os
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


def assert_closed(result, name: str) -> None:
    """Every door NAME.py tried was closed, and the protection it declares held."""
    lines = door_lines(result.output)
    assert lines, result.output
    assert not [line for line in lines if " OPEN" in line], lines
    assert result.sandbox["protections"][protection_of(DOORS / f"{name}.py")]["held"], result.sandbox


@needs_landlock
@pytest.mark.parametrize("name", ["softmax_reference_by_path", "softmax_reference_import"])
def test_the_reference_cannot_be_borrowed(name, tmp_path):
    result = grade_door(name, tmp_path)
    assert_closed(result, name)
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
def test_the_hidden_cases_and_the_request_are_out_of_reach(tmp_path):
    # The worker read kata.yaml and spec.py before the lockdown; the request stays in the grade's
    # folder, outside the subfolders the worker may read.
    result = grade_door("vector_add_reads_hidden_cases", tmp_path)
    assert_closed(result, "vector_add_reads_hidden_cases")
    closed = [line for line in door_lines(result.output) if "hidden-cases CLOSED" in line]
    assert any("kata.yaml" in line for line in closed) and any("request.json" in line for line in closed), closed
    assert result.status == "pass", result.message


@needs_landlock
def test_home_cannot_be_listed(tmp_path):
    result = grade_door("vector_add_lists_home", tmp_path)
    assert_closed(result, "vector_add_lists_home")
    assert result.status == "pass", result.message  # the kernel is honest: only the door is shut


@needs_seccomp
def test_no_connection_on_the_loopback(tmp_path):
    result = grade_door("vector_add_tcp_loopback", tmp_path)
    assert_closed(result, "vector_add_tcp_loopback")
    assert {"DOOR tcp-loopback CLOSED", "DOOR udp-loopback CLOSED"} <= {
        " ".join(line.split()[:3]) for line in door_lines(result.output)}
    assert result.status == "pass", result.message


@needs_landlock
def test_a_sibling_candidates_file_is_out_of_reach_in_a_batch(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton" / "cache"))
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
    assert protection_of(DOORS / "vector_add_reads_siblings.py") == "reads"
    assert {"DOOR siblings-list CLOSED", "DOOR sibling-file CLOSED", "DOOR other-caches CLOSED"} <= {
        " ".join(line.split()[:3]) for line in lines}, lines
    # Each submission compiled into a Triton cache of its own, beside the shared one.
    assert str(tmp_path / "triton" / "kata-batch") in next(l for l in lines if "other-caches" in l)
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


HOME_CACHE = '''
import os
from pathlib import Path

# A library that keeps a cache under the home folder (FlagGems: ~/.flaggems) must work.
cache = Path.home() / ".flaggems_like" / "config.txt"
cache.parent.mkdir(parents=True, exist_ok=True)
cache.write_text("cached")
print("HOME", os.environ["HOME"], os.environ["XDG_CACHE_HOME"], cache.read_text())
'''


def test_the_worker_has_a_home_of_its_own(tmp_path):
    path = tmp_path / "vector_add" / "solution.py"
    path.parent.mkdir()
    path.write_text((TESTS.parent / "reference" / "vector_add.py").read_text() + HOME_CACHE)
    result = grade(get_kata("vector_add"), path, "interpret", only_cases=ONE_CASE)
    assert result.status == "pass", (result.message, result.output)
    line = next(line for line in result.output.splitlines() if line.startswith("HOME "))
    _, home, cache, text = line.split()
    assert "kata-grade-" in home and cache.startswith(home) and text == "cached"
    assert not (Path.home() / ".flaggems_like").exists()


TOOL_CHAIN = r'''
import os, subprocess, sys, sysconfig, tempfile
from pathlib import Path
grade_dir, submission = Path(sys.argv[1]), Path(sys.argv[2])
os.environ["TMPDIR"] = str(grade_dir / "tmp")
os.environ["TRITON_CACHE_DIR"] = str(grade_dir / "tmp" / "triton-cache")  # cold
import triton, triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from grader.sandbox import confine
status = confine.lock_down(grade_dir, submission, "cpu")
print("HELD", sorted(k for k, v in status["protections"].items() if v["held"]))

@triton.jit
def kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.exp(tl.load(x_ptr + offs, mask=offs < n)), mask=offs < n)

source = ASTSource(fn=kernel, signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                   constexprs={"BLOCK": 128})
compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32))  # ptxas, libdevice, the cache
print("CUBIN", len(compiled.asm["cubin"]))
c_file = grade_dir / "tmp" / "launcher.c"  # as Triton builds its launchers: the C compiler, Python.h
c_file.write_text('#include <Python.h>\nstatic struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "m"};\n'
                  'PyMODINIT_FUNC PyInit_m(void) { return PyModule_Create(&m); }\n')
built = subprocess.run(["gcc", str(c_file), "-shared", "-fPIC", "-I" + sysconfig.get_paths()["include"],
                        "-o", str(grade_dir / "tmp" / "m.so")], capture_output=True, text=True)
print("GCC", built.returncode, built.stderr[-300:])
print("LDCONFIG", subprocess.run(["ldconfig", "-p"], capture_output=True).returncode)
'''


@needs_landlock
@needs_seccomp
@pytest.mark.skipif(not shutil.which("gcc"), reason="no C compiler")
def test_the_gpu_tool_chain_works_inside_the_confinement(tmp_path):
    # No GPU needed: Triton compiles to a cubin for an H100 with its own ptxas, and builds C as
    # it does for its launchers, all inside the worker's confinement (renames into the cache too).
    import subprocess
    import sys

    import triton

    if not (Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas").exists():
        pytest.skip("this Triton has no ptxas")
    grade_dir = tmp_path / "kata-grade-x"
    for sub in ("work", "tmp", "outputs"):
        (grade_dir / sub).mkdir(parents=True)
    submission = tmp_path / "submission" / "solution.py"
    submission.parent.mkdir()
    submission.write_text(TOOL_CHAIN)  # the script is the submission: Triton reads its source
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(TESTS.parent)
    ran = subprocess.run([sys.executable, str(submission), str(grade_dir), str(submission)],
                         capture_output=True, text=True, env=env, cwd=grade_dir / "work", timeout=300)
    assert "HELD ['network', 'processes', 'reads', 'writes']" in ran.stdout, ran.stdout + ran.stderr
    assert "CUBIN " in ran.stdout and "GCC 0" in ran.stdout and "LDCONFIG 0" in ran.stdout, ran.stdout + ran.stderr


def test_credentials_stay_out_of_the_workers_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws_secret_value")
    path = tmp_path / "vector_add" / "solution.py"
    path.parent.mkdir()
    path.write_text((TESTS.parent / "reference" / "vector_add.py").read_text()
                    + "\nimport os\nprint('ENV', sorted(os.environ.items()))\n")
    result = grade(get_kata("vector_add"), path, "interpret", only_cases=ONE_CASE)
    assert result.status == "pass" and "ENV" in result.output
    assert "secret_value" not in result.output and "HF_TOKEN" not in result.output


def test_every_door_is_tried():
    tried = {"softmax_reference_by_path", "softmax_reference_import", "vector_add_lists_home",
             "vector_add_reads_siblings", "vector_add_reads_hidden_cases", "vector_add_tcp_loopback"}
    assert {p.stem for p in DOORS.glob("*.py")} == tried
    assert {protection_of(p) for p in DOORS.glob("*.py")} <= {"reads", "writes", "network", "processes"}


ROOT_DOORS = r'''
import ctypes, os, stat, sys
from pathlib import Path
from grader.sandbox import confine
grade_dir, submission = Path(sys.argv[1]), Path(sys.argv[2])
confine.lock_down(grade_dir, submission, "cpu")
libc = ctypes.CDLL(None, use_errno=True)
for name, number in (("bpf", 321), ("keyctl", 250), ("perf_event_open", 298), ("finit_module", 313)):
    result = libc.syscall(number, 0, 0, 0, 0, 0)
    print("DOOR", name, "CLOSED" if result < 0 and ctypes.get_errno() == 1 else "OPEN", ctypes.get_errno())
try:  # a device node for the first disk, in the grade's own folder
    os.mknod(grade_dir / "work" / "disk", stat.S_IFBLK | 0o600, os.makedev(8, 0))
    print("DOOR mknod OPEN")
except OSError as exc:
    print("DOOR mknod CLOSED", exc.strerror)
'''


@needs_landlock
@needs_seccomp
@pytest.mark.skipif(__import__("platform").machine() != "x86_64", reason="x86-64 call numbers")
def test_calls_only_root_could_make_are_refused(tmp_path):
    import subprocess
    import sys

    grade_dir = tmp_path / "kata-grade-x"
    for sub in ("work", "tmp", "outputs"):
        (grade_dir / sub).mkdir(parents=True)
    ran = subprocess.run([sys.executable, "-c", ROOT_DOORS, str(grade_dir), str(tmp_path / "solution.py")],
                         capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(TESTS.parent)),
                         timeout=120)
    lines = door_lines(ran.stdout)
    assert len(lines) == 5 and not [line for line in lines if " OPEN" in line], ran.stdout + ran.stderr


def test_a_compiler_installed_outside_usr_stays_readable(tmp_path, monkeypatch):
    # A GPU machine had gcc under /opt/gcc: Triton's launcher build failed with "Permission
    # denied: '/opt/gcc/bin/gcc'" until the compiler's prefix (its libexec, headers) was allowed.
    from grader.sandbox.readable import compiler_paths

    prefix = tmp_path / "opt" / "gcc"
    (prefix / "bin").mkdir(parents=True)
    gcc = prefix / "bin" / "gcc"
    gcc.write_text("#!/bin/sh\n")
    gcc.chmod(0o755)
    monkeypatch.setenv("PATH", str(prefix / "bin"))
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert prefix in compiler_paths()
    monkeypatch.setenv("HOME", str(prefix / "bin"))  # never the home folder or above it
    assert compiler_paths() == []


def test_every_installed_copy_of_the_references_is_refused(tmp_path, monkeypatch):
    # CI: a checkout's worker walked sys.path to the copy `pip install .` had put in
    # site-packages, and borrowed the reference from there.
    from grader.sandbox.readable import refused_inside_the_grader

    site = tmp_path / "site-packages"
    (site / "grader" / "reference").mkdir(parents=True)
    (site / "grader" / "katas").mkdir()
    monkeypatch.syspath_prepend(str(site))
    hard, _ = refused_inside_the_grader()
    assert site / "grader" / "reference" in hard and site / "grader" / "katas" in hard
