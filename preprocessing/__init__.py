"""Pure text logic as TF / TF-Text ops: normalisation, WordPiece, ELMo characters, pairs, masking, the schema.

The bottom of the house's text logic: no Beam, no corpora, no models, no command plumbing (that is
`commands/`). The Beam jobs, tf.data and the served graphs all call it.
"""
