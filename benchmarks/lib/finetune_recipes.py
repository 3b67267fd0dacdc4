"""The fine-tuning recipes of the demo's exports per task and model (`benchmarks.downstream.finetune` runs
them all)."""

# name: (task, module, train file, eval file, overrides, metric)
RUNS = {
    "sst2_bert": ("classify", "bert", "sst2/train.tsv", "sst2/dev.tsv",
                  ["epochs=3", "max_seq_length=64", "learning_rate=3e-4", "batch_size=32"], "accuracy"),
    "sst2_gpt": ("classify", "gpt", "sst2/train.tsv", "sst2/dev.tsv",
                 ["epochs=2", "max_seq_length=64", "learning_rate=3e-4", "batch_size=32",
                  "max_train_examples=4000"], "accuracy"),
    "sst2_bilm": ("classify", "bilm", "sst2/train.tsv", "sst2/dev.tsv",
                  ["epochs=3", "max_seq_length=40", "learning_rate=2e-3", "batch_size=32"], "accuracy"),
    "pos_bert": ("tag", "bert", "ud_pos/train.conll", "ud_pos/dev.conll",
                 ["epochs=3", "max_seq_length=96", "learning_rate=5e-4", "batch_size=32",
                  "max_train_examples=4000"], "accuracy"),
    "pos_bilm": ("tag", "bilm", "ud_pos/train.conll", "ud_pos/dev.conll",
                 ["epochs=3", "max_seq_length=60", "learning_rate=3e-3", "batch_size=32",
                  "max_train_examples=3000"], "accuracy"),
    "ner_bert": ("tag", "bert", "ner_train.conll", "ner_heldout.conll",
                 ["epochs=8", "max_seq_length=96", "learning_rate=5e-4", "batch_size=16"], "f1"),
    "ner_bilm": ("tag", "bilm", "ner_train.conll", "ner_heldout.conll",
                 ["epochs=25", "max_seq_length=60", "learning_rate=6e-3", "batch_size=16", "task_word_dim=128",
                  "tagger_units=128"], "f1"),
    "squad_bert": ("squad", "bert", "squad_train.json", "squad_eval.json",
                   ["epochs=3", "max_seq_length=128", "doc_stride=64", "learning_rate=5e-4", "batch_size=32"],
                   "f1"),
}
