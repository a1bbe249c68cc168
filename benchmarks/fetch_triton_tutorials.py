"""Put Triton's tutorials (python/tutorials/*.py of github triton-lang/triton) into .tutorials/ at
the repository root, where tests/external/test_triton_tutorials*.py grade their kernels. The
folder is ignored: third-party code never enters the repository.

    python benchmarks/fetch_triton_tutorials.py GIT_DIR [REF]

GIT_DIR is a clone of triton-lang/triton (bare or not). REF defaults to the release the GPU
machine runs: the branch release/3.6.x, else the tag v3.6.0, else HEAD. The commit read goes to
.tutorials/COMMIT."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / ".tutorials"
FOLDER = "python/tutorials/"
PREFERRED = ["release/3.6.x", "origin/release/3.6.x", "v3.6.0"]


def git(git_dir: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", git_dir, *args], check=True, capture_output=True,
                          text=True).stdout


def pick_ref(git_dir: str) -> str:
    for ref in PREFERRED:
        probe = subprocess.run(["git", "--git-dir", git_dir, "rev-parse", "--verify", "-q", ref + "^{commit}"],
                               capture_output=True, text=True)
        if probe.returncode == 0:
            return ref
    return "HEAD"


def main(argv: list[str]) -> int:
    if not 1 <= len(argv) <= 2:
        print(__doc__, file=sys.stderr)
        return 2
    git_dir = argv[0]
    if Path(git_dir, ".git").is_dir():  # a work tree: its git directory
        git_dir = str(Path(git_dir, ".git"))
    ref = argv[1] if len(argv) == 2 else pick_ref(git_dir)
    commit = git(git_dir, "rev-parse", ref + "^{commit}").strip()
    # Only the tutorials themselves, not gluon/ or other folders below.
    names = [n for n in git(git_dir, "ls-tree", "--name-only", commit, FOLDER).split()
             if n.endswith(".py") and "/" not in n[len(FOLDER):]]
    TARGET.mkdir(exist_ok=True)
    for name in names:
        (TARGET / Path(name).name).write_text(git(git_dir, "show", f"{commit}:{name}"))
    (TARGET / "COMMIT").write_text(f"{commit} {ref}\n")
    print(f"{len(names)} tutorials of {ref} ({commit}) in {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
