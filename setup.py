"""Packages the project's code for remote Beam workers: `--setup_file ./setup.py` (Dataflow, Flink, Spark).

The workers' Python dependencies come from the container image (see README, "Running at scale"); this only
ships `pipeline/` and `preprocessing/` so that the DoFns can be unpickled there.
"""

import setuptools

setuptools.setup(
    name="contextual-pretraining-pipeline",
    version="0.1.0",
    packages=["pipeline", "preprocessing"],
    python_requires=">=3.11",
)
