"""rlrun benchmarks: each runnable alone (python -m benchmarks.<name>); results as JSON with a hardware fingerprint."""
