"""Rendering results and katas through the jinja2 templates in templates/ (never prints)."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import jinja2

from grader.kata.format import Kata
from grader.paths import templates_dir
from grader.results.roofline_plot import INTERPRETER_NOTE, Plot, roofline
from grader.results.schema import GradeResult
from grader.results.scoring import FORMULA, points_lost

FORMATS = {".md": "report.md.j2", ".markdown": "report.md.j2", ".html": "report.html.j2",
           ".htm": "report.html.j2"}


class ReportFormatError(ValueError):
    pass


def _fmt(value, spec: str = ".3g", none: str = "-") -> str:
    if value is None:
        return none
    if isinstance(value, str):
        return value
    return format(value, spec)


def _sentence(text: str) -> str:
    """A phrase as a sentence: capitalised, ending in a full stop (or its own ? or !)."""
    text = text.strip()
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".?!" else text + "."


PHASE_NAMES = {"start_up": "start-up", "checked_cases": "checked cases", "timing": "timing"}


def grade_time(result: GradeResult) -> str:
    """'56.1 s (start-up 0.3 s, checked cases 46.6 s, timing 9.2 s)', or '-' when not known."""
    if result.duration_s is None:
        return "-"
    shown = [f"{PHASE_NAMES.get(name, name)} {seconds:.1f} s" for name, seconds in result.phases_s.items()]
    compiling = getattr(result, "compile_s", None)
    # Where a slow grade's time went, often: an autotuner benchmarking its configs for each shape.
    compiled = f", {compiling:.1f} s of it Triton compiling and autotuning" if compiling and compiling >= 0.5 else ""
    return f"{result.duration_s:.1f} s" + (f" ({', '.join(shown)})" if shown else "") + compiled


def speed_notes(result: GradeResult) -> list[str]:
    """Sentences that qualify the grade's speed: a shared GPU (speed unreliable, not ranked),
    timings that looked like a cheat and were not named, ceilings measured again. Empty when
    there is nothing to say."""
    notes = []
    shared = getattr(result, "gpu_shared", None)
    if shared:
        seen = []
        for p in shared.get("processes") or []:
            memory = f", {p['used_mib']} MiB" if p.get("used_mib") is not None else ""
            seen.append(f"{p.get('name') or 'a process'} (pid {p.get('pid')}{memory})")
        for u in shared.get("unsteady_cases") or []:
            seen.append(f"timing rounds of {u.get('case')} {u.get('spread')}x apart")
        notes.append("Speed unreliable: the GPU was shared while this grade ran (" + "; ".join(seen)
                     + "). No timing-based cheat is named and leaderboards do not rank this grade; "
                     "grade again on an idle GPU for a speed that counts")
    for d in getattr(result, "timings_disturbed", None) or []:
        notes.append(f"Timings disturbed in {d.get('case')}: the first timing looked like "
                     f"{d.get('reason')} ({d.get('message')}); {d.get('outcome')}")
    if result.environment.get("ceilings_note"):
        notes.append("Device ceilings: " + result.environment["ceilings_note"])
    return notes


SANDBOX_PROTECTIONS = ("reads", "writes", "network", "processes")


def sandbox_summary(sandbox: dict) -> str:
    """Which protections held for this grade (docs/SCORING.md, "The sandbox"): one line, the ones
    that did not hold named with why."""
    protections = (sandbox or {}).get("protections")
    if not isinstance(protections, dict):  # a grade from before protections were reported
        return f"filesystem: {(sandbox or {}).get('filesystem', '-')}"
    held = [p for p in SANDBOX_PROTECTIONS if (protections.get(p) or {}).get("held")]
    open_ = [f"{p} NOT confined ({(protections.get(p) or {}).get('why', 'unknown')})"
             for p in SANDBOX_PROTECTIONS if p not in held]
    text = f"{', '.join(held)} confined" if held else "nothing confined"
    return text + ("; " + "; ".join(open_) if open_ else "")


def template_environment() -> jinja2.Environment:
    """The templates/ folder with the number filters every report, debrief and board shares."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        autoescape=jinja2.select_autoescape(["html.j2"]),
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["num"] = _fmt
    env.filters["pct"] = lambda v: "-" if v is None else f"{100 * v:.1f}%"
    env.filters["ms"] = lambda v: "-" if v is None else f"{v:.4g}"
    env.filters["speed"] = lambda v: "-" if v is None else f"{v:.2f}x"
    env.filters["credit"] = lambda v: "-" if v is None else f"{v:.2f}"
    env.filters["shape"] = lambda v: "-" if v is None else "x".join(str(d) for d in v) or "scalar"
    env.filters["sentence"] = _sentence
    env.filters["grade_time"] = grade_time
    env.filters["speed_notes"] = speed_notes
    env.filters["sandbox"] = sandbox_summary
    return env


def to_json(result: GradeResult) -> str:
    return json.dumps(result.to_dict(), indent=2, default=str)


def render_report(result: GradeResult, fmt: str, reference: dict[str, float] | None = None) -> str:
    """fmt: 'md' or 'html'. reference: {"task/case/dtype": time_ms} of the kata's reference on
    the same device, drawn beside the grade's points in the HTML's roofline plot."""
    template = template_environment().get_template("report.md.j2" if fmt == "md" else "report.html.j2")
    plot = roofline(result, reference) if fmt == "html" else Plot()
    return template.render(r=result, formula=FORMULA, lost=points_lost(result.tasks), plot=plot,
                           interpreter_note=INTERPRETER_NOTE,
                           generated=datetime.datetime.now().astimezone().isoformat(timespec="seconds"))


def report_format(path: Path) -> str:
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise ReportFormatError(
            f"Cannot tell the report format from '{path}': use a .md or .html file name.")
    return "md" if FORMATS[suffix] == "report.md.j2" else "html"


def write_report(result: GradeResult, path: Path, reference: dict[str, float] | None = None) -> Path:
    path = Path(path)
    text = render_report(result, report_format(path), reference)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def render_workspace_readme(kata: Kata) -> str:
    from grader.kata.allowed_ops import ALLOWED_GROUPS
    return template_environment().get_template("workspace_readme.md.j2").render(
        k=kata, public_cases=public_cases(kata), torch_allowed=ALLOWED_GROUPS)


def public_cases(kata: Kata) -> list[dict]:
    rows = []
    for task in kata.tasks:
        for case in task.cases:
            if not case.hidden:
                rows.append({"task": task.name, "name": case.name, "dtypes": ", ".join(case.dtypes),
                             "params": ", ".join(f"{k}={v}" for k, v in case.params.items())})
    return rows
