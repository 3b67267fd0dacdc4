"""Packages the project's code for remote Beam workers: `--setup_file ./setup.py` (Dataflow, Flink, Spark).

The workers' Python dependencies come from the container image (docs/scale.md, pipeline/worker.Dockerfile);
this only ships the project's packages so that the DoFns can be unpickled there: `pipeline/`,
`preprocessing/` and `commands/` for the data jobs, and for the embedding job (`downstream.embed`, which
loads exported modules) also `downstream/`, `serving/` and `models/`. Not the demo, the benchmarks or the tests.
"""

import setuptools

setuptools.setup(
    name="contextual-pretraining-pipeline",
    version="0.1.0",
    packages=setuptools.find_packages(include=["commands*", "pipeline*", "preprocessing*", "models*",
                                               "serving*", "downstream*"]),
    python_requires=">=3.11",
)
