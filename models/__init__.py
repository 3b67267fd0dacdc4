"""The networks (BERT, GPT, the biLM, their layers and objectives) and the model_dir contract (config.json).

Subpackages: `training/` (the trainer and the train/evaluate commands), `convert/` (public checkpoints).
"""
