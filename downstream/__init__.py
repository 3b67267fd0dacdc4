"""Code that consumes exported modules as a user would (above `serving/`): fine-tuning (`finetune/`),
per-word features (`features`, over `words`), the same vectors as a Beam job (`embed`), the polysemy
evaluation (`evaluate_senses`) and what a layer's vectors are made of (`vector_diagnostics`); each command a
typed job and one call, its Python API.
"""
