"""Executors (where a plan's worker set lives), rollout workers, and the per-stage timer."""
