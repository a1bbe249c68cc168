"""Grading a group: submissions from a folder or a CSV manifest, graded across every GPU (Ray, or a local process pool), recorded by the driver as they arrive.
May import: grader.kata, grader.results, grader.grading, grader.judge, grader.store; ray only lazily (the optional `cluster` extra), torch only in the grading processes."""
