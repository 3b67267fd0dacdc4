"""The cleaning every data job shares (`--filters`, `--dedup`, `--decontaminate`): the flags as a typed value,
what they resolve to for a run, the cleaning step of a job's graph, and the report files.

`Cleaning` holds the three flags as given (their text goes into a job's metadata unchanged) and their parsed
`CleanConfig`, parsed once when the value is made. `plan(cleaning, files)` resolves it for one run: the held-out
files (`--decontaminate`, matched once) and the dedup stages' key ranges (from the input's size).
`clean_step` applies the plan to a job's documents and returns the kept documents and the report as values.
The report of `pipeline.cleaning` is written as `<base>.json` (counters, shares of the input documents, the
largest clusters with the file names of their kept documents) and `<base>.md` (the same as a table a person
reads), and summed up in one line for the job's summary. Flags left off keep a job's config (and so its
`metadata.json`) exactly as without this module.
"""

import dataclasses
import json
import os

from apache_beam.io.filesystems import FileSystems

from pipeline import corpus_io
from pipeline.beam_options import Counts
from pipeline.cleaning import CleanConfig, CleanDocuments, read_heldout
from preprocessing import dedup_config, packed_keys, text_filters
from commands.job_fields import JobFieldError, checked
from commands.user_errors import UserError

REPORT_FILES = ("cleaning.json", "cleaning.md")  # beside a job's output (`pipeline.pretraining_data`)


@checked()
@dataclasses.dataclass(frozen=True)
class Cleaning:
    """The cleaning a job asks for, as its flags say it; `config` is what they parse to (checked when made).

    Args:
      filters: `--filters`: a preset (`c4`) and/or `key=value` rules (`preprocessing.text_filters`).
      dedup: `--dedup`: `exact`, `spans`, `near` (or `all`) and `key=value` settings (`preprocessing.dedup_config`).
      decontaminate: `--decontaminate`: a file pattern of held-out documents.

    Raises:
      JobFieldError: an unknown name or a bad value in `filters` or `dedup` (and a field of the wrong type).

    Example:
      >>> Cleaning(dedup="exact,near").config.dedup.near
      True
    """

    filters: str | None = None
    dedup: str | None = None
    decontaminate: str | None = None
    config: CleanConfig = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self):
        try:
            filters = text_filters.parse_spec(self.filters or "", text_filters.FilterConfig, text_filters.PRESETS)[0]
            dedup = dedup_config.parse_dedup(self.dedup or "")
        except ValueError as e:
            raise JobFieldError(f"--filters/--dedup: {e}") from None
        object.__setattr__(self, "config", CleanConfig(filters=filters, dedup=dedup,
                                                       decontaminate=bool(self.decontaminate)))

    @property
    def active(self) -> bool:
        return self.config.active

    def flags(self) -> dict:
        """The flags that are given, by name, in flag order (for a job's metadata; absent ones are left out,
        so that a job without cleaning writes the same bytes as one that never knew of it)."""
        given = {"filters": self.filters, "dedup": self.dedup, "decontaminate": self.decontaminate}
        return {k: v for k, v in given.items() if v is not None}


def add_arguments(parser) -> None:
    parser.add_argument("--filters", default=None, metavar="SPEC",
                        help="line/document filters: a preset (c4) and/or key=value (min_words_per_line=5, "
                             "terminal_punctuation, boilerplate=a|b, max_non_letter_share=0.3, min_sentences=3)")
    parser.add_argument("--dedup", default=None, metavar="SPEC",
                        help="dedup stages: exact, spans, near (or all), and key=value (threshold=0.8, "
                             "span_sentences=3, shingle_words=5, num_perm=120, bands=10, band_rows=4, key_ranges=N: "
                             "default from the input's size)")
    parser.add_argument("--decontaminate", default=None, metavar="HELDOUT",
                        help="file pattern of held-out documents: drop training documents that are exact or "
                             "near duplicates of any of them")


def from_args(args) -> Cleaning:
    """The `Cleaning` of parsed flags (`add_arguments`')."""
    return Cleaning(filters=args.filters, dedup=args.dedup, decontaminate=args.decontaminate)


@dataclasses.dataclass(frozen=True)
class CleanPlan:
    """Cleaning resolved for one run: `config` with its key ranges set, and the `heldout` files."""

    config: CleanConfig
    heldout: tuple[str, ...] = ()

    @property
    def active(self) -> bool:
        return self.config.active


def heldout_files(cleaning: Cleaning, input_files: list[str]) -> list[str]:
    """The files `--decontaminate` matches ([] without it); `UserError` for a pattern matching nothing or a
    folder, and for one of the `input_files` (every training document would be dropped as its own held-out
    copy)."""
    if not cleaning.decontaminate:
        return []
    heldout = corpus_io.check_pattern(cleaning.decontaminate, "--decontaminate")
    same = sorted({os.path.realpath(f) for f in heldout} & {os.path.realpath(f) for f in input_files})
    if same:
        raise UserError(f"--decontaminate {cleaning.decontaminate} matches the --input file {same[0]}: every "
                        f"training document would be dropped as a copy of itself; give the held-out files only")
    return heldout


def plan(cleaning: Cleaning, input_files: list[str]) -> CleanPlan:
    """`cleaning` for a run over `input_files`: the held-out files matched (`heldout_files`) and the key ranges
    sized from the training and held-out files (`with_key_ranges`)."""
    heldout = heldout_files(cleaning, input_files)
    return CleanPlan(with_key_ranges(cleaning.config, list(input_files) + heldout), tuple(heldout))


def with_key_ranges(config: CleanConfig, files: list[str]) -> CleanConfig:
    """`config` with the dedup stages' key ranges set from the size of `files` (training and held-out), unless
    `--dedup key_ranges=N` set them: a key range's group then holds about `packed_keys.RANGE_INPUT_BYTES` of
    text's entries whatever the corpus."""
    if config.dedup.key_ranges or not config.active:
        return config
    text = sum(packed_keys.text_bytes(m.path, m.size_in_bytes)
               for result in FileSystems.match(files) for m in result.metadata_list)
    dedup = dataclasses.replace(config.dedup, key_ranges=packed_keys.ranges_for(text))
    return dataclasses.replace(config, dedup=dedup)


REMOVED = (("exact duplicates", "dedup_exact_documents"), ("near duplicates", "dedup_near_documents"),
           ("held-out exact", "decontaminate_exact_documents"), ("held-out near", "decontaminate_near_documents"),
           ("filtered", "filter_min_sentences"), ("emptied", "filter_documents_emptied"),
           ("emptied by spans", "dedup_span_documents_emptied"),
           ("over the 1 MiB line limit", "documents_over_max_bytes"))


def summary_line(job: str, counters: dict) -> str:
    """`JOB: cleaning kept K of N documents (x%); removed ...` in one line."""
    kept = counters.get("clean_documents_kept", 0)
    removed = [(name, counters.get(key, 0)) for name, key in REMOVED]
    total = kept + sum(n for _, n in removed)
    parts = [f"{name} {n:,}" for name, n in removed if n]
    lines = sum(counters.get(f"filter_{rule}", 0) for rule in text_filters.LINE_RULES)
    if lines:
        parts.append(f"filtered lines {lines:,}")
    if counters.get("lines_over_max_bytes"):
        parts.append(f"lines over 1 MiB {counters['lines_over_max_bytes']:,}")
    if counters.get("dedup_span_sentences"):
        parts.append(f"repeated-span sentences {counters['dedup_span_sentences']:,}")
    share = kept / total if total else 1.0
    return (f"{job}: cleaning kept {kept:,} of {total:,} documents ({share:.1%}); removed: "
            f"{', '.join(parts) or 'nothing'}")


def report_record(report: dict, files: list[str], heldout: list[str]) -> dict:
    """The JSON report: the counters, shares of the documents seen, clusters with their kept file's name."""
    counters = report["counters"]
    seen = counters.get("clean_documents_kept", 0) + sum(counters.get(k, 0) for _, k in REMOVED)
    shares = {k: round(v / seen, 6) for k, v in counters.items() if k.endswith("_documents") and seen}
    clusters = [{**c, "kept_file": (heldout[-1 - c["kept"][0]] if c["kept"][0] < 0 else files[c["kept"][0]])}
                for c in report["clusters"]]
    return {"counters": counters, "documents_seen": seen, "shares": shares, "clusters": clusters}


def markdown(record: dict, line: str) -> str:
    rows = [f"| {k} | {v:,} | {record['shares'].get(k, '')} |" for k, v in sorted(record["counters"].items())]
    out = ["# Cleaning report", "", line, "", "| counter | count | share of documents |", "|---|---|---|", *rows,
           "", "## Largest clusters", "", "| rule | size | kept document | sample |", "|---|---|---|---|"]
    for c in record["clusters"]:
        text = c["sample"].replace("|", "\\|")
        out.append(f"| {c['rule']} | {c['size']:,} | {c['kept_file']} #{c['kept'][1]} | {text} |")
    return "\n".join(out) + "\n"


def write_report(report: dict, base: str, files: list[str], heldout: list[str], job: str,
                 extra: dict | None = None) -> str:
    """Writes `<base>.json` (with `extra`'s fields) and `<base>.md`; returns the summary line."""
    line = summary_line(job, report["counters"])
    record = {**report_record(report, files, heldout), "summary": line, **(extra or {})}
    for path, text in ((base + ".json", json.dumps(record, indent=2) + "\n"), (base + ".md", markdown(record, line))):
        with FileSystems.create(path) as f:
            f.write(text.encode("utf-8"))
    return line


def clean_step(p, cleaning: CleanPlan, documents, label: str = "Clean"):
    """`documents` cleaned as planned -> (kept documents, the report PCollection); `(documents, None)` with
    every cleaning flag off (the job's graph is then the same as without cleaning)."""
    if not cleaning.active:
        return documents, None
    held = read_heldout(p, list(cleaning.heldout), f"{label}Heldout") if cleaning.heldout else None
    return documents | label >> CleanDocuments(cleaning.config, held)


def write_job_report(report: dict, base: str, files: list[str], heldout: tuple[str, ...], job: str) -> Counts:
    """A data job's cleaning report written to `<base>.json` / `.md`; its counters, for the job's metadata."""
    write_report(report, base, files, list(heldout), job)
    return Counts(report["counters"])
