"""Benchmarks of what the pretrained models are good for: fine-tuning (against peers, against random
weights) and the word-sense measures of the exported vectors."""
