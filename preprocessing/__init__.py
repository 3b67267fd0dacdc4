"""Pure text logic as TF / TF-Text ops: normalisation, WordPiece, ELMo characters, pairs, masking, the schema.

The bottom of the house: no Beam, no corpora, no models. The Beam jobs, tf.data and the served graphs all call it.
"""
