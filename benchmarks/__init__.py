"""Benchmarks: each ``bench_*.py`` runs as a script (``python benchmarks/bench_core.py``) and measures an opsmith op
against the baseline it replaces, side by side in one process. ``probes/`` holds research probes whose findings
are in ``docs/measurements/``."""
