"""The bounds of a generation request (GPT's `generate` signature, serving/export/gpt.py), checked before
the model runs, over REST and gRPC alike: `max_new_tokens` in 1..--max_new_tokens, `top_k` >= 0 (0: the
whole vocabulary), `temperature` finite and >= 0. Inputs of other names, and signatures without a
`max_new_tokens` input, are not touched.
"""

import numpy as np

from serving.server.servable import ServingError

LENGTH, TOP_K, TEMPERATURE = "max_new_tokens", "top_k", "temperature"


def _invalid(message: str) -> ServingError:
    return ServingError("INVALID_ARGUMENT", message)


def check_generation_inputs(inputs: dict[str, np.ndarray], max_new_tokens: int) -> None:
    """Raises INVALID_ARGUMENT for a generation request out of bounds."""
    length = inputs.get(LENGTH)
    if length is None or not length.size or length.dtype.kind not in "iu":
        return
    if int(length.min()) < 1:
        raise _invalid(f"{LENGTH} {int(length.min())} is out of range: it must be at least 1")
    if int(length.max()) > max_new_tokens:
        raise _invalid(f"{LENGTH} {int(length.max())} exceeds this server's limit of {max_new_tokens} "
                       f"(--max_new_tokens)")
    top_k = inputs.get(TOP_K)
    if top_k is not None and top_k.size and top_k.dtype.kind in "iu" and int(top_k.min()) < 0:
        raise _invalid(f"{TOP_K} {int(top_k.min())} is out of range: it must be at least 0 (0: no top-k cut)")
    temperature = inputs.get(TEMPERATURE)
    if temperature is not None and temperature.size and temperature.dtype.kind == "f":
        bad = temperature[~np.isfinite(temperature) | (temperature < 0)]
        if bad.size:
            raise _invalid(f"{TEMPERATURE} {float(bad.flat[0])} is out of range: it must be finite and at least 0")
