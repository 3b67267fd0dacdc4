"""`python -m serving.server`: see `serving.server.http`."""

import sys

from commands.tf_startup import quiet_tensorflow_startup

quiet_tensorflow_startup()  # before the command's module loads TensorFlow
from serving.server.http import main  # noqa: E402

sys.exit(main())
