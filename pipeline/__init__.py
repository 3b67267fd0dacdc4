"""The Apache Beam jobs: clean a corpus (`pipeline.clean`), learn a WordPiece vocabulary (`pipeline.vocab`), build
pretraining TFRecords (`pipeline.pretraining_data`). Imports only `preprocessing` (and `commands`). Each job is a
typed, frozen job object and `run(job)`, with I/O at its edges; its command parses flags into that object
(`main(argv)`), and every job's edge is `pipeline.beam_job`.
"""
