"""`python -m downstream.finetune`: see `downstream.finetune.cli`."""

import sys

from commands.tf_startup import quiet_tensorflow_startup

quiet_tensorflow_startup()  # before the command's module loads TensorFlow
from downstream.finetune.cli import main  # noqa: E402

sys.exit(main())
