"""Can this machine's sandbox confine a stranger's code? Asked by `kata batch grade` before it
grades anyone's (a learner's own `kata grade` runs everywhere, with what held in its report)."""

from __future__ import annotations

# What a batch needs held: the code graded is written by people who would gain from cheating.
BATCH_NEEDS = ("reads", "network")


def missing_for_strangers() -> dict[str, str]:
    """{protection: why it cannot be put in force here} for each one a batch needs; {} when all can."""
    from grader.sandbox.confine import support

    found = support()
    return {name: found[name] for name in BATCH_NEEDS if found.get(name)}
