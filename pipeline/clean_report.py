"""The cleaning flags every job shares (`--filters`, `--dedup`, `--decontaminate`), and the report files.

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
from pipeline.cleaning import CleanConfig
from preprocessing import dedup_config, packed_keys, text_filters
from commands.user_errors import UserError

FLAGS = ("filters", "dedup", "decontaminate")
REPORT_FILES = ("cleaning.json", "cleaning.md")  # beside a job's output (`pipeline.pretraining_data`)


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


def clean_config(args) -> CleanConfig:
    """The `CleanConfig` the flags ask for; raises `UserError` for an unknown name or a bad value."""
    try:
        filters = text_filters.parse_spec(args.filters or "", text_filters.FilterConfig, text_filters.PRESETS)[0]
        dedup = dedup_config.parse_dedup(args.dedup or "")
    except ValueError as e:
        raise UserError(f"--filters/--dedup: {e}") from None
    return CleanConfig(filters=filters, dedup=dedup, decontaminate=bool(args.decontaminate))


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


def heldout_files(args, input_files: list[str] | None = None) -> list[str]:
    """The files `--decontaminate` matches ([] without it); `UserError` for a pattern matching nothing or a
    folder, and for one of the `input_files` (every training document would be dropped as its own held-out
    copy)."""
    if not args.decontaminate:
        return []
    heldout = corpus_io.check_pattern(args.decontaminate, "--decontaminate")
    if input_files is None:
        input_files = corpus_io.check_pattern(args.input)
    same = sorted({os.path.realpath(f) for f in heldout} & {os.path.realpath(f) for f in input_files})
    if same:
        raise UserError(f"--decontaminate {args.decontaminate} matches the --input file {same[0]}: every training "
                        f"document would be dropped as a copy of itself; give the held-out files only")
    return heldout


def job_config(args, skip=("progress_seconds",)) -> dict:
    """`vars(args)` for a job's metadata, without the cleaning flags that are off (the bytes stay the same)."""
    return {k: v for k, v in vars(args).items() if k not in skip and not (k in FLAGS and v is None)}


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


def clean_step(p, args, documents, label: str = "Clean"):
    """`documents` cleaned as the flags ask -> (kept documents, the report PCollection); `(documents, None)`
    with every cleaning flag off (the job's graph is then the same as without cleaning)."""
    from pipeline.cleaning import CleanDocuments, read_heldout

    config = clean_config(args)
    if not config.active:
        return documents, None
    heldout = heldout_files(args)
    config = with_key_ranges(config, corpus_io.check_pattern(args.input) + heldout)
    held = read_heldout(p, heldout, f"{label}Heldout") if heldout else None
    return documents | label >> CleanDocuments(config, held)
