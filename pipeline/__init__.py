"""The Apache Beam jobs: learn a WordPiece vocabulary (`pipeline.vocab`), build pretraining TFRecords
(`pipeline.pretraining_data`). Imports only `preprocessing`; each job is `run(argv)` with I/O at its edges.
"""
