"""What several benchmarks share: process-tree measurements, the speed history, the parity training runs
(a subprocess), and helpers. No module here imports a benchmark."""
