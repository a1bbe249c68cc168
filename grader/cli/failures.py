"""The failing part of a grade on the terminal: cases not run collapsed into a line, each distinct
error shown once (with its trimmed traceback), everything wrapped at the terminal's width."""

from __future__ import annotations

from grader.cli.layout import wrap

MAX_ERRORS = 5  # distinct failures listed, with their tracebacks
NAMES_PER_ERROR = 3  # cases named for one failure ("and N more")


def not_run_lines(cases) -> list[str]:
    """One line per reason for the cases that were not run ("37 more case(s) not run: ..."),
    instead of a table row each."""
    reasons: dict[str, int] = {}
    for c in cases:
        if c.status == "not_run":
            reasons[c.message or "not run"] = reasons.get(c.message or "not run", 0) + 1
    lines = []
    for message, count in reasons.items():
        why = message.split(":", 1)[1].strip() if message.startswith("not run:") else ""
        lines += wrap(f"{count} more case(s) not run" + (f": {why}" if why else ""))
    return lines


def distinct_failures(cases) -> list[tuple[list, str]]:
    """([cases], message) for each distinct failure message, in order of first appearance."""
    groups: dict[str, list] = {}
    for c in cases:
        if c.status in ("fail", "error") and c.message:
            groups.setdefault(c.message.strip(), []).append(c)
    return [(group, message) for message, group in groups.items()]


def failure_lines(cases, width: int | None = None) -> tuple[list[str], set[str]]:
    """The "failing cases" section and the first lines it showed. An error keeps its whole
    message (the traceback the worker trimmed to the submission's own frames); a wrong value
    its first line (the report and --json have the mismatches)."""
    groups = distinct_failures(cases)
    if not groups:
        return [], set()
    lines, shown = ["", "failing cases:"], set()
    for group, message in groups[:MAX_ERRORS]:
        names = [f"{c.name} [{c.dtype}]" for c in group]
        label = ", ".join(names[:NAMES_PER_ERROR])
        if len(names) > NAMES_PER_ERROR:
            label += f" and {len(names) - NAMES_PER_ERROR} more"
        first, *rest = message.splitlines()
        shown.add(first.strip())
        lines += wrap(f"{label}: {first}", width, indent="  ", subsequent="      ")
        if group[0].status == "error":
            for line in rest:
                body = line.rstrip()
                lines += wrap(body.strip(), width, indent="    " + " " * (len(body) - len(body.lstrip())),
                              subsequent="      ") if body else []
    if len(groups) > MAX_ERRORS:
        more = sum(len(g) for g, _ in groups[MAX_ERRORS:])
        lines.append(f"  ... and {len(groups) - MAX_ERRORS} more distinct failure(s) in {more} case(s) "
                     "(--json or --report has them all)")
    return lines, shown


def headline(message: str, cases) -> str:
    """The grade's message without the first failure it repeats ("N case(s) failed; first:
    CASE: MESSAGE"), once the failing cases above show it."""
    failing = [c for c in cases if c.status in ("fail", "error") and c.message]
    if not failing or "; first: " not in message:
        return message
    count = message.split(" case(s) failed; first: ", 1)[0]
    for c in failing:
        repeated = f"{count} case(s) failed; first: {c.task}/{c.name} [{c.dtype}]: {c.message}"
        if message.startswith(repeated):
            return f"{count} case(s) failed (listed above)" + message[len(repeated):]
    return message
