"""rlrun benchmarks: each runnable alone (``python -m benchmarks.<name>`` or ``rlrun-bench <name>``); ``rlrun-bench ci``
(``make bench``) runs the CI set. Results as JSON with a hardware fingerprint (records.py), compared with
baseline.json by same-run ratios only (baseline.py); the suite and what each benchmark waits for: suite.py."""
