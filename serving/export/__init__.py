"""`python -m serving.export`: a model_dir to TF-Hub reusable SavedModels (`hub/`) and TF Serving version
folders (`serving/<name>/<version>/`), checked (servable ops, warm-up replayed) before they move into place.
"""
