"""The Apache Beam jobs: learn a WordPiece vocabulary (`pipeline.vocab`), build pretraining TFRecords
(`pipeline.pretraining_data`). Imports only `preprocessing`; each job is `run(argv)` with I/O at its edges.
"""

import commands  # noqa: F401,E402 - quiets TensorFlow's start-up before anything imports it (commands.tf_startup)
