"""Pure text logic as TF / TF-Text ops: normalisation, WordPiece, ELMo character ids.

Nothing here reads corpora or imports Beam: `pipeline/` composes these functions and owns the I/O, and the
same functions run inside `tf.data` and the exported serving graphs.
"""
