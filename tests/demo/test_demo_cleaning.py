"""The demo's cleaning step (`demo.data_steps.clean_training_text`): the real `pipeline.clean` job on a tiny split
with planted duplicates, what the summary reports of it, and its reuse."""

import json
import os

import pytest

from demo import commands, data_steps, summary


def _doc(tag: str, sentences: int = 8) -> list[str]:
    """A document whose every sentence names `tag`: distinct tags give documents that share no shingle."""
    return [f"The {tag} sentence number {i} tells its own story of {tag} in a few plain words."
            for i in range(sentences)]


def _write(path, docs) -> str:
    path.write_text("\n\n".join("\n".join(d) for d in docs) + "\n", encoding="utf-8")
    return str(path)


def _split(tmp_path) -> tuple[dict, dict]:
    """Training documents with one exact copy (case and punctuation changed), one repeated three-sentence span
    and one near twin of a held-out document (one word changed); returns the split and the planted documents."""
    held = _doc("heldout")
    twin = [line.replace("plain", "simple") if i == 3 else line for i, line in enumerate(held)]
    original, span = _doc("alpha"), ["A span said once.", "A span said twice.", "A span said thrice."]
    planted = {"original": original, "copy": [line.upper().rstrip(".") for line in original], "twin": twin,
               "with_span": _doc("beta", 3) + span, "again_span": span + _doc("gamma", 3)}
    train = [planted["original"], _doc("delta"), planted["copy"], planted["with_span"], planted["twin"],
             planted["again_span"]]
    split = {"train": _write(tmp_path / "train.txt", train),
             "heldout": _write(tmp_path / "heldout.txt", [held, _doc("epsilon")])}
    return split, planted


def _documents(path) -> list[list[str]]:
    from demo.heldout import documents

    with open(path, encoding="utf-8") as f:
        return documents(f)


@pytest.mark.slow
def test_cleaning_step_drops_the_planted_duplicates_reports_them_and_is_reused(tmp_path, capsys, monkeypatch):
    split, planted = _split(tmp_path)
    out_dir = str(tmp_path / "cleaned")
    figures = data_steps.clean_training_text(split, out_dir)

    kept = _documents(figures["train"])
    assert kept == [planted["original"], _doc("delta"), planted["with_span"], _doc("gamma", 3)]  # the span once
    assert _documents(split["heldout"])[0] == _doc("heldout")  # the held-out text is left as it was
    assert {k: figures[k] for k in data_steps.CLEAN_COUNTERS} == {
        "kept": 4, "exact": 1, "near": 0, "span_sentences": 3, "span_emptied": 0, "heldout_exact": 0,
        "heldout_near": 1, "heldout_read": 2}
    assert figures["documents_seen"] == 6 and figures["dedup"] == "all"
    assert figures["summary"].startswith("clean: cleaning kept 4 of 6 documents")
    assert os.path.exists(figures["report"]) and os.path.exists(figures["report_md"])
    cell = summary.cleaning_cell(figures)
    assert cell.startswith("kept 4 of 6 training documents; removed: exact 1, near 0, held-out exact 0, "
                           "held-out near 1 (of 2); spans: 3 sentences")

    capsys.readouterr()
    calls = []
    monkeypatch.setattr(commands, "module", lambda *args, **kwargs: calls.append(args))
    assert data_steps.clean_training_text(split, out_dir) == figures  # same files: the job is not run again
    printed = capsys.readouterr().out
    assert calls == [] and f"reusing {out_dir}" in printed and figures["summary"] in printed

    held = _documents(split["heldout"])
    _write(tmp_path / "heldout.txt", held[1:])  # another held-out set: the step runs again
    data_steps.clean_training_text(split, out_dir)
    (call,) = calls
    assert call[0] == "pipeline.clean" and call[call.index("--decontaminate") + 1] == split["heldout"]
    assert "--overwrite" in call and "--runner=FnApiRunner" in call  # a small split: in-process


def test_the_summary_keeps_the_cleaning_figures_and_the_table_gets_a_row(tmp_path):
    record = {"counters": {"clean_documents_kept": 598, "dedup_span_sentences": 451, "heldout_documents": 36,
                           "dedup_exact_documents": 2},
              "documents_seen": 600, "summary": "clean: cleaning kept 598 of 600 documents (99.7%); removed: ...",
              "config": {"dedup": "all"}, "files": ["00000-train.txt"]}
    figures = data_steps.cleaning_figures(record, str(tmp_path / "00000-train.txt"), str(tmp_path / "r.json"))
    assert figures["report_md"] == str(tmp_path / "r.md")
    assert (figures["kept"], figures["exact"], figures["near"], figures["heldout_near"]) == (598, 2, 0, 0)
    assert json.loads(json.dumps(figures)) == figures  # it goes to summary.json as it is
    assert summary.cleaning_cell(figures) == (
        "kept 598 of 600 training documents; removed: exact 2, near 0, held-out exact 0, held-out near 0 (of 36); "
        "spans: 451 sentences, 0 documents emptied")
