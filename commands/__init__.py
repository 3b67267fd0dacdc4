"""Command plumbing shared by every `python -m` entry point: what sits at a command's edge, not text logic.

- `user_errors`: `UserError`, the argument checks that raise it, and the one path from an exception to
  `error: <message>` on stderr and exit status 2;
- `output_lock`: one run per output folder (a lock file naming its holder; a stale one taken over);
- `overwrite`: the `--overwrite` contract (what a non-empty output folder holds, and when it may be replaced);
- `tf_startup`: a quiet TensorFlow start-up, installed here, before any package imports TensorFlow.

The lowest room of the house: it imports no other project package, and every package imports it first
(each package's `__init__` does `import commands`).
"""

from commands.tf_startup import quiet_tensorflow_startup

quiet_tensorflow_startup()  # before any command imports TensorFlow (every package's __init__ imports this one)
