"""`python -m serving.export`: see `serving.export.cli`."""

import sys

from commands.tf_startup import quiet_tensorflow_startup

quiet_tensorflow_startup()  # before the command's module loads TensorFlow
from serving.export.cli import main  # noqa: E402

sys.exit(main())
