"""From a model_dir to what consumers load: `export/` writes TF-Hub modules and TF Serving version folders,
`server/` serves them over TF Serving's REST (and gRPC) API, `client.py` talks to either server.
"""

import commands  # noqa: F401,E402 - quiets TensorFlow's start-up before anything imports it (commands.tf_startup)
