"""Grading a group: submissions from a folder or a manifest, graded on every GPU (Ray or a local pool).
May import: grader.kata, grader.results, grader.grading, grader.judge, grader.store; ray only lazily."""
