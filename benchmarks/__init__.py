"""Benchmarks, each run with `python -m benchmarks.NAME`: the project beside its peer in one run, printing
the ratio (tokenization, vocabulary, pretraining data, training, serving, model quality, fine-tuning, polysemy).
"""

import commands  # noqa: F401,E402 - quiets TensorFlow's start-up before anything imports it (commands.tf_startup)
