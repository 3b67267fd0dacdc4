"""Code that consumes exported modules as a user would (above `serving/`): fine-tuning (`finetune/`),
per-word features (`features`) and the polysemy evaluation (`evaluate_senses`).
"""
