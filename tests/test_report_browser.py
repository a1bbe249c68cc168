"""The grade report's roofline plot as a person sees it: the HTML report of a GPU grade (recorded
anatomy data: CI has no GPU) rendered by headless Chromium, screenshotted, and checked for a
visible plot with its points and a kernel table. Skipped where Chromium is absent (CI installs
Debian's chromium) or where matplotlib, the plot's optional extra, is (CI installs it)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from anatomy_factory import anatomy_grade
from grader.results.report import write_report
from test_leaderboard_browser import CHROMIUM, PROBE, SCREENSHOTS, chromium, pixels_of, read_png

pytest.importorskip("matplotlib")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed")

POINT = (0x1F, 0x6F, 0xEB)  # the first case's colour in the plot
CEILING = (0x57, 0x60, 0x6A)  # the ceilings' lines


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    result = anatomy_grade()
    reference = {f"{c.task}/{c.name}/{c.dtype}": c.time_ms * 0.05 for c in result.cases if c.timed}
    return write_report(result, tmp_path_factory.mktemp("report") / "report.html", reference)


def test_the_rendered_report_shows_the_roofline_plot_and_the_kernel_tables(page, tmp_path):
    copy = tmp_path / "probe.html"
    copy.write_text(page.read_text().replace("</body>", PROBE + "\n</body>"))
    dom = chromium("--window-size=1000,1200", "--dump-dom", copy.as_uri(), profile=tmp_path / "profile").stdout
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert found, dom[-2000:]
    facts = json.loads(found.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">")
                       .replace("&amp;", "&"))
    assert len(facts["charts"]) == 1, "one roofline plot"
    (_, top, width, height), = facts["charts"]
    assert width > 400 and height > 250 and width <= facts["viewport"]
    assert facts["scrollWidth"] <= facts["viewport"], "the plot makes the page scroll sideways"
    assert "Speed anatomy" in facts["text"] and "add_kernel" in facts["text"]
    assert "8 programs on 132 SMs: 124 SMs idle" in facts["text"]
    assert min(facts["fontPx"]) >= 7, "plot labels too small to read"

    folder = Path(SCREENSHOTS) if SCREENSHOTS else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    shot = folder / "report-1000x2400.png"
    chromium("--window-size=1000,2400", f"--screenshot={shot}", page.as_uri(), profile=tmp_path / "profile")
    image = read_png(shot)
    plot = image[int(top):int(top + height)]
    assert pixels_of(plot, POINT, tolerance=10).sum() > 40, "no case point drawn"
    assert pixels_of(plot, CEILING, tolerance=10).sum() > 300, "no ceiling lines drawn"
