"""Export to TF-Hub SavedModels and TF Serving folders, a local TF Serving REST server (later issues)."""
