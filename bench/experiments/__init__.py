"""Experiments measured and not adopted, and one-off studies behind a decision (docs/BENCHMARKS.md,
"Experiments"): kept so each comparison can be rerun, not benchmarks a user runs."""
