"""Tests of `commands/`: user errors, the --overwrite contract, the quiet TensorFlow start-up."""
