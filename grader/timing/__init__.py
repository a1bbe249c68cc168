"""Timing: the worker's timer, the input changes before timed calls (replayed by the judge), ceilings.
May import: nothing of the grader but grader.paths."""
