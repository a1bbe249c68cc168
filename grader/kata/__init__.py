"""The katas: kata.yaml's format, cost expressions, allowed ops, budgets, time limits, catalogue, tracks.
May import: nothing of the grader but grader.paths; torch never at import (`kata list` reads katas)."""
