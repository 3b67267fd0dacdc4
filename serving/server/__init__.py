"""`python -m serving.server`: a local server that speaks TF Serving's REST and gRPC APIs over the same
version folders and model config file; the one REST JSON codec (`json_tensor`) lives here.
"""
