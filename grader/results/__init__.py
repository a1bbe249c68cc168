"""Results: what a grade produces (dataclasses and their JSON), the score, the JSON/Markdown/HTML reports.
May import: grader.kata; never torch (the command-line process renders the reports)."""
