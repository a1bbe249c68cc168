"""The results store: every grade in SQLite, the export file, the leaderboards, whose results they are.
May import: grader.results."""
