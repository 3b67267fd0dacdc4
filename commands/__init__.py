"""Command plumbing shared by every `python -m` entry point: what sits at a command's edge, not text logic.

- `user_errors`: `UserError`, the argument checks that raise it, and the one path from an exception to
  `error: <message>` on stderr and exit status 2;
- `output_lock`: one run per output folder (a lock file naming its holder; a stale one taken over);
- `overwrite`: the `--overwrite` contract (what a non-empty output folder holds, and when it may be replaced);
- `tf_startup`: TensorFlow quiet in a command's processes: what a command's module calls before it imports
  TensorFlow when run as `python -m`, and `@quiet_command`, the filter its `main` runs in.

The lowest room of the house: it imports no other project package. Importing it, or any package, changes
nothing in the process (no environment variable, import hook or warnings filter): only a command does.
"""
