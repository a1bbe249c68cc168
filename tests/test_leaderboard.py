"""Leaderboard ranking rules (ties, best per person, per device, interpreter apart) and the
contents of the HTML and Markdown pages."""

from __future__ import annotations

import re

import pytest

from grade_factory import H100, INTERPRETER
from grader.store.database import Attempt
from grader.store.leaderboard import build_leaderboard, render_leaderboard

RTX = "NVIDIA GeForce RTX 4090"


def attempt(handle, kata="vector_add", score=100.0, speedup=1.5, roofline=0.8, *, device=H100,
            mode="gpu", day=1, correct=None, status=None, threshold=1.2, _ids=iter(range(1, 10**6))):
    row_id = next(_ids)
    correct = score > 0 if correct is None else correct
    if mode == "interpret":
        speedup = roofline = None
    return Attempt(
        row_id=row_id, attempt_id=f"{row_id:032x}", handle=handle, kata=kata,
        graded_at=f"2026-01-{day:02d}T10:00:00+00:00", mode=mode, label="practice",
        status=status or ("pass" if correct and (mode == "interpret" or (speedup or 0) >= threshold) else "fail"),
        correct=correct, score=score, speedup=speedup, roofline=roofline, threshold=threshold,
        device=device if mode == "gpu" else INTERPRETER, torch_version="2.13.0", triton_version="3.9.0",
        grader_version="0.1.0", submission_sha256=None, cases_passed=3, cases_total=3, origin="local")


def ranking(board):
    return [(e.rank, e.handle) for e in board.entries]


def test_rank_by_score_then_speedup_with_shared_ranks_for_ties():
    lb = build_leaderboard([
        attempt("ann", score=90.0, speedup=1.1),
        attempt("bea", score=100.0, speedup=1.5, day=3),
        attempt("cal", score=100.0, speedup=2.0),
        attempt("dee", score=100.0, speedup=1.5, day=2),  # ties with bea, got there first
        attempt("eve", score=0.0, speedup=None, roofline=None),
    ])
    [board] = lb.boards
    [kata] = board.katas
    assert ranking(kata) == [(1, "cal"), (2, "dee"), (2, "bea"), (4, "ann"), (5, "eve")]


def test_each_person_counts_once_with_their_best_attempt():
    lb = build_leaderboard([
        attempt("ann", score=60.0, speedup=0.5, day=1),
        attempt("ann", score=100.0, speedup=2.5, roofline=0.9, day=2),
        attempt("ann", score=0.0, speedup=None, roofline=None, day=3),  # a later failure
        attempt("bob", score=100.0, speedup=2.5, roofline=0.7, day=4),
    ])
    entries = lb.boards[0].katas[0].entries
    assert [(e.rank, e.handle, e.speedup, e.roofline, e.date) for e in entries] == [
        (1, "ann", 2.5, 0.9, "2026-01-02"), (1, "bob", 2.5, 0.7, "2026-01-04")]


def test_overall_sums_best_scores_and_ties_share_a_rank():
    lb = build_leaderboard([
        attempt("ann", "vector_add", 100.0), attempt("ann", "softmax", 60.0),
        attempt("bob", "vector_add", 80.0), attempt("bob", "softmax", 80.0),
        attempt("bob", "softmax", 40.0),  # not his best
        attempt("cat", "rms_norm", 100.0),
    ])
    overall = lb.boards[0].overall
    assert [(o.rank, o.handle, o.total, o.katas) for o in overall] == [
        (1, "ann", 160.0, 2), (1, "bob", 160.0, 2), (3, "cat", 100.0, 1)]


def test_every_device_gets_its_own_board_and_the_interpreter_only_correctness():
    lb = build_leaderboard([
        attempt("ann", speedup=1.5), attempt("bob", speedup=4.0, device=RTX),
        attempt("cat", speedup=3.0, device=RTX),
        attempt("ann", "softmax", 50.0, mode="interpret"),
        attempt("dan", "softmax", 0.0, mode="interpret", correct=False),
        attempt("dan", "rms_norm", 50.0, mode="interpret", day=5),
    ])
    assert [b.device for b in lb.boards] == [RTX, H100]  # the busier board first
    assert ranking(lb.boards[0].katas[0]) == [(1, "bob"), (2, "cat")]
    assert ranking(lb.boards[1].katas[0]) == [(1, "ann")]
    # Interpreter results never enter a speed board, only the correctness table.
    assert all(e.handle != "dan" for b in lb.boards for k in b.katas for e in k.entries)
    c = lb.correctness
    assert c.katas == ["rms_norm", "softmax"]
    assert [(r.handle, r.solved) for r in c.rows] == [("ann", 1), ("dan", 1)]
    dan = c.rows[1].cells
    assert dan["rms_norm"].correct and not dan["softmax"].correct
    assert "rms_norm" not in c.rows[0].cells


def test_filters_by_kata_and_device():
    attempts = [attempt("ann"), attempt("bob", "softmax", device=RTX),
                attempt("cat", "softmax", mode="interpret")]
    lb = build_leaderboard(attempts, device="rtx")
    assert [b.device for b in lb.boards] == [RTX] and lb.correctness is None
    lb = build_leaderboard(attempts, kata="softmax")
    assert [b.device for b in lb.boards] == [RTX] and lb.correctness.katas == ["softmax"]
    lb = build_leaderboard(attempts, device="interpreter")
    assert lb.boards == [] and [r.handle for r in lb.correctness.rows] == ["cat"]
    assert build_leaderboard(attempts, kata="gemm").empty


@pytest.fixture(scope="module")
def team():
    return build_leaderboard([
        attempt("ann", "vector_add", 100.0, 1.85, 0.91), attempt("bob", "vector_add", 92.5, 1.1, 0.6),
        attempt("ann", "softmax", 77.5, 0.7, 0.4), attempt("bob", "softmax", 100.0, 2.5, 0.85),
        attempt("cat", "softmax", 100.0, 3.25, 0.97, device=RTX),
        attempt("dan", "softmax", 50.0, mode="interpret"),
    ])


def test_markdown_has_every_table(team):
    md = render_leaderboard(team, "md")
    assert f"## {H100}" in md and f"## {RTX}" in md
    assert "| 1 | bob | 192.5 | 2 | 1 |" in md and "| 2 | ann | 177.5 | 2 | 1 |" in md
    assert "### `softmax` (speedup threshold 1.20x)" in md
    assert "| 1 | bob | 100.0 | 2.50x | 85.0% | pass | 2026-01-01 |" in md
    assert "| 2 | ann | 77.5 | 0.70x | 40.0% | fail | 2026-01-01 |" in md
    assert "| 1 | cat | 100.0 | 3.25x | 97.0% | pass | 2026-01-01 |" in md
    assert "## Triton interpreter: correctness only" in md
    assert "| dan | yes | 1 |" in md
    # The interpreter result is never ranked against GPU speedups.
    assert not re.search(r"\| \d+ \| dan \|", md)


def test_html_is_self_contained_with_tables_and_charts(team):
    html = render_leaderboard(team, "html")
    assert '<meta name="viewport"' in html
    for external in ("<script", "<link", "src=", "http://", "https://", "@import", "url("):
        assert external not in html, external
    # Tables: ranks, names, numbers.
    assert "<td class=\"num\">1</td><td>bob</td><td class=\"num\">192.5</td>" in html
    assert "<td>cat</td><td class=\"num\">100.0</td><td class=\"num\">3.25x</td>" in html
    # Speedup bars: one per timed person per kata, widths proportional to the speedup.
    speed = re.findall(r'<svg class="chart speedup".*?</svg>', html, re.S)
    assert len(speed) == 3  # softmax and vector_add on the H100, softmax on the RTX
    widths = [float(w) for w in re.findall(r'<rect class="bar"[^>]*width="([\d.]+)"', speed[0])]
    assert len(widths) == 2 and widths[0] / widths[1] == pytest.approx(2.5 / 0.7, rel=0.01)
    assert ">2.50x<" in speed[0] and ">0.70x<" in speed[0] and 'class="threshold"' in speed[0]
    # Roofline fractions per person.
    roof = re.findall(r'<svg class="chart roofline".*?</svg>', html, re.S)
    assert len(roof) == 3 and ">91.0%<" in roof[0] + roof[1]
    assert "correctness only" in html and "dan" in html


def test_html_escapes_what_imported_files_bring():
    lb = build_leaderboard([attempt("ann", device="<img src=x onerror=alert(1)>")])
    html = render_leaderboard(lb, "html")
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


def test_an_empty_leaderboard_says_how_to_fill_it():
    lb = build_leaderboard([])
    assert lb.empty
    for fmt in ("html", "md"):
        assert "No results recorded yet" in render_leaderboard(lb, fmt)
