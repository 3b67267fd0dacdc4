"""Independent trainers that the learning-parity benchmark runs beside ours, each installed in its own cache
folder (never in the project's virtual environment) and run as a subprocess."""
