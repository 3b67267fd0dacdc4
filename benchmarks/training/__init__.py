"""Benchmarks of the training stage: the reader and trainer's speed, what the models learn (model quality,
time to quality), and parity with peer trainers on the same data (learning curves, word vectors, recipes)."""
