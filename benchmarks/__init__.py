"""Benchmarks of the project's tokenizer and vocabulary job against their peers (run each with `python -m`)."""
