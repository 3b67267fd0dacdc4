"""Line and document filters for cleaning a corpus, and the `key=value` specs that configure cleaning.

Pure functions over a document (a list of sentence lines). Line filters drop a line, document filters a
whole document; each drop is counted under its rule's name, so the job can say what every rule removed:

| rule (counter `filter_<rule>`) | drops | C4's value (`c4` preset) |
|---|---|---|
| `min_words_per_line` | lines with fewer words | 5 |
| `terminal_punctuation` | lines not ending in `. ! ? "` (or a closing quote) | on |
| `boilerplate` | lines holding a marker (case-insensitive), e.g. "privacy policy" | C4's list |
| `max_non_letter_share` | lines whose non-space characters are more than this share non-letters | off (1.0) |
| `min_sentences` | documents left with fewer lines | 3 |

Line rules apply in the table's order; a line is counted under the first rule that drops it.
"""

import collections
import dataclasses

C4_BOILERPLATE = ("javascript", "lorem ipsum", "terms of use", "privacy policy", "cookie policy",
                  "uses cookies", "use of cookies", "use cookies")
TERMINAL = (".", "!", "?", '"', "\u201d", "\u2019", "'", "\u2026")


@dataclasses.dataclass(frozen=True)
class FilterConfig:
    """Which filters run (every default is off).

    Args:
      min_words_per_line: drop lines with fewer space-separated words (0: off).
      terminal_punctuation: drop lines that do not end in terminal punctuation.
      boilerplate: drop lines containing any of these markers (case-insensitive).
      max_non_letter_share: drop lines whose non-space characters are more than this share non-letters.
      min_sentences: drop documents left with fewer lines (0: off).
    """

    min_words_per_line: int = 0
    terminal_punctuation: bool = False
    boilerplate: tuple[str, ...] = ()
    max_non_letter_share: float = 1.0
    min_sentences: int = 0

    def __post_init__(self):
        """Ranges: `min_words_per_line`, `min_sentences` >= 0; `max_non_letter_share` in [0, 1] (nan refused)."""
        for name in ("min_words_per_line", "min_sentences"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}={getattr(self, name)} is out of range; allowed: [0, inf) (0: off)")
        share = self.max_non_letter_share
        if not 0.0 <= share <= 1.0:  # also nan, which compares false with everything
            raise ValueError(f"max_non_letter_share={share} is out of range; allowed: [0, 1] (1: off)")

    @property
    def active(self) -> bool:
        return self != FilterConfig()


PRESETS = {"c4": {"min_words_per_line": 5, "terminal_punctuation": True, "boilerplate": C4_BOILERPLATE,
                  "min_sentences": 3}}
LINE_RULES = ("min_words_per_line", "terminal_punctuation", "boilerplate", "max_non_letter_share")


def non_letter_share(line: str) -> float:
    """The share of a line's non-space characters that are not letters (0.0 for a blank line)."""
    chars = [c for c in line if not c.isspace()]
    return sum(not c.isalpha() for c in chars) / len(chars) if chars else 0.0


def line_rule(line: str, config: FilterConfig) -> str | None:
    """The first rule that drops `line`, or None to keep it."""
    if config.min_words_per_line and len(line.split()) < config.min_words_per_line:
        return "min_words_per_line"
    if config.terminal_punctuation and not line.rstrip().endswith(TERMINAL):
        return "terminal_punctuation"
    lowered = line.lower()
    if any(marker in lowered for marker in config.boilerplate):
        return "boilerplate"
    if non_letter_share(line) > config.max_non_letter_share:
        return "max_non_letter_share"
    return None


def filter_document(lines: list[str], config: FilterConfig) -> tuple[list[str], collections.Counter]:
    """A document's kept lines (empty: the document is dropped) and what each rule removed, as counters
    `filter_<rule>` (lines) and `filter_min_sentences` (documents)."""
    kept, counts = [], collections.Counter()
    for line in lines:
        rule = line_rule(line, config)
        if rule is None:
            kept.append(line)
        else:
            counts[f"filter_{rule}"] += 1
    if kept and len(kept) < config.min_sentences:
        counts["filter_min_sentences"] += 1
        kept = []
    elif lines and not kept:
        counts["filter_documents_emptied"] += 1
    return kept, counts


def _value(field: dataclasses.Field, text: str, spec: str):
    kind = field.type if isinstance(field.type, type) else type(field.default)
    if kind is bool or isinstance(field.default, bool):
        if text.lower() not in ("1", "0", "true", "false", "on", "off"):
            raise ValueError(f"{field.name}={text!r} in {spec!r} is not a boolean")
        return text.lower() in ("1", "true", "on")
    if isinstance(field.default, tuple):
        return tuple(m.strip().lower() for m in text.split("|") if m.strip())
    try:
        return type(field.default)(text)
    except ValueError:
        raise ValueError(f"{field.name}={text!r} in {spec!r} is not a {type(field.default).__name__}") from None


def parse_spec(spec: str, config_class, presets: dict, flags: tuple[str, ...] = ()):
    """`"preset,key=value,flag,..."` -> (`config_class(...)`, the named `flags`). A preset name sets its
    fields; `key=value` overrides a field (lists: `a|b|c`); a bare field name of a boolean field sets it on.
    Unknown names raise `ValueError`.

    Example:
      >>> parse_spec("c4,min_words_per_line=3", FilterConfig, PRESETS)[0].min_words_per_line
      3
    """
    fields = {f.name: f for f in dataclasses.fields(config_class)}
    values, named = {}, []
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        key, eq, text = part.partition("=")
        if not eq and key in presets:
            values.update(presets[key])
        elif not eq and key in flags:
            named.append(key)
        elif not eq and key in fields and isinstance(fields[key].default, bool):
            values[key] = True
        elif eq and key in fields:
            values[key] = _value(fields[key], text, spec)
        else:
            known = sorted(set(presets) | set(flags) | set(fields))
            raise ValueError(f"unknown {part!r} in {spec!r} (known: {', '.join(known)})")
    return config_class(**values), tuple(n for n in flags if n in named)
