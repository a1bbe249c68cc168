"""The `kata` command line: parses arguments, calls the packages below, formats what they return.
May import: grader.kata, grader.results, grader.grading, grader.store, grader.learner, grader.batch; torch lazily."""
