"""What a run prints: text, JSON, SARIF, GitHub annotations, diffs, rule documentation."""
