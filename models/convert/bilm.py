"""biLM weights between this project's `BiLM` and allenai/bilm-tf's hdf5 weight files with their `options.json`.

bilm-tf's `dump_weights` writes the token encoder and both LSTM stacks under the names in
`models.bilm_layers.BILM_TF_NAMES` (`char_embed`, `CNN/W_cnn_{i}`, `CNN_high_{i}/W_carry`, `CNN_proj/W_proj`,
`RNN_{0,1}/RNN/MultiRNNCell/Cell{k}/LSTMCell/{W_0,B,W_P_0}`; RNN_0 is the forward LM) and leaves the softmax
out. Layout differences: bilm-tf's `char_embed` has no row for the padding id 0 (its Batcher shifts ids by
one, as `preprocessing.elmo_chars` does; the loader prepends a zero row), and its conv kernels carry a leading
1 (`[1, width, dim, channels]`). The LSTM kernels are TF1 `LSTMCell`'s (`[x, h] @ W_0`, gates i, j, f, o,
forget bias 1.0 added at run time), as `ProjectedLSTM` computes them. When the CNN's width equals the LSTM
projection, bilm-tf has no `CNN_proj`: it becomes an identity projection here.

The softmax, when the file has `softmax/W` `[V, L]` and `softmax/b` `[V]` (this converter writes them; bilm-tf's
readers ignore extra datasets), is loaded too; otherwise it keeps a fresh initialisation, reported.
"""

import os

import numpy as np

from models.bilm import BiLMConfig, bilm_tf_options
from models.bilm_layers import BILM_TF_NAMES
from models.convert.common import ConversionError, assign, beside, check_shape, read_json, read_weights, unreadable

WEIGHTS_FILE, OPTIONS_FILE = "weights.hdf5", "options.json"
SOFTMAX = (("softmax/W", "bilm/softmax/kernel"), ("softmax/b", "bilm/softmax/bias"))
DIRECTIONS = ("forward", "backward")  # RNN_0, RNN_1
FULL_SOFTMAX_MAX_VOCAB = 16384  # larger vocabularies train with the sampled softmax


def weights(config: BiLMConfig) -> list[tuple[str, str, str]]:
    """`(hdf5 name, keras path, layout)` for every weight bilm-tf dumps, in file order."""
    enc = "bilm/char_cnn/"
    rows = [(BILM_TF_NAMES["char_embed/embeddings"], enc + "char_embed/embeddings", "padding_row")]
    for i in range(len(config.filters)):
        rows.append((BILM_TF_NAMES["cnn_{i}/kernel"].format(i=i), enc + f"cnn_{i}/kernel", "leading_one"))
        rows.append((BILM_TF_NAMES["cnn_{i}/bias"].format(i=i), enc + f"cnn_{i}/bias", "same"))
    for i in range(config.n_highway):
        for key in ("carry_kernel", "carry_bias", "transform_kernel", "transform_bias"):
            rows.append((BILM_TF_NAMES[f"highway_{{i}}/{key}"].format(i=i), enc + f"highway_{i}/{key}", "same"))
    for key in ("projection/kernel", "projection/bias"):
        rows.append((BILM_TF_NAMES[key], enc + key, "same"))
    for d, direction in enumerate(DIRECTIONS):
        for k in range(config.n_lstm_layers):
            for key in ("kernel", "bias", "projection"):
                rows.append((f"RNN_{d}/RNN/MultiRNNCell/Cell{k}/LSTMCell/{BILM_TF_NAMES[key]}",
                             f"bilm/{direction}_lstm_{k}/{key}", "same"))
    return rows


def to_ours(array: np.ndarray, layout: str) -> np.ndarray:
    if layout == "padding_row":
        return np.concatenate([np.zeros_like(array[:1]), array], axis=0)
    if layout == "leading_one":
        return array[0]
    return array


def from_ours(array: np.ndarray, layout: str) -> np.ndarray:
    if layout == "padding_row":
        return array[1:]
    if layout == "leading_one":
        return array[None]
    return array


def config_from_options(options: dict, vocab_size: int, source: str) -> BiLMConfig:
    """bilm-tf's `options.json` -> `BiLMConfig` (the CNN projects to the LSTM's projection size, as bilm-tf's)."""
    try:
        cnn, lstm = options["char_cnn"], options["lstm"]
        if cnn.get("activation", "relu") != "relu":
            raise ConversionError(f"{source}: char_cnn activation {cnn['activation']!r}: only relu is supported")
        return BiLMConfig(
            vocab_size=vocab_size, char_embedding_dim=cnn["embedding"]["dim"],
            filters=tuple(tuple(f) for f in cnn["filters"]), max_characters_per_token=cnn["max_characters_per_token"],
            n_highway=cnn.get("n_highway", 0), projection_dim=lstm["projection_dim"], cell_size=lstm["dim"],
            lstm_projection_dim=lstm["projection_dim"], n_lstm_layers=lstm["n_layers"],
            cell_clip=float(lstm.get("cell_clip") or 0.0), proj_clip=float(lstm.get("proj_clip") or 0.0),
            dropout=float(options.get("dropout", 0.1)), residual=bool(lstm.get("use_skip_connections", True)),
            softmax="full" if vocab_size <= FULL_SOFTMAX_MAX_VOCAB else "sampled",
            num_sampled=min(int(options.get("n_negative_samples_batch", 8192)), vocab_size))
    except KeyError as e:
        raise ConversionError(f"{source} lacks {e.args[0]!r} (not a bilm-tf options.json?)") from None
    except ValueError as e:
        if isinstance(e, ConversionError):
            raise
        raise ConversionError(f"{source}: {e}") from None


def read_source(checkpoint: str, config_path: str | None):
    """-> (open h5py file, options dict, options path)."""
    import h5py

    if os.path.isdir(checkpoint):
        checkpoint = os.path.join(checkpoint, WEIGHTS_FILE)
    if not os.path.exists(checkpoint):
        raise ConversionError(f"bilm-tf weight file not found: {checkpoint}")
    config_path = config_path or beside(checkpoint, OPTIONS_FILE)
    options = read_json(config_path, "bilm-tf options", "--config")
    try:
        handle = h5py.File(checkpoint, "r")
    except OSError as e:
        raise unreadable(checkpoint, e) from None
    return handle, options, config_path


def load(model, config: BiLMConfig, h5, source: str) -> list[str]:
    """Assigns the file's weights to `model` by name; returns what the file lacks (kept fresh)."""
    shapes = {v.path: tuple(v.shape) for v in model.weights}
    arrays, fresh = {}, []
    n_filters = sum(c for _, c in config.filters)
    for name, path, layout in weights(config):
        if name not in h5:
            if name.startswith("CNN_proj/") and n_filters == config.projection_dim:
                arrays[path] = np.eye(n_filters, dtype=np.float32) if path.endswith("kernel") else \
                    np.zeros(n_filters, np.float32)  # bilm-tf skips the projection when widths agree
                continue
            raise ConversionError(f"{source} lacks {name}: not a bilm-tf weight file of the model that the "
                                  f"options describe")
        check_shape(name, h5[name].shape, from_ours(np.zeros(shapes[path], np.int8), layout).shape, source)
        try:
            array = np.asarray(h5[name][...])
        except (OSError, KeyError, RuntimeError) as e:  # a truncated file fails here
            raise unreadable(h5.filename, e, name) from None
        arrays[path] = to_ours(array, layout)
    if all(name in h5 for name, _ in SOFTMAX):
        for name, path in SOFTMAX:
            check_shape(name, h5[name].shape, shapes[path], source)
            arrays[path] = np.asarray(h5[name][...])
    else:
        fresh.append("softmax")
    _check_leftovers(h5, {name for name, _, _ in weights(config)} | {name for name, _ in SOFTMAX}, source)
    assign(model, arrays)
    return fresh


def _check_leftovers(h5, known: set, source: str) -> None:
    names = []
    h5.visititems(lambda name, obj: names.append(name) if hasattr(obj, "shape") else None)
    extra = sorted(n for n in names if n not in known)
    if extra:
        raise ConversionError(f"{source} holds weights that the options do not describe, e.g. {extra[0]} "
                              f"{list(h5[extra[0]].shape)} ({len(extra)} in all): do n_layers / n_highway / "
                              f"filters match?")


def write(model, config: BiLMConfig, output: str, vocab, max_seq_length: int | None) -> list[str]:
    """Writes `output/weights.hdf5` (bilm-tf's names and layouts, plus the softmax), `options.json`, `vocab.txt`."""
    import json

    import h5py

    if config.projection_dim != config.lstm_projection_dim:
        raise ConversionError(f"bilm-tf projects the CNN to the LSTM's projection size; this model has "
                              f"projection_dim {config.projection_dim} and lstm_projection_dim "
                              f"{config.lstm_projection_dim}")
    os.makedirs(output, exist_ok=True)
    ours = read_weights(model)
    path = os.path.join(output, WEIGHTS_FILE)
    with h5py.File(path + ".tmp", "w") as f:
        for name, keras_path, layout in weights(config):
            f.create_dataset(name, data=np.asarray(from_ours(ours[keras_path], layout), np.float32))
        for name, keras_path in SOFTMAX:
            f.create_dataset(name, data=np.asarray(ours[keras_path], np.float32))
    os.replace(path + ".tmp", path)
    options = os.path.join(output, OPTIONS_FILE)
    with open(options, "w") as f:
        json.dump(bilm_tf_options(config, max_seq_length), f, indent=2)
    vocab_path = os.path.join(output, "vocab.txt")
    vocab.write(vocab_path)
    return [path, options, vocab_path]
