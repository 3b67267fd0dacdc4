"""Apache Beam jobs (the only package that imports Beam): vocabulary learning, pretraining data.

Each job is `run(argv)`: I/O at the edges, an I/O-free composite transform in the middle, text logic
from `preprocessing/`.
"""
