"""`python -m models.convert`: see `models.convert.cli`."""

import sys

from commands.tf_startup import quiet_tensorflow_startup

quiet_tensorflow_startup()  # before the command's module loads TensorFlow
from models.convert.cli import main  # noqa: E402

sys.exit(main())
