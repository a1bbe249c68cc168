"""The interview debrief, Markdown and HTML, through the jinja2 templates (never prints)."""

from __future__ import annotations

from pathlib import Path

import jinja2

from grader.learner.clock import format_duration

DEBRIEF_FILES = {"md": "debrief.md", "html": "debrief.html"}


def _environment() -> jinja2.Environment:
    from grader.results.report import template_environment

    env = template_environment()
    env.filters["duration"] = format_duration
    env.filters["pct"] = lambda v: "-" if v is None else f"{100 * v:.0f}%"  # whole percents here
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
