"""The leaderboard page as a person sees it: rendered by headless Chromium on a desktop and a
phone-sized window, screenshotted, and checked for visible tables and charts carrying the
expected names and numbers. Skipped where Chromium is absent (CI installs Debian's chromium)."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from grade_factory import make_grade
from grader.cli.main import main
from grader.store import database as store

CHROMIUM = os.environ.get("KATA_CHROMIUM") or next(
    (p for p in (shutil.which("chromium"), shutil.which("chromium-browser"), shutil.which("google-chrome"))
     if p), None)
if CHROMIUM is None and os.environ.get("KATA_REQUIRE_CHROMIUM"):  # set by .ci/run
    raise RuntimeError("KATA_REQUIRE_CHROMIUM is set but no chromium is on PATH")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed")

# Colours the page's CSS gives the speedup bars, the roofline bars and the table headers.
SPEED_BAR, ROOF_BAR, TABLE_HEAD = (0x1F, 0x6F, 0xEB), (0x82, 0x50, 0xDF), (0x0B, 0x3D, 0x91)
SCREENSHOTS = os.environ.get("KATA_SCREENSHOT_DIR")  # set it to keep the screenshots

# Added to a copy of the page only (the page itself has no script): what the layout engine made
# of it, written into the DOM that --dump-dom prints.
PROBE = """<script>
window.addEventListener("load", () => {
  const box = el => { const r = el.getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; };
  const probe = {
    viewport: window.innerWidth,
    scrollWidth: document.documentElement.scrollWidth,
    text: document.body.innerText,
    tables: [...document.querySelectorAll("table")].map(box),
    charts: [...document.querySelectorAll("svg.chart")].map(box),
    bars: [...document.querySelectorAll("svg.chart rect.bar, svg.chart rect.roof")].map(box),
    fontPx: [...document.querySelectorAll("svg.chart text")].map(t => t.getBoundingClientRect().height),
  };
  const out = document.createElement("pre");
  out.id = "probe";
  out.textContent = JSON.stringify(probe);
  document.body.appendChild(out);
});
</script>"""


def chromium(*args: str, profile: Path) -> subprocess.CompletedProcess:
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--hide-scrollbars", f"--user-data-dir={profile}", *args]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def read_png(path: Path) -> np.ndarray:
    """An 8-bit, non-interlaced RGB(A) PNG (what Chromium writes) as an H x W x 3 array."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
    assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
    bpp = 3 if colour == 2 else 4
    stride = width * bpp
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(height, stride + 1)
    image = np.zeros((height, stride), dtype=np.uint8)
    prev = np.zeros(stride, dtype=np.int32)
    for y in range(height):
        kind, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        if kind == 0:
            row = line
        elif kind == 1:  # Sub: a running sum along each channel
            row = np.cumsum(line.reshape(width, bpp), axis=0).reshape(stride) % 256
        elif kind == 2:  # Up
            row = (line + prev) % 256
        else:  # Average and Paeth depend on the byte just decoded: byte by byte
            row_list, up, cur = [0] * stride, prev.tolist(), line.tolist()
            for i in range(stride):
                left = row_list[i - bpp] if i >= bpp else 0
                upper_left = up[i - bpp] if i >= bpp else 0
                if kind == 3:
                    predictor = (left + up[i]) // 2
                else:
                    p = left + up[i] - upper_left
                    pa, pb, pc = abs(p - left), abs(p - up[i]), abs(p - upper_left)
                    predictor = left if pa <= pb and pa <= pc else up[i] if pb <= pc else upper_left
                row_list[i] = (cur[i] + predictor) % 256
            row = np.array(row_list, dtype=np.int32)
        image[y] = row
        prev = row
    return image.reshape(height, width, bpp)[:, :, :3]


def pixels_of(image: np.ndarray, colour: tuple[int, int, int], tolerance: int = 3) -> np.ndarray:
    return (np.abs(image.astype(np.int16) - np.array(colour)) <= tolerance).all(axis=2)


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    """A team's store, turned into a leaderboard by `kata leaderboard`, as a person would."""
    folder = tmp_path_factory.mktemp("leaderboard")
    db = folder / "team.sqlite"
    store.record_grade(make_grade("softmax", speedup=2.5, roofline=0.85), db, handle="bob")
    store.record_grade(make_grade("softmax", speedup=0.7, roofline=0.4), db, handle="ann")
    store.record_grade(make_grade("vector_add", speedup=1.85, roofline=0.91), db, handle="ann")
    store.record_grade(make_grade("vector_add", speedup=1.1, roofline=0.6), db, handle="bob")
    store.record_grade(make_grade("softmax", mode="interpret"), db, handle="dan")
    result = CliRunner().invoke(main, ["leaderboard", "--db", str(db), "--out", str(folder)])
    assert result.exit_code == 0, result.output
    return folder / "leaderboard.html"


def probe(page: Path, width: int, tmp_path: Path) -> dict:
    copy = tmp_path / f"probe-{width}.html"
    copy.write_text(page.read_text().replace("</body>", PROBE + "\n</body>"))
    dom = chromium(f"--window-size={width},1200", "--dump-dom", copy.as_uri(), profile=tmp_path / "profile").stdout
    found = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert found, dom[-2000:]
    return json.loads(found.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">")
                      .replace("&amp;", "&"))


def screenshot(page: Path, width: int, height: int, tmp_path: Path) -> np.ndarray:
    folder = Path(SCREENSHOTS) if SCREENSHOTS else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    shot = folder / f"leaderboard-{width}x{height}.png"
    chromium(f"--window-size={width},{height}", f"--screenshot={shot}", page.as_uri(), profile=tmp_path / "profile")
    image = read_png(shot)
    assert image.shape[:2] == (height, width)
    return image


def test_the_rendered_page_shows_the_tables_and_charts_with_the_numbers(page, tmp_path):
    facts = probe(page, 1000, tmp_path)
    text = facts["text"]
    for expected in ("NVIDIA H100 80GB HBM3", "Overall", "bob", "ann", "192.5", "177.5",
                     "2.50x", "0.70x", "1.85x", "85.0%", "91.0%", "dashed line: threshold 1.20x",
                     "Triton interpreter: correctness only", "dan", "correct"):
        assert expected in text, expected
    assert len(facts["tables"]) == 4  # overall, softmax, vector_add, interpreter correctness
    assert all(w > 300 and h > 40 for _, _, w, h in facts["tables"])
    assert len(facts["charts"]) == 4  # two speedup charts, two people's roofline charts
    assert all(w > 200 and h > 40 for _, _, w, h in facts["charts"])
    assert len(facts["bars"]) == 8 and all(w > 5 and h > 10 for _, _, w, h in facts["bars"])

    image = screenshot(page, 1000, 1600, tmp_path)
    assert len(np.unique(image.reshape(-1, 3), axis=0)) > 100, "the page looks blank"
    assert (image != 255).any(axis=2).mean() > 0.05, "almost nothing drawn"
    assert pixels_of(image, TABLE_HEAD).sum() > 5000, "no table header visible"
    assert pixels_of(image, SPEED_BAR).sum() > 5000, "no speedup bars visible"
    assert pixels_of(image, ROOF_BAR).sum() > 2000, "no roofline bars visible"
    # The longest speedup bar (bob's 2.50x) is clearly longer than the shortest (ann's 0.70x).
    bar_rows = pixels_of(image, SPEED_BAR).sum(axis=1)
    assert bar_rows.max() > 2.5 * bar_rows[bar_rows > 0].min()


def test_the_page_reads_on_a_phone(page, tmp_path):
    facts = probe(page, 375, tmp_path)
    # Headless Chromium lays out no narrower than its minimum window (about 500 px), so the
    # layout check uses what it got; the screenshot below is truly 375 px wide.
    assert facts["scrollWidth"] <= facts["viewport"], "the page scrolls sideways"
    assert min(facts["fontPx"]) >= 9, "chart labels too small to read"
    image = screenshot(page, 375, 2400, tmp_path)
    speed = pixels_of(image, SPEED_BAR)
    assert speed.sum() > 2000 and pixels_of(image, TABLE_HEAD).sum() > 2000
    columns = np.flatnonzero(speed.any(axis=0))
    assert columns.min() > 50 and columns.max() < 375 - 20, "bars run off the screen"
    assert columns.max() - columns.min() > 120, "bars too small to compare"
