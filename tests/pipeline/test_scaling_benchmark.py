"""The pure parts of benchmarks/data/scaling.py: how the Mx corpus is laid out (distinct documents, partitions that
grow with it), the figures (spread, shares) and the projection."""

import glob
import os

import pytest

from benchmarks.data.scaling import copy_names, linear_fit, make_corpora, project, share, split_documents, spread


def test_split_documents_keeps_order_and_balances_counts():
    documents = [[f"doc {i}."] for i in range(10)]
    parts = split_documents(documents, 4)
    assert [len(p) for p in parts] == [3, 3, 2, 2]
    assert [d for p in parts for d in p] == documents
    assert split_documents(documents[:2], 3) == [documents[:1], documents[1:2], []]


def test_copy_names_give_every_copy_new_file_indices_in_copy_order():
    names = copy_names(3, 2)
    assert len(set(names)) == 6
    assert sorted(names) == names  # the job indexes files in sorted order: copy 0's files come first
    assert names[:2] == copy_names(1, 2)  # a smaller multiple is a prefix: its documents keep their ids


def test_make_corpora_links_copies_of_the_base(tmp_path):
    documents = [[f"Sentence {i} a.", f"Sentence {i} b."] for i in range(5)]
    patterns = make_corpora(documents, [1, 3], 2, str(tmp_path))
    one, three = sorted(glob.glob(patterns[1])), sorted(glob.glob(patterns[3]))
    assert len(one) == 2 and len(three) == 6
    texts = [open(p).read() for p in three]
    assert texts[:2] == texts[2:4] == texts[4:] == [open(p).read() for p in one]
    assert texts[0].count("\n\n") == 3 and texts[1].count("\n\n") == 2  # 5 documents over 2 files
    assert os.stat(three[0]).st_ino == os.stat(three[2]).st_ino  # hard links, not copies


def test_spread_and_share():
    assert spread([2.0, 2.0, 2.0]) == 0.0
    assert spread([1.0, 1.05, 1.1]) == pytest.approx(0.1)
    assert spread([0.0, 1.0]) == float("inf")
    assert share(1.0, 3.0) == 0.25 and share(2.0, 1.0, 1.0) == 0.5 and share(0.0) == 0.0


def test_project_scales_with_words_and_divides_over_workers():
    p = project(instances_per_word=0.1, words=1e6, cpu_s_per_instance=3.6e-3, workers=4, startup_cpu_s_per_worker=900)
    assert p["instances"] == pytest.approx(1e5)
    assert p["core_hours"] == pytest.approx(0.1 + 1.0)  # 360 CPU-s of work + 4 x 900 s of start-up
    assert p["wall_hours"] == pytest.approx(1.1 / 4)


def test_linear_fit():
    intercept, slope = linear_fit([1.0, 2.0, 4.0], [3.0, 5.0, 9.0])
    assert (intercept, slope) == (pytest.approx(1.0), pytest.approx(2.0))
    assert linear_fit([2.0, 2.0], [1.0, 3.0]) == (2.0, 0.0)
