"""The interview debrief, Markdown and HTML, through the jinja2 templates (never prints)."""

from __future__ import annotations

from pathlib import Path

import jinja2

from grader.clock import format_duration
from grader.paths import templates_dir

DEBRIEF_FILES = {"md": "debrief.md", "html": "debrief.html"}


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        autoescape=jinja2.select_autoescape(["html.j2"]),
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["duration"] = format_duration
    env.filters["pct"] = lambda v: "-" if v is None else f"{100 * v:.0f}%"
    env.filters["speed"] = lambda v: "-" if v is None else f"{v:.2f}x"
    env.filters["points"] = lambda v: "-" if v is None else f"{v:g}"
    return env


def render_debrief(summary, fmt: str) -> str:
    """summary: an InterviewSummary; fmt: 'md' or 'html'."""
    template = _environment().get_template(f"debrief.{fmt}.j2")
    return template.render(s=summary)


def write_debriefs(summary, folder: Path) -> list[Path]:
    """Write debrief.md and debrief.html into the interview folder; return their paths."""
    paths = []
    for fmt, name in DEBRIEF_FILES.items():
        path = Path(folder) / name
        path.write_text(render_debrief(summary, fmt))
        paths.append(path)
    return paths
