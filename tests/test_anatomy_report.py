"""The anatomy in the reports: the roofline plot (matplotlib, an optional extra), the per-case
kernel table, the note under the interpreter, and the note saying how to get the plot when
matplotlib is absent. tests/test_report_browser.py renders the page in headless Chromium."""

from __future__ import annotations

import sys

import click
import pytest

from anatomy_factory import anatomy_grade
from grade_factory import make_grade
from grader.results import roofline_plot
from grader.results.report import render_report


def test_the_html_report_has_the_kernel_table_and_escapes_kernel_names():
    html = render_report(anatomy_grade(), "html")
    assert "Speed anatomy" in html and '<table class="kernels">' in html
    assert "<code>add_kernel</code>" in html and "8x1x1" in html
    assert "FillFunctor&lt;float&gt;" in html and "FillFunctor<float>" not in html
    assert "8 programs on 132 SMs: 124 SMs idle" in html  # the advice above it


def test_the_markdown_report_names_the_dominant_kernel_per_case():
    md = render_report(anatomy_grade(), "md")
    assert "## Speed anatomy" in md and "`add_kernel` | 8x1x1 | 4 | 26 | 0 |" in md


def test_the_report_says_where_the_profile_files_are():
    result = anatomy_grade(files={"trace": "case.trace.json", "ptx": "case.add_kernel.ptx", "ttir": "lost.ttir"},
                           copied={"case.trace.json": "/tmp/prof/case.trace.json",
                                   "case.add_kernel.ptx": "/tmp/prof/case.add_kernel.ptx"})
    html = render_report(result, "html")
    assert "Chrome trace of one call (opens in Perfetto) <code>/tmp/prof/case.trace.json</code>" in html
    assert "PTX <code>/tmp/prof/case.add_kernel.ptx</code>" in html
    assert "lost.ttir" not in html  # a file the parent did not copy is not named


def test_under_the_interpreter_the_report_says_why_there_is_no_anatomy():
    result = make_grade("vector_add", mode="interpret")
    for fmt in ("html", "md"):
        text = render_report(result, fmt)
        assert "no anatomy under the triton interpreter" in text.replace("\n", " ").lower()
    assert roofline_plot.roofline(result).svg is None


def test_the_plot_is_an_inline_log_log_svg_with_both_ceilings_and_every_case():
    pytest.importorskip("matplotlib")
    result = anatomy_grade()
    reference = {f"{c.task}/{c.name}/{c.dtype}": c.time_ms * 0.05 for c in result.cases if c.timed}
    plot = roofline_plot.roofline(result, reference)
    assert plot.svg.startswith('<svg class="chart roofline"') and "<?xml" not in plot.svg
    assert "copy 4000 GB/s" in plot.svg and "matmul 700 TFLOP/s" in plot.svg
    assert "arithmetic intensity" in plot.svg and "(reference)" in plot.svg
    assert len(plot.points) == 6  # three cases, each with the reference beside it
    html = render_report(result, "html", reference)
    assert '<figure class="roofline"><svg class="chart roofline"' in html


def test_cases_without_declared_flops_get_a_bandwidth_panel():
    pytest.importorskip("matplotlib")
    plot = roofline_plot.roofline(anatomy_grade("transpose", flops=False))
    assert "Bandwidth (no FLOPs declared)" in plot.svg and "GB/s reached" in plot.svg


def test_without_matplotlib_the_report_says_how_to_get_the_plot(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    html = render_report(anatomy_grade(), "html")
    assert '<svg class="chart roofline"' not in html
    assert 'pip install &#34;triton-kata[plot]&#34;' in html or 'pip install "triton-kata[plot]"' in html
    assert '<table class="kernels">' in html  # the table needs no plotting library


def test_a_grade_with_no_ceilings_or_no_timed_case_has_a_note_not_a_plot():
    result = anatomy_grade()
    result.environment.pop("ceilings")
    assert "ceilings were not measured" in roofline_plot.roofline(result).note
    slow = make_grade("vector_add", correct=False)
    assert roofline_plot.roofline(slow).note == "no roofline plot: no case was timed"


def test_the_terminal_shows_the_top_advice_in_two_lines_and_names_the_rest(monkeypatch):
    from grader.cli.main import format_result

    monkeypatch.setenv("COLUMNS", "250")  # wide enough that no line of the advice wraps

    text = click.unstyle(format_result(anatomy_grade()))
    advice = text.split("how to be faster:")[1].strip().splitlines()
    assert advice[0].startswith("small_grid in 3 case(s)") and "124 SMs idle" in advice[0]
    assert advice[1].strip().startswith("-> the kernel that takes the time runs fewer programs")
    also = [line.strip() for line in advice if line.strip().startswith("also:")]
    assert also == ["also: low_bandwidth (see --report or --json)"]  # the rest named, once


def test_the_terminal_says_where_profile_went_or_why_nothing_was_written(tmp_path):
    from grader.cli.main import _profile_written

    result = anatomy_grade(files={"trace": "a.trace.json"}, copied={"a.trace.json": str(tmp_path / "a.trace.json")})
    assert _profile_written(result, tmp_path).startswith(f"Profile written to {tmp_path}: 3 file(s)")
    assert "nothing" in _profile_written(anatomy_grade(), tmp_path)
    assert "interpreter" in _profile_written(make_grade("vector_add", mode="interpret"), tmp_path)


def test_the_reference_s_point_comes_from_its_latest_passing_grade_on_the_same_device(tmp_path):
    import hashlib

    from grader.cli.store import reference_times
    from grader.kata.catalog import get_kata
    from grader.store.database import record_grade

    kata = get_kata("vector_add")
    db = tmp_path / "store.sqlite"
    assert reference_times(db, kata, "NVIDIA H200") is None
    reference = anatomy_grade(speedup=1.0)
    reference.status, reference.submission_sha256 = "pass", hashlib.sha256(kata.reference_path.read_bytes()).hexdigest()
    record_grade(reference, db, handle="lead")
    other = anatomy_grade()  # someone's own kernel: not the reference
    other.status = "pass"
    record_grade(other, db, handle="lead")
    times = reference_times(db, kata, "NVIDIA H200")
    assert times == {f"{c.task}/{c.name}/{c.dtype}": c.time_ms for c in reference.cases if c.timed}
    assert reference_times(db, kata, "NVIDIA H100 80GB HBM3") is None
