"""Compile-ahead helpers on a GPU (grader/grading/compile_ahead.py; skipped without CUDA).

On the CPU the helpers are tested with real processes under the interpreter, where nothing
compiles. Here they compile: a grade with them must reach the verdict a grade without them
reaches, its helpers must have run cases on the GPU, and none may be left when timing starts."""

from __future__ import annotations

from grader.grading import compile_ahead
from grader.grading.runner import grade
from grader.kata.catalog import get_kata


def test_a_gpu_grade_with_helpers_passes_and_stops_them_before_timing(monkeypatch, tmp_path):
    monkeypatch.setenv(compile_ahead.ENV_SWITCH, "2")
    # Helpers start with the first case, not after it has run 1 s: softmax's checked cases are now
    # quick enough that helpers started at 1 s were caught up with before finishing one (18:27
    # and 18:43 UTC 2026-11-23, docs/PERFORMANCE.md), which says nothing about whether they work.
    monkeypatch.setattr(compile_ahead, "START_AFTER_S", 0.0)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))  # a cold cache
    trace = tmp_path / "trace.txt"
    monkeypatch.setenv("KATA_TRACE", str(trace))
    made = []
    real_init = compile_ahead.Helpers.__init__

    def init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(compile_ahead.Helpers, "__init__", init)
    kata = get_kata("softmax")
    result = grade(kata, kata.reference_path, "gpu")
    assert result.status == "pass" and not result.cheats, result.message
    assert result.speed_measured and result.speedup > 0.9
    helpers = [h for m in made for h in m.helpers]
    assert len(helpers) == 2 and all(h.proc is not None and h.proc.poll() is not None for h in helpers)
    lines = [line.split() for line in trace.read_text().splitlines()]
    ahead = [float(t) for t, op, *_ in (l for l in lines if len(l) >= 2) if op == "ahead"]
    timing = [float(t) for t, op, *_ in (l for l in lines if len(l) >= 2) if op == "timing"]
    assert ahead, f"the helpers ran no case on the GPU (exit statuses {[h.proc.returncode for h in helpers]})"
    assert timing and max(ahead) < min(timing)  # every helper was done before timing began
