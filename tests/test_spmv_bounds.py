"""The spmv reference touches only its arguments' memory and writes every output element
(tests/spmv_bounds.py: a bounds-checking interpreter, in a fresh process). A GPU faults on a stray
read only when the tensor begins its allocation, so a grade can pass and a GPU run crash."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_spmv_reference_stays_in_bounds():
    env = dict(os.environ, PYTHONPATH=str(TESTS.parent), TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, str(TESTS / "spmv_bounds.py")], capture_output=True,
                          text=True, env=env, cwd=TESTS.parent, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(rows) == 16
    for row in rows:
        assert not row["oob"], row
        assert row["unwritten"] == 0, row
        assert row["ok"], row
