"""`pip install .` must give a working `kata`: build the wheel, install it into a fresh virtual
environment, and use it from there (katas, references and templates travel inside it)."""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ["pyproject.toml", "README.md", "grader", "katas", "reference", "templates"]


def run(*cmd, cwd: Path) -> subprocess.CompletedProcess:
    # Outside the checkout and without PYTHONPATH, so only the installed package can be imported.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, cwd=cwd, env=env)
    assert proc.returncode == 0, f"{cmd} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.mark.slow
def test_wheel_installs_into_a_fresh_venv_and_grades(tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    for name in SHIPPED:  # build from a copy: the checkout stays free of build/ and egg-info
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, source / name)
    dist = tmp_path / "dist"
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", dist,
        source, cwd=tmp_path)
    wheel = next(dist.glob("triton_kata-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for needed in ("grader/cli/main.py", "grader/sandbox/worker.py", "grader/judge/checker.py",
                   "grader/katas/softmax/kata.yaml", "grader/katas/tracks.yaml",
                   "grader/katas/softmax/spec.py", "grader/katas/rms_norm/stub.py",
                   "grader/reference/vector_add.py", "grader/templates/report.html.j2",
                   "grader/templates/leaderboard.html.j2", "grader/templates/leaderboard.md.j2"):
        assert needed in names, f"{needed} missing from the wheel"
    assert "grader/batch/engine.py" in names, "grader.batch (kata batch) missing from the wheel"

    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    python, kata = venv / "bin" / "python", venv / "bin" / "kata"
    purelib = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])",
                       cwd=tmp_path).stdout.strip())
    # The heavy dependencies (torch, triton) come from this environment through a .pth file, so
    # the test downloads nothing; the wheel itself is installed into the new venv.
    outer = {sysconfig.get_paths()["purelib"], *site.getsitepackages()}
    (purelib / "outer_env.pth").write_text("\n".join(sorted(outer)) + "\n")
    # ensurepip's own (older) setuptools would shadow the one torch requires.
    run(python, "-m", "pip", "uninstall", "-y", "-q", "setuptools", cwd=tmp_path)
    # --ignore-installed: the outer environment may hold triton-kata too; the wheel must win.
    run(python, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--ignore-installed", wheel,
        cwd=tmp_path)

    where = run(python, "-c", "import grader.paths as p; print(p.data_root())", cwd=tmp_path).stdout.strip()
    assert Path(where).resolve().is_relative_to(venv.resolve()), where
    listing = run(kata, "list", cwd=tmp_path).stdout
    assert "vector_add" in listing and "softmax" in listing and "rms_norm" in listing
    warmup = run(kata, "list", "--track", "warmup", cwd=tmp_path).stdout  # the tracks file travels too
    assert "Track warmup" in warmup and "vector_add" in warmup and "matmul" not in warmup

    work = tmp_path / "work"
    run(kata, "new", "vector_add", "--dir", work, cwd=tmp_path)
    shutil.copyfile(ROOT / "reference" / "vector_add.py", work / "vector_add" / "solution.py")
    graded = run(kata, "grade", work / "vector_add", "--interpret", "--json",
                 "--report", work / "report.html", cwd=work)
    assert json.loads(graded.stdout)["status"] == "pass"
    assert "vector_add" in (work / "report.html").read_text()

    # Installed, the references sit inside the grader package, in site-packages beside torch:
    # the sandbox carves them out of what the worker may read (docs/SCORING.md, "The sandbox").
    from grader.sandbox import lockdown
    if lockdown.landlock_abi() >= 1:
        for door in ("softmax_reference_import", "softmax_reference_by_path"):
            cheat = work / door / "softmax" / "solution.py"
            cheat.parent.mkdir(parents=True)
            shutil.copyfile(ROOT / "tests" / "cheats" / "sandbox" / f"{door}.py", cheat)
            proc = subprocess.run([str(kata), "grade", str(cheat.parent), "--interpret", "--json"],
                                  capture_output=True, text=True, cwd=work,
                                  env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
            graded = json.loads(proc.stdout)
            assert graded["status"] != "pass" and graded["sandbox"]["protections"]["reads"]["held"]
            doors = [line for line in graded["output"].splitlines() if line.startswith("DOOR ")]
            assert doors and not [line for line in doors if " OPEN" in line], doors
            assert any(str(venv) in line or "grader.reference" in line for line in doors), doors
