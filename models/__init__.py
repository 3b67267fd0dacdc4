"""The networks (BERT, GPT, the biLM, their layers and objectives) and the model_dir contract (config.json).

Subpackages: `training/` (the trainer and the train/evaluate commands), `convert/` (public checkpoints).
"""

import commands  # noqa: F401,E402 - quiets TensorFlow's start-up before anything imports it (commands.tf_startup)
