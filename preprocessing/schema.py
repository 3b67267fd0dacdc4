"""The TFRecord schema (on disk), its encoding, and the mapping to model input names: the one place that
knows feature names.

BERT examples use google-research/bert's names, dtypes and shapes, so that files written here train in
other BERT trainers and files written by `create_pretraining_data.py` train here. With dynamic masking the
masked-LM features are absent (the reader masks). Models read the TF-Hub text names (`input_word_ids`,
`input_mask`, `input_type_ids`); `model_inputs` is the only mapping between the two.

Serialization is batched in numpy (`serialize`): every row of a batch has the same fields in the same
order, so the whole batch is encoded as one byte matrix and cut into rows. The bytes equal
`tf.train.Example.SerializeToString(deterministic=True)`. In the BERT data job it takes about 5 us a row,
against about 11.7 for the TF string ops (`tf.io.encode_proto`, `tf.strings.join`) it replaced
(`benchmarks.data.data_stages`).
"""

import dataclasses

import numpy as np
import tensorflow as tf

SCHEMA_VERSION = 1


@dataclasses.dataclass(frozen=True)
class Feature:
    name: str
    dtype: tf.DType  # tf.int64, tf.float32 or tf.string
    length: int


def bert_features(max_seq_length: int, max_predictions_per_seq: int, masked: bool = True) -> tuple[Feature, ...]:
    features = [Feature("input_ids", tf.int64, max_seq_length),
                Feature("input_mask", tf.int64, max_seq_length),
                Feature("segment_ids", tf.int64, max_seq_length),
                Feature("next_sentence_labels", tf.int64, 1)]
    if masked:
        features += [Feature("masked_lm_positions", tf.int64, max_predictions_per_seq),
                     Feature("masked_lm_ids", tf.int64, max_predictions_per_seq),
                     Feature("masked_lm_weights", tf.float32, max_predictions_per_seq)]
    return tuple(features)


def gpt_features(max_seq_length: int) -> tuple[Feature, ...]:
    return (Feature("input_ids", tf.int64, max_seq_length + 1),)


def bilm_features(num_steps: int) -> tuple[Feature, ...]:
    return (Feature("tokens", tf.string, num_steps + 2), Feature("token_ids", tf.int64, num_steps + 2))


def features_for(metadata: dict) -> tuple[Feature, ...]:
    """The features of a dataset from its `metadata.json` contents."""
    config = metadata["config"]
    if metadata["model"] == "bert":
        return bert_features(config["max_seq_length"], config["max_predictions_per_seq"],
                             masked=config["masking"] == "static")
    if metadata["model"] == "gpt":
        return gpt_features(config["max_seq_length"])
    if metadata["model"] == "bilm":
        return bilm_features(config["max_seq_length"])
    raise ValueError(f"unknown model {metadata['model']!r} in metadata")


def describe(features: tuple[Feature, ...]) -> dict:
    """JSON form for `metadata.json`."""
    return {f.name: {"dtype": f.dtype.name, "shape": [f.length]} for f in features}


# --- encoding -------------------------------------------------------------------------------------------
#
# An Example is `0a len(Features) Features`; Features is one map entry per feature, in name order:
# `0a len(entry) [0a len(name) name 12 len(Feature) Feature]`; a Feature is `tag len(list) list` with the
# value-list message `0a len(values) values` (int64 varints and float32s packed; strings one
# `0a len(s) s` each). Every field of a batch's rows has the same layout; only the varint lengths differ.
# So each row is built as a row of a byte matrix, segment by segment (`_Row`), with a mask of the bytes that
# are real, and all rows are cut out of the masked matrix at once: numpy over the whole batch, no Python
# per value (per row for strings only).

# Feature field (tag byte) of each value-list type
_LIST_TAGS = {tf.int64: 0x1a, tf.float32: 0x12, tf.string: 0x0a}


def _varints(values: np.ndarray) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """`[N, K]` integers -> their varints as `[N, K * B]` uint8 bytes, a mask of the real ones (None: all
    are) and each row's count of real bytes `[N]` (B: the longest varint of the batch; negative values take
    10 bytes, as in protobuf)."""
    v = np.asarray(values)
    if v.dtype.kind not in "iu":  # bools, integral floats
        v = v.astype(np.int64)
    n, k = v.shape
    if v.size and 0 <= v.min() and v.max() < _TABLE_SIZE:  # token ids, positions, labels: table lookups
        if v.max() < 0x80:  # one byte each
            return v.astype(np.uint8), None, np.full(n, k)
        data = np.take(_TABLE, v).view(np.uint8).reshape(n, k * 4)  # [N, K * 4] (up to 3 used)
        real = np.take(_REAL, v).view(bool).reshape(n, k * 4)
        return data, real, np.take(_SIZES, v).sum(axis=1, dtype=np.int64)
    v = np.ascontiguousarray(v, np.int64).view(np.uint64)  # [N, K]
    b = max(1, -(-int(np.max(v, initial=0)).bit_length() // 7))
    shifts = np.arange(0, 7 * b, 7, dtype=np.uint64)  # [B]
    sizes = 1 + np.sum(v[..., None] >= (np.uint64(1) << shifts[1:]), axis=-1)  # [N, K]
    more = np.arange(b) < (sizes[..., None] - 1)  # [N, K, B] continuation bit
    data = (((v[..., None] >> shifts) & np.uint64(0x7F)) | (more.astype(np.uint64) << np.uint64(7)))
    data = data.astype(np.uint8)
    real = np.arange(b, dtype=np.uint8) < sizes[..., None]  # [N, K, B]
    return data.reshape(n, -1), real.reshape(n, -1), sizes.sum(axis=1, dtype=np.int64)


def _varint_bytes(i: int) -> bytes:
    out = bytearray()
    while i >= 0x80:
        out.append((i & 0x7F) | 0x80)
        i >>= 7
    return bytes(out + bytes([i]))


def _varint_tables(size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For the values `0..size-1` (at most 3 varint bytes each): the varint's bytes in a little-endian
    uint32, which of those 4 bytes are real (0x01 each), and how many."""
    i = np.arange(size, dtype=np.uint32)  # [size]
    sizes = 1 + (i >= 1 << 7).astype(np.uint32) + (i >= 1 << 14)
    table, real = np.zeros(size, "<u4"), np.zeros(size, "<u4")
    for j in range(3):
        byte = ((i >> (7 * j)) & 0x7F) | ((sizes > j + 1).astype(np.uint32) << 7)  # continuation bit
        table |= np.where(sizes > j, byte, 0) << (8 * j)
        real |= (sizes > j).astype(np.uint32) << (8 * j)
    return table, real, sizes.astype(np.uint8)


_TABLE_SIZE = 1 << 16
_TABLE, _REAL, _SIZES = _varint_tables(_TABLE_SIZE)


class _Row:
    """Segments of one row layout over a batch: byte blocks `[N, W]`, masks of their real bytes (None: all
    real) and the running count of real bytes per row."""

    def __init__(self, n: int):
        self.n, self.data, self.real, self.size = n, [], [], np.zeros(n, np.int64)

    def const(self, raw: bytes) -> "_Row":
        return self.block(np.broadcast_to(np.frombuffer(raw, np.uint8), (self.n, len(raw))))

    def block(self, data: np.ndarray, real: np.ndarray | None = None, size: np.ndarray | None = None) -> "_Row":
        """`real` None: every byte is real; `size`: the real bytes per row (counted from `real` if None)."""
        self.data.append(data)
        self.real.append(real)
        self.size = self.size + (data.shape[1] if real is None else
                                 real.sum(axis=1, dtype=np.int64) if size is None else size)
        return self

    def varint(self, lengths: np.ndarray) -> "_Row":
        return self.block(*_varints(lengths[:, None]))

    def extend(self, other: "_Row") -> "_Row":
        self.data += other.data
        self.real += other.real
        self.size = self.size + other.size
        return self

    def field(self, tag: int) -> "_Row":
        """This row as the body of a length-delimited field: `tag len body`."""
        return _Row(self.n).const(bytes([tag])).varint(self.size).extend(self)

    def rows(self) -> list[bytes]:
        data = np.concatenate(self.data, axis=1)  # [N, W]
        if all(real is None for real in self.real):
            flat = data.tobytes()
        else:
            real = np.concatenate([np.ones(d.shape, bool) if r is None else r
                                   for d, r in zip(self.data, self.real)], axis=1)  # [N, W]
            flat = data[real].tobytes()
        ends = np.cumsum(self.size).tolist()
        return [flat[a:b] for a, b in zip([0] + ends[:-1], ends)]


def _strings(column: np.ndarray) -> _Row:
    """`[N, K]` strings -> the rows' packed `0a len(s) s` values, a ragged block padded to the longest."""
    rows = []
    for row in column:
        values = [v.encode() if isinstance(v, str) else bytes(v) for v in row]
        rows.append(b"".join(bytes([0x0a]) + _varint_bytes(len(v)) + v for v in values))
    lengths = np.array([len(r) for r in rows], np.int64)
    width = int(lengths.max(initial=0))
    data = np.zeros((len(rows), width), np.uint8)
    real = np.arange(width)[None, :] < lengths[:, None]
    data[real] = np.frombuffer(b"".join(rows), np.uint8)
    return _Row(len(rows)).block(data, real)


def _values(column: np.ndarray, dtype: tf.DType) -> _Row:
    """A feature's `[N, K]` values -> its value-list message `0a len(values) values` per row."""
    n = column.shape[0]
    if dtype == tf.string:
        return _strings(column)  # not packed: one field per value
    if dtype == tf.float32:
        packed = _Row(n).block(np.ascontiguousarray(column, "<f4").view(np.uint8).reshape(n, -1))
    else:
        packed = _Row(n).block(*_varints(column))  # [N, K * B]
    return packed.field(0x0a)


def serialize(batch: dict, features: tuple[Feature, ...]) -> list[bytes]:
    """Dict of `[N, length]` arrays or tensors (every feature of the schema) -> `N` serialized
    `tf.train.Example`s, equal to `SerializeToString(deterministic=True)` of the same protos."""
    missing = {f.name for f in features} - set(batch)
    if missing:
        raise KeyError(f"batch lacks features {sorted(missing)}")
    ordered = sorted(features, key=lambda f: f.name)
    if any(len(f.name.encode()) > 127 for f in ordered):
        raise ValueError("feature names are limited to 127 bytes")
    columns = []
    for f in ordered:
        column = np.asarray(batch[f.name])
        if column.ndim != 2 or column.shape[1] != f.length:
            raise ValueError(f"feature {f.name}: expected shape [N, {f.length}], got {column.shape}")
        columns.append(column)
    n = columns[0].shape[0]
    if n == 0:
        return []
    entries = _Row(n)
    for f, column in zip(ordered, columns):
        key = f.name.encode()
        feature = _values(column, f.dtype).field(_LIST_TAGS[f.dtype])
        entry = _Row(n).const(bytes([0x0a, len(key)]) + key).extend(feature.field(0x12))
        entries.extend(entry.field(0x0a))  # one Features.feature map entry
    return entries.field(0x0a).rows()  # Example.features


def parse(serialized: tf.Tensor, features: tuple[Feature, ...]) -> dict[str, tf.Tensor]:
    """`[N]` serialized examples -> dict of `[N, length]` tensors."""
    spec = {f.name: tf.io.FixedLenFeature([f.length], f.dtype) for f in features}
    return tf.io.parse_example(serialized, spec)


# --- model inputs ---------------------------------------------------------------------------------------

def bert_model_inputs(features: dict) -> tuple[dict, dict, dict]:
    """google-research names -> `(x, y, sample_weight)` with TF-Hub input names."""
    x = {"input_word_ids": features["input_ids"], "input_mask": features["input_mask"],
         "input_type_ids": features["segment_ids"], "masked_lm_positions": features["masked_lm_positions"]}
    labels = features["next_sentence_labels"]
    y = {"mlm": features["masked_lm_ids"], "nsp": labels}
    weights = {"mlm": features["masked_lm_weights"], "nsp": tf.ones_like(labels, tf.float32)}
    return x, y, weights


def gpt_model_inputs(features: dict) -> tuple[dict, tf.Tensor, tf.Tensor]:
    ids = features["input_ids"]  # [B, L + 1]
    return {"input_word_ids": ids[:, :-1]}, ids[:, 1:], tf.ones_like(ids[:, 1:], tf.float32)


def bilm_model_inputs(features: dict) -> tuple[dict, dict, dict]:
    from preprocessing import elmo_chars

    tokens, ids = features["tokens"], features["token_ids"]  # [B, T + 2]
    inputs = tokens[:, 1:-1]  # [B, T]
    x = {"tokens": inputs, "char_ids": elmo_chars.char_ids(inputs)}  # char_ids [B, T, 50]
    y = {"forward": ids[:, 2:], "backward": ids[:, :-2]}
    weights = {k: tf.cast(v != 0, tf.float32) for k, v in y.items()}
    return x, y, weights
