"""From a model_dir to what consumers load: `export/` writes TF-Hub modules and TF Serving version folders,
`server/` serves them over TF Serving's REST (and gRPC) API, `client.py` talks to either server.
"""
