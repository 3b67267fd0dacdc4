"""A long line costs memory in proportion to what the module reads, never more (issue 38, serious case 2):
only a line's first MiB, and of it only a window's worth of words, is split and tokenized, in
`downstream.features` / `downstream.embed` (`split_words`, `ModuleEncoder.encode`) and in fine-tuning
(`window_text`, task files read line by line to their first MiB). Also: an empty label or tag is refused."""

import json
import os
import re
import subprocess
import sys

import pytest

from downstream.features import ModuleEncoder
from downstream.words import SLICE_BYTES, split_words, text_slices, window_text
from downstream.finetune import task_data
from downstream.finetune import tasks
from tests.conftest import ROOT

# Peak RSS (ru_maxrss) of splitting one line of N words to a BERT window (126 words), in a fresh process: the
# probe runs a small line first, so TensorFlow's own start-up memory is in the baseline, then the big one.
PROBE = r"""
import json, resource, sys
from downstream.words import split_words, window_text
def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10  # MB
split_words(["warm up " * 100], 126)
window_text("warm up " * 1000, 126)
base = peak()
for words in map(int, sys.argv[1:]):
    line = " ".join(["riverbank,"] * words)
    kept = split_words([line], 126)[0]
    prefix = window_text(line, 126)
    print(json.dumps({"words": words, "kept": len(kept), "prefix": len(prefix), "grown_mb": peak() - base}))
"""


@pytest.mark.slow
def test_peak_memory_is_flat_from_a_1k_to_a_100k_word_line():
    proc = subprocess.run([sys.executable, "-c", PROBE, "1000", "100000"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 0, proc.stderr
    small, big = [json.loads(line) for line in proc.stdout.splitlines()]
    # before: the whole line was split at once, repeating it once per word (10k words +0.95 GB, 40k over 6.5 GB)
    assert big["grown_mb"] - small["grown_mb"] < 20, (small, big)
    assert 126 < big["kept"] < 2000 and big["prefix"] < 16 * SLICE_BYTES  # a window's worth, not 100k words


def test_slices_split_to_the_same_words_as_the_whole_line():
    words = ["Café,", "naïve", "(banks)", "中文字", "a.b.c", "..!!??", "x" * 30, "\u3000", "日本語のテキスト"]
    mixed = " ".join(words * 90)
    for text in (mixed, "中" * 3000 + " " + ".," * 1500 + "abc"):
        slices, cut = text_slices(text)
        assert "".join(slices) == text and not cut and max(len(s.encode()) for s in slices) <= SLICE_BYTES
        whole = split_words.__globals__["_split"]([text])[0]  # the splitter on the whole text at once
        assert split_words([text]) == [whole]
        assert split_words([window_text(text, 50)])[0][:50] == whole[:50]
    huge = "word " * (300 << 10)  # 1.5 MiB: only the first MiB is read
    slices, cut = text_slices(huge)
    assert cut and sum(len(s) for s in slices) <= 1 << 20


def test_the_module_encodes_a_long_line_as_its_window(tiny_models):
    encoder = ModuleEncoder(tiny_models["bert"].export_dir)
    sentence = "the river bank flooded after three days of rain"
    [short, long] = encoder.encode([sentence, " ".join([sentence] * 300)])
    assert long.words == short.words[:len(long.words)] + long.words[len(short.words):] and 0 < len(long.words) <= \
        encoder.max_pieces
    first = encoder.encode([" ".join(long.words)])[0]
    assert first.words == long.words
    assert abs(first.hidden - long.hidden).max() < 1e-5


def test_task_files_are_read_to_the_first_mib_of_a_line_and_labels_are_not_empty(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_bytes(b"pos\tgood film\n" + b"neg\t" + b"bad film " * (200 << 10) + b"\n" + b"pos\tfine\n")
    cut = []
    examples = tasks.get("classify").read(str(path), cut=cut)
    assert [e.label for e in examples] == ["pos", "neg", "pos"] and cut == [2]
    assert len(examples[1].texts[0].encode()) <= task_data.MAX_LINE_BYTES
    for name, text, said in (("c.tsv", "pos\tgood\n\tno label\n", "c.tsv:2: the label (the first field) is empty"),
                             ("t.conll", "The\tDET\nbank\t\n", "t.conll:2: no tag in column 1")):
        (tmp_path / name).write_text(text)
        with pytest.raises(task_data.TaskDataError, match=re.escape(said)):
            tasks.get("tag" if name.endswith("conll") else "classify").read(str(tmp_path / name))
