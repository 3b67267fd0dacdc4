"""Benchmarks of the data stage: tokenization, vocabulary learning, the pretraining-data Beam job (its speed,
its stages, two commits in turns, scaling over workers) and its deduplication."""
