"""The docs point at what is there: every relative link in README.md, docs/ and the performance
log resolves, every raw file the performance pages cite is in benchmarks/results/perf/, and raw
measurement data stays out of docs/ (docs/PERFORMANCE.md, issue 36)."""

from __future__ import annotations

import glob
import itertools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted(RESULTS.glob("*.md"))]
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
RAW = re.compile(r"perf/(20\d\d-[\w.{},*-]+)")
DOCS_MAX_BYTES = 1_500_000


def expand(pattern: str) -> list[str]:
    """`a-{1,2}.json` -> a-1.json, a-2.json (the log's shorthand for a family of files)."""
    parts = re.split(r"\{([^}]*)\}", pattern)
    choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return ["".join(c) for c in itertools.product(*choices)]


def test_every_relative_link_resolves():
    broken = []
    for page in PAGES:
        text = CODE_SPAN.sub("", page.read_text())
        for target in LINK.findall(text):
            target = target.split("#")[0]
            if target and not re.match(r"[a-z]+:", target) and not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, "links to nothing:\n" + "\n".join(broken)


def test_every_raw_file_cited_by_the_performance_pages_is_kept():
    cited, missing = 0, []
    for page in (ROOT / "docs" / "PERFORMANCE.md", RESULTS / "PERFORMANCE_LOG.md"):
        for name in RAW.findall(page.read_text()):
            for one in expand(name.rstrip(".,")):
                cited += 1
                if not glob.glob(str(RESULTS / "perf" / one)):
                    missing.append(f"{page.name}: perf/{one}")
    assert cited > 50, "the pages cite their raw data as perf/FILE"
    assert not missing, "cited but not in benchmarks/results/perf/:\n" + "\n".join(missing)


def test_docs_hold_pages_not_raw_data():
    files = [p for p in (ROOT / "docs").rglob("*") if p.is_file()]
    assert all(p.suffix == ".md" for p in files), [str(p) for p in files if p.suffix != ".md"]
    assert sum(p.stat().st_size for p in files) <= DOCS_MAX_BYTES
