"""Benchmarks: ``python -m bench <name>``; each prints a JSON object on its last line."""
