"""Model directories the benchmarks make beside the trained ones."""

import os
import shutil


def random_model_dir(trained: str, out: str, seed: int) -> str:
    """A model_dir with `trained`'s config and vocabulary and freshly initialised weights (seeded): what the
    same run would have started from."""
    import keras
    import tensorflow as tf

    from models import families

    if tf.train.latest_checkpoint(out):
        return out
    saved = families.read_config(trained)
    keras.utils.set_random_seed(seed)
    model = families.make_task(saved["model"], saved["model_config"], saved["data"]).build_model()
    families.write_config(out, saved["model"], saved["preset"], saved["model_config"], saved["train_config"],
                          saved["data"])
    shutil.copy(os.path.join(trained, families.VOCAB_FILE), os.path.join(out, families.VOCAB_FILE))
    step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
    tf.train.CheckpointManager(tf.train.Checkpoint(model=model, step=step), out, 1).save(checkpoint_number=0)
    return out
