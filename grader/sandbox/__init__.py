"""The sandbox: the worker that imports the submission, its lockdown and guards, watchdog and referee.
May import: grader.kata, grader.timing, grader.judge (what the worker shares with the checker); no store."""
