"""Pure text logic as TF / TF-Text ops: normalisation, WordPiece, ELMo characters, pairs, masking, the schema.

The bottom of the house: no Beam, no corpora, no models. The Beam jobs, tf.data and the served graphs all call it.
"""

from preprocessing.tf_startup import quiet_tensorflow_startup

quiet_tensorflow_startup()  # before any command imports TensorFlow (every package's __init__ imports this one)
