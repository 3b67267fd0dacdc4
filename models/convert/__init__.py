"""Checkpoint conversion (`python -m models.convert`): google-research TF1 and HuggingFace BERT, keras-hub
BERT presets, HuggingFace openai-gpt and bilm-tf hdf5 checkpoints to and from model_dirs, every weight by
name; `formats.py` says what each format can carry, and a model it cannot is refused, never approximated;
`vocabularies.py` checks a `--vocab` against the checkpoint's own, and `outputs.py` keeps `--to` from writing
over anything but an earlier output of its format.
"""
