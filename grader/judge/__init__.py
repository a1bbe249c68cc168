"""The judge, the trusted side: inputs from the seed, the truth, comparisons, diagnoses, the checker.
May import: grader.kata, grader.timing; never the sandbox, never a submission (tests/test_layout.py)."""
