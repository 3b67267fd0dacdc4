"""Run by tests/test_distributed.py in a fresh process (logical devices must be set before TF starts):
trains tiny GPT for a few steps under MirroredStrategy over two logical CPUs, or the default strategy,
and leaves history.jsonl in model_dir.

    python -m tests.mirrored_script {mirrored|default} DATA_PATTERN MODEL_DIR
"""

import sys

import tensorflow as tf


def main(mode: str, pattern: str, model_dir: str) -> None:
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from models import distribute, families, train
    from models.config import TrainConfig
    from models.trainer import Trainer

    strategy = (distribute.make_strategy("mirrored", devices=["/cpu:0", "/cpu:1"]) if mode == "mirrored"
                else distribute.make_strategy("default"))
    config = TrainConfig(batch_size=8, train_steps=6, warmup_steps=0, log_every=1, steps_per_execution=2,
                         learning_rate=1e-3, shuffle_buffer=1, jit_compile=True)
    model_config = families.preset_config("gpt", "gpt_tiny", vocab_size=40, dropout=0.0)
    task = families.make_task("gpt", model_config, {"max_seq_length": 16})
    trainer = Trainer(task, config, strategy, model_dir)
    trainer.train(train.distributed_dataset(strategy, pattern, task, config, training=True))
    print(f"replicas {strategy.num_replicas_in_sync} xla {trainer.use_xla}")


if __name__ == "__main__":
    main(*sys.argv[1:])
