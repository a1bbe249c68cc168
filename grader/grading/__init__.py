"""A grade from the parent's side: the plan, the worker and checker started (warm or fresh), the result.
May import: grader.kata, grader.timing, grader.judge, grader.sandbox, grader.results."""
