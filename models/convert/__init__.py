"""Checkpoint conversion (`python -m models.convert`): google-research TF1, HuggingFace safetensors and
bilm-tf hdf5 checkpoints to and from model_dirs, every weight by name.
"""
