"""The learner's loop: workspaces, progress, hints, timed interviews and their debriefs, the file watcher.
May import: grader.kata, grader.results, grader.store (optional: else progress comes from workspaces)."""
