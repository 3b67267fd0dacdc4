"""Training: the custom loop under tf.distribute, optimizers and schedules, and the train/evaluate/curves
commands (`train(TrainJob(...))` and `evaluate(EvaluateJob(...))` their Python API). Reads TFRecords through `preprocessing.readers`; writes checkpoints and config.json into a model_dir.
"""
