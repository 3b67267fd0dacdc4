"""Cleaning as Beam transforms and as a job: known answers on small fixtures, held-out decontamination,
every filter, the report, and the same bytes on the in-process runner and on Dask."""

import collections
import json
import os
import random

import apache_beam as beam
import pytest

from pipeline import clean, clean_report, pretraining_data, vocab
from pipeline.beam_options import Counts
from pipeline.cleaning import CleanConfig, CleanDocuments, ReportRecords, split_kinds
from pipeline.dedup_stages import Cluster, DocumentCopies
from preprocessing import near_duplicates, packed_keys
from preprocessing.dedup_config import parse_dedup
from preprocessing.text_filters import FilterConfig, PRESETS, parse_spec
from tests.fixtures.dask_cluster import dask_cluster


def sentence(rng) -> str:
    return " ".join(f"w{rng.randrange(2000)}" for _ in range(12)).capitalize() + "."


def edited(rng, lines, words):
    """`lines` with `words` words replaced, in different sentences."""
    lines = list(lines)
    for k in range(words):
        parts = lines[k].split()
        parts[3] = f"edit{rng.randrange(10**6)}"
        lines[k] = " ".join(parts)
    return lines


@pytest.fixture(scope="module")
def planted():
    """Ten unique documents (file 0), then file 1: an exact copy of 0#2 (other case and spacing), a near copy
    of 0#4 (one word edited), a far copy of 0#6 (six of its sentences edited), a unique document, and one
    that repeats three sentences of 0#1 between two of its own. Held-out: a near twin of 0#8, a copy of 0#9."""
    rng = random.Random(7)
    a = [[sentence(rng) for _ in range(10)] for _ in range(10)]
    b = [[line.upper().replace(" ", "  ") for line in a[2]], edited(rng, a[4], 1), edited(rng, a[6], 6),
         [sentence(rng) for _ in range(5)], [sentence(rng)] + a[1][3:6] + [sentence(rng)]]
    heldout = [edited(rng, a[8], 1), list(a[9])]
    return a, b, heldout


def docs_of(files):
    return [((f, i), doc) for f, docs in enumerate(files) for i, doc in enumerate(docs)]


_RESULTS = {}  # the in-process runner calls these module functions by reference, in this process


def _save(value, key):
    _RESULTS[key] = value


def run_transform(docs, config, heldout=None):
    _RESULTS.clear()
    with beam.Pipeline(runner="FnApiRunner") as p:
        held = p | "Held" >> beam.Create([((-1, i), d) for i, d in enumerate(heldout)]) if heldout else None
        kept, report = p | beam.Create(docs) | CleanDocuments(config, held)
        kept | "Kept" >> beam.combiners.ToList() | "SaveKept" >> beam.Map(_save, "kept")
        report | "SaveReport" >> beam.Map(_save, "report")
    return dict(sorted(_RESULTS["kept"])), _RESULTS["report"]


def test_exact_and_near_duplicates_are_removed(planted):
    a, b, _ = planted
    kept, report = run_transform(docs_of([a, b]), CleanConfig(dedup=parse_dedup("exact,near")))
    assert sorted(kept) == [(0, i) for i in range(10)] + [(1, 2), (1, 3), (1, 4)]
    assert report["counters"] == {"clean_documents_kept": 13, "dedup_exact_documents": 1, "dedup_near_documents": 1}
    rules = {(c["rule"], tuple(c["kept"]), c["size"]) for c in report["clusters"]}
    assert rules == {("exact", (0, 2), 2), ("near", (0, 4), 2)}
    samples = {c["rule"]: c["sample"] for c in report["clusters"]}
    assert samples == {"exact": " / ".join(a[2])[:160], "near": " / ".join(a[4])[:160]}  # the kept document's
    assert kept[(1, 4)] == b[4]  # spans were not asked for


def test_near_stage_alone_keeps_the_smallest_id_of_exact_copies_too(planted):
    a, b, _ = planted
    kept, report = run_transform(docs_of([a, b]), CleanConfig(dedup=parse_dedup("near")))
    assert (1, 0) not in kept and (1, 1) not in kept and (0, 2) in kept and (0, 4) in kept
    assert report["counters"]["dedup_near_documents"] == 2


def test_repeated_spans_keep_the_first_copy(planted):
    a, b, _ = planted
    kept, report = run_transform(docs_of([a, b]), CleanConfig(dedup=parse_dedup("spans")))
    assert kept[(1, 4)] == [b[4][0], b[4][4]] and kept[(0, 1)] == a[1]
    assert (1, 0) not in kept  # all its spans repeat 0#2's: emptied
    assert report["counters"]["dedup_span_documents_emptied"] == 1
    spans = [(tuple(c["kept"]), c["size"], c["sample"]) for c in report["clusters"] if c["rule"] == "span"]
    assert ((0, 1), 2, " / ".join(a[1][3:6])[:160]) in spans  # a sample of the first copy, from the join by id
    # 1#4's three, 1#0 whole, 1#1 but its edited first line, 1#2 after its six edited lines
    assert report["counters"]["dedup_span_sentences"] == 3 + 10 + 9 + 4


def test_decontamination_removes_a_planted_near_twin_of_a_heldout_document(planted):
    a, b, heldout = planted
    kept, report = run_transform(docs_of([a, b]), CleanConfig(decontaminate=True), heldout)
    assert sorted(kept) == sorted(k for k, _ in docs_of([a, b]) if k not in ((0, 8), (0, 9)))
    assert report["counters"] == {"clean_documents_kept": 13, "decontaminate_exact_documents": 1,
                                  "decontaminate_near_documents": 1, "heldout_documents": 2}
    assert {c["rule"] for c in report["clusters"]} == {"heldout_exact", "heldout_near"}


@pytest.mark.slow
@pytest.mark.parametrize("stages, counter", [("exact,near", "dedup_near_documents"),
                                             ("spans", "dedup_span_sentences")])
@pytest.mark.parametrize("ranges", [2, 5])
def test_key_ranges_change_nothing_but_the_packing(planted, stages, counter, ranges):
    """Span digests and band keys packed into several key ranges: the same documents, counters and clusters
    as in one range."""
    a, b, heldout = planted
    docs = docs_of([a, b, [a[3], edited(random.Random(3), a[5], 1)]])  # more exact and near copies
    one, many = (run_transform(docs, CleanConfig(dedup=parse_dedup(f"{stages},key_ranges={n}"), decontaminate=True),
                               heldout) for n in (1, ranges))
    assert one[0] == many[0] and one[1]["counters"] == many[1]["counters"]
    assert sorted(map(str, one[1]["clusters"])) == sorted(map(str, many[1]["clusters"]))
    assert one[1]["counters"][counter] >= 2


def run_stages(docs, stages):
    """`docs` through `stages` one after the other -> (kept documents, held-out ones too; summed `Counts`; the
    `Cluster`s as sorted strings)."""
    _RESULTS.clear()
    with beam.Pipeline(runner="FnApiRunner") as p:
        out, records = p | beam.Create(docs), []
        for i, stage in enumerate(stages):
            out, stage_records = split_kinds(out | f"Stage{i}" >> stage, f"Stage{i}")
            records.append(stage_records)
        out | "Kept" >> beam.combiners.ToList() | "SaveKept" >> beam.Map(_save, "kept")
        (tuple(records) | beam.Flatten() | "Records" >> beam.combiners.ToList()
         | "SaveRecords" >> beam.Map(_save, "records"))
    counts = collections.Counter()
    for record in _RESULTS["records"]:
        counts.update({} if isinstance(record, Cluster) else record)
    clusters = sorted(str(sorted(r.items())) for r in _RESULTS["records"] if isinstance(r, Cluster))
    return dict(sorted(_RESULTS["kept"])), dict(counts), clusters


@pytest.mark.parametrize("among_training", [True, False])
@pytest.mark.parametrize("ranges", [1, 3])
def test_exact_copies_and_spans_in_one_join_are_the_two_rules_one_after_the_other(planted, among_training, ranges):
    """`DocumentCopies` decides exact copies and repeated spans together and applies them in one join: the
    same documents, counters and clusters as the exact rule first, then the span rule on what it kept. The
    spans of a dropped exact copy (of a training or a held-out document) must not count: file 2 repeats spans
    of 0#9 (a copy of held-out #1), of 0#2 (copied by 1#0) and of 0#5 (copied by 2#2, its own spans repeated
    by 2#3)."""
    a, b, heldout = planted
    rng = random.Random(11)
    c = [a[9][2:5] + [sentence(rng)], [sentence(rng)] + a[2][0:3], list(a[5]), a[5][4:8], a[5][4:7] + a[9][2:5]]
    docs = docs_of([a, b, c]) + [((-1, i), doc) for i, doc in enumerate(heldout + [list(a[2])])]
    together = run_stages(docs, [DocumentCopies(True, among_training, 3, ranges)])
    in_turn = run_stages(docs, [DocumentCopies(True, among_training, 0, ranges),
                                DocumentCopies(False, False, 3, ranges)])
    assert together == in_turn
    kept, counts, clusters = together
    assert kept[(2, 0)] == c[0] and kept[(2, 1)] == c[1]  # the spans' other holders are exact copies of held-out #1, #2
    assert kept[(1, 4)] == [b[4][0], b[4][4]] and (2, 2) not in kept and (2, 3) not in kept and (2, 4) not in kept
    assert counts["decontaminate_exact_documents"] == 3  # 0#9, 0#2 and 1#0 (0#2 in capitals)
    assert counts.get("dedup_exact_documents", 0) == among_training  # 2#2, else emptied by 0#5's spans
    assert counts["dedup_span_sentences"] >= 3 and any("'span'" in cluster for cluster in clusters)


def test_an_exact_copy_with_other_line_breaks_can_hold_a_span_first_whose_text_its_kept_twin_has():
    """The one case where the one join differs from the rules in turn (`pipeline.dedup_stages`): 0#1 is an
    exact copy of 0#0 in other lines, so it is dropped; 0#2 repeats three of 0#1's lines, which 0#0 does not
    have as lines. The join removes them from 0#2 (0#1 held them first), the rules in turn do not; the text
    removed is in 0#0."""
    words = [" ".join(f"w{4 * i + k}" for k in range(4)) + "." for i in range(4)]
    twin, copy, later = [" ".join(words[:2]), " ".join(words[2:])], list(words), ["Something else here."] + words[:3]
    docs = [((0, 0), twin), ((0, 1), copy), ((0, 2), later)]
    kept, counts, _ = run_stages(docs, [DocumentCopies(True, True, 3)])
    in_turn, _, _ = run_stages(docs, [DocumentCopies(True, True, 0), DocumentCopies(False, False, 3)])
    assert sorted(kept) == sorted(in_turn) == [(0, 0), (0, 2)] and counts["dedup_exact_documents"] == 1
    assert kept[(0, 2)] == later[:1] and in_turn[(0, 2)] == later
    normalize = near_duplicates.normalize_for_matching
    assert normalize(" ".join(later[1:])) in normalize(" ".join(kept[(0, 0)]))


def test_key_ranges_follow_the_input_size(tmp_path):
    small, big, packed = tmp_path / "small.txt", tmp_path / "big.txt", tmp_path / "big.txt.gz"
    small.write_bytes(b"x" * 100)
    big.write_bytes(b"x" * (2 * packed_keys.RANGE_INPUT_BYTES + 1))
    packed.write_bytes(b"x" * (packed_keys.RANGE_INPUT_BYTES // packed_keys.GZIP_RATIO + 1))
    config = CleanConfig(dedup=parse_dedup("near"))
    assert clean_report.with_key_ranges(config, [str(small)]).dedup.key_ranges == 1
    assert clean_report.with_key_ranges(config, [str(big)]).dedup.key_ranges == 3
    assert clean_report.with_key_ranges(config, [str(small), str(packed)]).dedup.key_ranges == 2
    assert clean_report.with_key_ranges(CleanConfig(dedup=parse_dedup("near,key_ranges=7")),
                                        [str(big)]).dedup.key_ranges == 7  # asked for: kept


@pytest.mark.parametrize("spec, counter, dropped", [
    ("min_words_per_line=4", "filter_min_words_per_line", 1),
    ("terminal_punctuation", "filter_terminal_punctuation", 2),
    ("boilerplate=privacy policy", "filter_boilerplate", 1),
    ("max_non_letter_share=0.4", "filter_max_non_letter_share", 1),
])
def test_every_line_filter_in_the_transform(spec, counter, dropped):
    doc = ["Our privacy policy changed today.", "| 1 | 2 | 3 |", "Too short.", "No stop at the end here",
           "A plain good sentence."]
    config = CleanConfig(filters=parse_spec(spec, FilterConfig, PRESETS)[0])
    kept, report = run_transform([((0, 0), doc), ((0, 1), doc[-1:])], config)
    assert report["counters"] == {counter: dropped, "clean_documents_kept": 2}
    assert len(kept[(0, 0)]) == len(doc) - dropped and kept[(0, 1)] == doc[-1:]


def test_the_document_filter_in_the_transform():
    config = CleanConfig(filters=FilterConfig(min_sentences=2))
    kept, report = run_transform([((0, 0), ["One.", "Two."]), ((0, 1), ["Alone."])], config)
    assert list(kept) == [(0, 0)] and report["counters"] == {"filter_min_sentences": 1, "clean_documents_kept": 1}


def test_report_records_sum_the_counters_and_keep_the_largest_clusters_in_any_grouping():
    rng = random.Random(3)
    clusters = [Cluster(rule="near", kept=(0, i), size=rng.randrange(2, 6), sample=f"s{i}") for i in range(40)]
    records = clusters + [Counts(a=1), Counts(a=2, b=1)]
    rng.shuffle(records)
    want = sorted(clusters, key=lambda c: (c["size"], -c["kept"][1]), reverse=True)[:3]
    combine = ReportRecords(3)
    one = combine.create_accumulator()
    for record in records:
        one = combine.add_input(one, record)
    parts = []
    for k in range(0, len(records), 7):  # bundles of 7, merged as a lifted combiner does
        part = combine.create_accumulator()
        for record in records[k:k + 7]:
            part = combine.add_input(part, record)
        parts.append(part)
    for accumulator in (one, combine.merge_accumulators(parts)):
        assert combine.extract_output(accumulator) == ({"a": 3, "b": 1}, want)
    assert ReportRecords(0).extract_output(ReportRecords(0).add_input(ReportRecords(0).create_accumulator(),
                                                                      clusters[0])) == ({}, [])


def write_files(base, files):
    os.makedirs(base, exist_ok=True)
    for n, docs in enumerate(files):
        with open(os.path.join(base, f"part{n}.txt"), "w") as f:
            f.write("\n\n".join("\n".join(d) for d in docs) + "\n")
    return os.path.join(base, "part*.txt")


@pytest.fixture(scope="module")
def job_inputs(planted, tmp_path_factory):
    a, b, heldout = planted
    base = tmp_path_factory.mktemp("clean")
    return write_files(base / "in", [a, b]), write_files(base / "held", [heldout])


CLEAN_FLAGS = ["--dedup", "all", "--filters", "min_words_per_line=3"]


def run_clean(job_inputs, out, runner_args):
    corpus, held = job_inputs
    assert clean.main(["--input", corpus, "--output_dir", str(out), "--decontaminate", held, *CLEAN_FLAGS,
                       *runner_args]) == 0
    return out


@pytest.fixture(scope="module")
def reference_clean(job_inputs, tmp_path_factory):
    return run_clean(job_inputs, tmp_path_factory.mktemp("ref"), ["--runner", "FnApiRunner"])


def test_clean_job_writes_the_input_format_and_a_report(reference_clean, planted, capsys):
    a, _, _ = planted
    names = sorted(os.listdir(reference_clean))
    assert names == ["00000-part0.txt", "00001-part1.txt", "clean_report.json", "clean_report.md"]
    first = (reference_clean / "00000-part0.txt").read_text().split("\n\n")
    assert first[0] == "\n".join(a[0]) and len(first) == 8  # 0#8 and 0#9 were held out
    report = json.loads((reference_clean / "clean_report.json").read_text())
    counters = report["counters"]
    assert counters["decontaminate_exact_documents"] == counters["decontaminate_near_documents"] == 1
    assert counters["dedup_exact_documents"] == 1 and counters["documents"] == 15
    assert report["summary"].startswith("clean: cleaning kept ") and report["clusters"][0]["kept_file"]
    assert "## Largest clusters" in (reference_clean / "clean_report.md").read_text()


def test_clean_job_refuses_an_earlier_run_and_bad_specs(job_inputs, reference_clean, tmp_path, capsys):
    corpus, _ = job_inputs
    assert clean.main(["--input", corpus, "--output_dir", str(reference_clean), "--runner", "FnApiRunner"]) == 2
    assert clean.main(["--input", corpus, "--output_dir", str(tmp_path), "--dedup", "fuzzy"]) == 2
    assert "unknown 'fuzzy'" in capsys.readouterr().err


@pytest.mark.slow
def test_clean_job_gives_the_same_bytes_on_dask(job_inputs, reference_clean, tmp_path):
    with dask_cluster(workers=2, threads=1) as dask:  # and packed into 3 key ranges, not 1
        out = run_clean(job_inputs, tmp_path / "dask", [*dask, "--dedup", "all,key_ranges=3"])
    names = sorted(os.listdir(reference_clean))
    assert sorted(os.listdir(out)) == names
    for name in names:
        if name == "clean_report.json":  # its config names the output folder
            got, want = (json.loads((d / name).read_text()) for d in (out, reference_clean))
            assert {**got, "config": None} == {**want, "config": None}
        else:
            assert (out / name).read_bytes() == (reference_clean / name).read_bytes(), name


@pytest.mark.slow
def test_pretraining_data_with_cleaning_counts_it_in_metadata(job_inputs, bert_vocab_path, tmp_path):
    corpus, held = job_inputs
    args = ["--model", "gpt", "--input", corpus, "--vocab", bert_vocab_path, "--max_seq_length", "16",
            "--num_shards", "1", "--runner", "FnApiRunner"]
    assert pretraining_data.main([*args, "--output_dir", str(tmp_path / "plain")]) == 0
    assert pretraining_data.main([*args, "--output_dir", str(tmp_path / "clean"), "--dedup", "exact,near",
                                  "--decontaminate", held]) == 0
    plain, cleaned = (json.loads((tmp_path / d / "metadata.json").read_text()) for d in ("plain", "clean"))
    assert "dedup" not in plain["config"] and cleaned["config"]["dedup"] == "exact,near"
    assert cleaned["counters"]["clean_documents_kept"] == 11 and cleaned["counters"]["dedup_near_documents"] == 1
    assert cleaned["counters"]["documents_with_tokens"] == 11 < plain["counters"]["documents_with_tokens"] == 15
    assert sorted(os.listdir(tmp_path / "clean")) == sorted(os.listdir(tmp_path / "plain") + ["cleaning.json",
                                                                                             "cleaning.md"])


@pytest.mark.slow
def test_vocab_job_learns_from_the_cleaned_text(job_inputs, tmp_path):
    corpus, held = job_inputs
    out = str(tmp_path / "vocab.txt")
    assert vocab.main(["--input", corpus, "--output", out, "--vocab_size", "200", "--dedup", "exact",
                       "--decontaminate", held, "--runner", "FnApiRunner"]) == 0
    meta = json.loads(open(out + ".json").read())
    assert meta["config"]["dedup"] == "exact" and meta["counters"]["dedup_exact_documents"] == 1
    assert meta["counters"]["decontaminate_exact_documents"] == 1 and meta["counters"]["clean_documents_kept"] == 12
    report = json.loads(open(out + ".cleaning.json").read())
    assert report["summary"].startswith("vocab: cleaning kept 12 of 15 documents")
