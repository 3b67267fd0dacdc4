"""The WordPiece vocabulary: loading, validation, special tokens and the fingerprint other stages check.

One token per line, the line number is the id (the google-research/bert `vocab.txt` format). A vocabulary
is valid for this project when it holds the BERT special tokens; metadata written beside TFRecords records
its sha256 so that a reader can refuse data made with another vocabulary.
"""

import dataclasses
import hashlib

import tensorflow as tf

from commands.user_errors import UserError

PAD, UNK, CLS, SEP, MASK = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
SPECIAL_TOKENS = (PAD, UNK, CLS, SEP, MASK)
SUFFIX_INDICATOR = "##"


class VocabularyError(UserError):
    """A vocabulary file is missing, empty or lacks what the tokenizer needs."""


@dataclasses.dataclass(frozen=True)
class Vocabulary:
    """An ordered WordPiece vocabulary.

    Args:
      tokens: the entries, id = position.
      source: where it came from (for error messages).

    Example:
      >>> v = Vocabulary(("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "##b"))
      >>> v.special_ids()["[MASK]"], v.id_of("##b")
      (4, 6)
    """

    tokens: tuple[str, ...]
    source: str = "<memory>"

    def __post_init__(self):
        if not self.tokens:
            raise VocabularyError(f"vocabulary {self.source} is empty")
        missing = [t for t in SPECIAL_TOKENS if t not in self._index]
        if missing:
            raise VocabularyError(
                f"vocabulary {self.source} lacks the special token(s) {', '.join(missing)}; a BERT vocabulary "
                f"must contain {' '.join(SPECIAL_TOKENS)} (is this a SentencePiece or GPT-2 BPE vocabulary?)")
        if len(self._index) != len(self.tokens):
            seen, dupes = set(), []
            for t in self.tokens:
                if t in seen:
                    dupes.append(t)
                seen.add(t)
            raise VocabularyError(f"vocabulary {self.source} repeats entries: {dupes[:5]}")

    @property
    def _index(self) -> dict[str, int]:
        index = self.__dict__.get("_index_cache")
        if index is None:
            index = {t: i for i, t in enumerate(self.tokens)}
            object.__setattr__(self, "_index_cache", index)
        return index

    def __len__(self) -> int:
        return len(self.tokens)

    def id_of(self, token: str) -> int:
        return self._index[token]

    def special_ids(self) -> dict[str, int]:
        return {t: self._index[t] for t in SPECIAL_TOKENS}

    @property
    def looks_cased(self) -> bool:
        """True when some entry other than the bracketed special tokens has an upper-case letter."""
        return any(t != t.lower() for t in self.tokens if not (t.startswith("[") and t.endswith("]")))

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.to_text().encode("utf-8")).hexdigest()

    def to_text(self) -> str:
        return "".join(t + "\n" for t in self.tokens)

    @classmethod
    def from_file(cls, path: str) -> "Vocabulary":
        """Reads a `vocab.txt` (local or any `tf.io.gfile` path, e.g. `gs://`)."""
        if not tf.io.gfile.exists(path):
            raise VocabularyError(f"vocabulary file not found: {path}")
        if tf.io.gfile.isdir(path):
            raise VocabularyError(f"vocabulary {path} is a folder; give its vocab.txt")
        try:
            with tf.io.gfile.GFile(path, "rb") as f:
                raw = f.read()
        except (tf.errors.OpError, OSError) as e:
            reason = getattr(e, "message", None) or str(e)
            raise VocabularyError(f"vocabulary {path} cannot be read: {reason.strip().splitlines()[0]}") from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise VocabularyError(f"vocabulary {path} is not UTF-8 (byte {e.start})") from e
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return cls(tuple(line.rstrip("\r") for line in lines), source=path)

    def write(self, path: str) -> None:
        with tf.io.gfile.GFile(path, "w") as f:
            f.write(self.to_text())
