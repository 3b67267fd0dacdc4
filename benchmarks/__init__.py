"""Benchmarks, each run with `python -m benchmarks.STAGE.NAME`: the project beside its peer in one run, printing
the ratio. Grouped by the stage they measure: `data/` (tokenization, vocabulary, pretraining data), `training/`
(speed, model quality, learning parity), `serving/` (the server, the embedding job), `downstream/` (fine-tuning,
word senses). `lib/` holds what several of them share, `peers/` the peers' own code; the index is
`benchmarks/README.md`.
"""
