"""`downstream.finetune`'s progress lines (`downstream/finetune/progress.py`): steps, loss, learning rate,
examples per second and the time left while it trains, as pretraining prints them."""

import re

import numpy as np
import pytest

from downstream.finetune import progress


@pytest.mark.slow
def test_lines_come_every_few_steps_and_at_each_epoch_end():
    import tf_keras

    from downstream.finetune.schedule import warmup_linear

    model = tf_keras.Sequential([tf_keras.layers.Dense(2, input_shape=(3,))])
    model.compile(tf_keras.optimizers.AdamW(warmup_linear(1e-3, 2, 20)), "mse")
    lines = []
    x, y = np.zeros((40, 3), np.float32), np.zeros((40, 2), np.float32)  # 10 steps an epoch of 4
    model.fit(x, y, batch_size=4, epochs=2, verbose=0,
              callbacks=[progress.progress_callback(total_steps=20, epochs=2, batch_size=4, log=lines.append)])
    steps = [line for line in lines if line.startswith("step ")]
    assert [int(re.match(r"step (\d+)/20 ", s).group(1)) for s in steps] == list(range(2, 21, 2))
    pattern = (r"step \d+/20 epoch [12]/2 loss \d+\.\d{4} learning_rate [\d.e-]+ examples/s \d+\.\d "
               r"\| eta \d+m\d\ds")
    assert all(re.fullmatch(pattern, s) for s in steps), steps
    assert steps[-1].endswith("eta 0m00s") and " epoch 2/2 " in steps[-1]
    assert float(re.search(r"learning_rate (\S+)", steps[0]).group(1)) == 5e-4  # the 2nd step: half-way up
    assert [line.split(":")[0] for line in lines if line.startswith("epoch")] == ["epoch 1/2", "epoch 2/2"]


def test_how_often_and_how_long():
    assert [progress.log_every(n) for n in (3, 50, 200, 651, 10_000)] == [1, 5, 20, 50, 50]
    assert progress.duration(59) == "0m59s" and progress.duration(3725) == "1h02m"
    line = progress.progress_line(50, 651, 1, 3, 0.69314, 2.5e-5, 38.24, 0.5)
    assert line == "step 50/651 epoch 1/3 loss 0.6931 learning_rate 2.5e-05 examples/s 38.2 | eta 5m00s"
