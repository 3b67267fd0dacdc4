"""Code that consumes exported modules as a user would (above `serving/`): fine-tuning (`finetune/`),
per-word features (`features`) and the polysemy evaluation (`evaluate_senses`).
"""

import commands  # noqa: F401,E402 - quiets TensorFlow's start-up before anything imports it (commands.tf_startup)
