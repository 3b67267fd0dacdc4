"""Counting words for the vocabulary job: batches of lines -> `(word, total count)`, the words being BERT words as
the project's own `BasicTokenizer` normalizes and splits them (the units the tokenizer will later cover). I/O
free: the job reads the lines and learns from the counts (`pipeline.vocab`).
"""

import collections

import apache_beam as beam

from pipeline.beam_options import SetupDoFn


class CountWordsInBatch(SetupDoFn):
    """A batch of lines -> `(word, count)` pairs for that batch (pre-aggregated before the shuffle)."""

    setup_state = ("_split", "_tf")

    def __init__(self, lower_case: bool):
        self.lower_case = lower_case

    def setup(self):
        import tensorflow as tf

        from preprocessing.basic_tokenizer import BasicTokenizer

        basic = BasicTokenizer(self.lower_case)
        # One trace for every batch size; no AutoGraph: no tensor-dependent Python control flow to convert, and
        # its conversion writes a temporary file, which fails (with 8 lines of warnings) on a full disk.
        self._split = tf.function(lambda lines: basic.split_words(basic.normalize(lines)).flat_values,
                                  input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
        self._tf = tf

    def process(self, lines: list[str]):
        words = self._split(self._tf.constant(lines, self._tf.string)).numpy()
        for word, count in collections.Counter(words).items():
            yield word.decode("utf-8"), count


class CountWords(beam.PTransform):
    """Batches (lists) of lines -> `(word, total count)`, BERT words as the project's tokenizer splits them."""

    def __init__(self, lower_case: bool):
        super().__init__()
        self.lower_case = lower_case

    def expand(self, lines):
        return (lines
                | "CountInBatch" >> beam.ParDo(CountWordsInBatch(self.lower_case))
                | "Sum" >> beam.CombinePerKey(sum))
