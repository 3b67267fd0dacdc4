"""The peers the benchmarks run beside the project: independent trainers (each installed in its own cache
folder, never in the project's virtual environment, and run as a subprocess), keras-hub's models at our
shapes, the fine-tuning peers, and google-research/bert's data algorithm."""
