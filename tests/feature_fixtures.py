"""Tiny models of each family, trained for two steps on synthetic data and exported, for the feature-based
and polysemy tests (the training recipe of `test_export.py`'s fixture). Only the hub modules are written, by
the export's own module builders (`serving.export.family_exports`); the TF Serving folder, its op check and
warm-up replay are `test_export.py`'s business and would double these tests' time."""

import os

from models import families, train
from preprocessing.vocabulary import Vocabulary
from preprocessing.wordpiece import WordPieceTokenizer
from serving import export, saved_models
from tests.training_fixtures import text_vocabulary, write_dataset

PRESETS = {"bert": "bert_tiny", "gpt": "gpt_tiny", "bilm": "bilm_tiny"}


def train_and_export(root: str, kind: str, texts: list[str], seq: int = 48) -> str:
    """Returns the export dir (holding `hub/`) of a tiny `kind` model whose vocabulary covers `texts`."""
    vocab = text_vocabulary(list(export.SAMPLE_TEXTS) + list(texts))
    pattern = write_dataset(os.path.join(root, "data", kind), kind, vocab=vocab, seq=seq, examples=16)
    model_dir = os.path.join(root, "runs", kind)
    assert train.main(["--model", kind, "--preset", PRESETS[kind], "--train_data", pattern, "--model_dir", model_dir,
                       "--set", "train_steps=2", "--set", "batch_size=8", "--set", "jit_compile=false"]) == 0
    _, model, saved = families.load_model(model_dir)
    vocab_path = os.path.join(model_dir, families.VOCAB_FILE)
    tokenizer = WordPieceTokenizer(Vocabulary.from_file(vocab_path), lower_case=True)
    export_dir = os.path.join(root, "exports", kind)
    specs, _ = export.family_exports(kind, model, tokenizer, saved, vocab_path, os.path.join(root, "scratch", kind))
    for spec in specs:
        if spec.place == "hub":
            saved_models.stage(spec, os.path.join(export_dir, "hub", spec.name))
    return export_dir
