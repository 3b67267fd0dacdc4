"""Installs TF Model Garden (`official.*`, `orbit`) into a cache folder of its own, beside the project's virtual
environment rather than in it, for the BERT peer `benchmarks/peers/model_garden_bert.py`.

    .venv/bin/python -m benchmarks.peers.model_garden [--cache_dir .cache]  # prints the PYTHONPATH entry

`pip install --no-deps --target <cache_dir>/peers/model_garden` of `tf-models-no-deps` and of the few
packages that its BERT modelling, data and optimisation code imports and the venv lacks; TensorFlow, tf_keras,
numpy, absl, PyYAML, six and the rest come from the venv (TF 2.21 / tf_keras 2.21 here). Import chain, found by
importing `official.nlp.modeling`, `official.nlp.data.pretrain_dataloader`, `official.modeling.optimization`
and `official.nlp.tasks.masked_lm` until nothing was missing:

- `gin` (gin-config): `official.nlp.modeling.layers` and the optimizer factory;
- `scipy`: `official.nlp.modeling.layers.mixing` (FNet's DFT matrix), imported by the layers package;
- `tensorflow_datasets`: `official.core.input_reader`, the data loaders' reader; it needs `etils`, `toml`,
  `promise`, `tensorflow_metadata` and `immutabledict` to import.

`official.nlp.tasks/__init__` also imports every other NLP task (scikit-learn, seqeval, sacrebleu); the peer
loads `official.nlp.tasks.masked_lm` without that `__init__` instead of installing them. A stamp file records
what was installed, so a second call with the same pins does nothing.
"""

import argparse
import os
import shutil
import subprocess
import sys

MODEL_GARDEN = "tf-models-no-deps==2.19.0"
EXTRA_DEPS = (
    "gin-config==0.5.0",
    "scipy==1.17.1",
    "tensorflow-datasets==4.9.10",
    "etils==1.15.0",
    "toml==0.10.2",
    "promise==2.3",
    "tensorflow-metadata==1.21.0",
    "immutabledict==4.3.1",
)
PACKAGES = (MODEL_GARDEN,) + EXTRA_DEPS
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STAMP = ".installed"
# What the peer imports; a failure names the module that is still missing.
IMPORT_CHECK = ("import official.nlp.modeling, official.nlp.data.pretrain_dataloader, "
                "official.modeling.optimization, orbit")


def install_dir(cache_dir: str) -> str:
    return os.path.join(os.path.abspath(os.path.expanduser(cache_dir)), "peers", "model_garden")


def _installed(target: str) -> bool:
    try:
        with open(os.path.join(target, STAMP)) as f:
            return f.read().split() == list(PACKAGES)
    except FileNotFoundError:
        return False


def _pip_install(target: str) -> None:
    if os.path.exists(target):
        shutil.rmtree(target)  # other pins: --target would otherwise keep the old files beside the new
    os.makedirs(target)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile",
                    "--target", target, *PACKAGES], check=True)


def check_import(target: str) -> None:
    """Imports what the peer needs in a child Python with `target` first on its path; raises RuntimeError
    with the child's last error line if that fails."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (target, os.environ.get("PYTHONPATH")) if p),
               TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run([sys.executable, "-c", IMPORT_CHECK], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"Model Garden in {target} does not import: {last}")


def ensure_installed(cache_dir: str) -> str:
    """Installs Model Garden and its missing dependencies under `cache_dir` (once) and returns the folder to
    put first on the peer's PYTHONPATH."""
    target = install_dir(cache_dir)
    if not _installed(target):
        _pip_install(target)
        check_import(target)
        with open(os.path.join(target, STAMP), "w") as f:
            f.write("\n".join(PACKAGES) + "\n")
    return target


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.peers.model_garden",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--cache_dir", default=os.path.join(ROOT, ".cache"))
    print(ensure_installed(parser.parse_args(argv).cache_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
