"""Benchmarks of the exported models in use: the model server's throughput and limits, and the Beam
embedding job."""
