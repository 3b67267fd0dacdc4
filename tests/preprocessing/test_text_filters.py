"""Line and document filters (each rule on a table), the c4 preset, and the `--filters` / `--dedup` specs."""

import random

import pytest

from preprocessing import dedup_config, near_duplicates, text_filters as tf_
from preprocessing.text_filters import FilterConfig, filter_document, line_rule


@pytest.mark.parametrize("line, config, rule", [
    ("Four words only here.", FilterConfig(min_words_per_line=5), "min_words_per_line"),
    ("Five words are here now.", FilterConfig(min_words_per_line=5), None),
    ("No full stop at the end", FilterConfig(terminal_punctuation=True), "terminal_punctuation"),
    ('He said "yes."', FilterConfig(terminal_punctuation=True), None),
    ("Is it? ", FilterConfig(terminal_punctuation=True), None),
    ("Read our Privacy Policy.", FilterConfig(boilerplate=("privacy policy",)), "boilerplate"),
    ("A policy on privacy.", FilterConfig(boilerplate=("privacy policy",)), None),
    ("| 12 | 3.4 | 56 |", FilterConfig(max_non_letter_share=0.5), "max_non_letter_share"),
    ("Mostly letters, 1 digit.", FilterConfig(max_non_letter_share=0.5), None),
    ("short", FilterConfig(min_words_per_line=3, terminal_punctuation=True), "min_words_per_line"),  # first rule
    ("anything at all", FilterConfig(), None),
])
def test_line_rules(line, config, rule):
    assert line_rule(line, config) == rule


def test_non_letter_share():
    assert tf_.non_letter_share("ab 12") == 0.5 and tf_.non_letter_share("   ") == 0.0


def test_documents_lose_lines_then_short_documents_go():
    config = FilterConfig(min_words_per_line=3, min_sentences=2)
    kept, counts = filter_document(["one two three.", "too short", "four five six."], config)
    assert kept == ["one two three.", "four five six."] and counts == {"filter_min_words_per_line": 1}
    kept, counts = filter_document(["one two three.", "too short"], config)
    assert kept == [] and counts == {"filter_min_words_per_line": 1, "filter_min_sentences": 1}
    kept, counts = filter_document(["x", "y"], config)
    assert kept == [] and counts == {"filter_min_words_per_line": 2, "filter_documents_emptied": 1}


def test_c4_preset_on_a_web_page():
    config, _ = tf_.parse_spec("c4", FilterConfig, tf_.PRESETS)
    page = ["Home | About | Contact", "This page uses cookies to improve your experience.",
            "The river rose three feet overnight after the storm.", "Residents were told to stay indoors.",
            "Officials expect the water to fall by Friday morning.", "Share this", "Copyright 2024 all rights"]
    kept, counts = filter_document(page, config)
    assert kept == page[2:5]
    assert counts == {"filter_min_words_per_line": 2, "filter_terminal_punctuation": 1, "filter_boilerplate": 1}
    assert filter_document(page[2:4], config) == ([], {"filter_min_sentences": 1})


def test_default_filters_are_off():
    assert not FilterConfig().active and tf_.parse_spec("", FilterConfig, tf_.PRESETS)[0] == FilterConfig()


@pytest.mark.parametrize("spec, field, value", [
    ("c4,min_words_per_line=3", "min_words_per_line", 3),
    ("terminal_punctuation", "terminal_punctuation", True),
    ("c4,terminal_punctuation=off", "terminal_punctuation", False),
    ("boilerplate=Lorem Ipsum|click here", "boilerplate", ("lorem ipsum", "click here")),
    ("max_non_letter_share=0.25", "max_non_letter_share", 0.25),
])
def test_filter_specs(spec, field, value):
    assert getattr(tf_.parse_spec(spec, FilterConfig, tf_.PRESETS)[0], field) == value


@pytest.mark.parametrize("spec", ["c5", "min_words=3", "min_words_per_line=many", "terminal_punctuation=maybe"])
def test_bad_filter_specs_name_the_problem(spec):
    with pytest.raises(ValueError, match="in '"):
        tf_.parse_spec(spec, FilterConfig, tf_.PRESETS)


def test_dedup_specs():
    assert dedup_config.parse_dedup("all") == dedup_config.DedupConfig(exact=True, spans=True, near=True)
    config = dedup_config.parse_dedup("near,threshold=0.9,bands=20,num_perm=100")
    assert (config.near, config.exact, config.minhash.rows, config.threshold) == (True, False, 4, 0.9)
    assert dedup_config.parse_dedup("near,bands=20,band_rows=0").minhash.rows == 6  # all 120 values banded
    assert not dedup_config.parse_dedup("").active
    with pytest.raises(ValueError):
        dedup_config.parse_dedup("near,bands=31")  # 31 bands of 4 need 124 values of 120
    with pytest.raises(ValueError):
        dedup_config.parse_dedup("near,bands=7,band_rows=0")  # 120 values do not cut into 7 bands
    with pytest.raises(ValueError, match="unknown"):
        dedup_config.parse_dedup("fuzzy")


TRICKY = list("aZ _-.,!?\t ") + ["\u03a3", "\u03c3", "\u0391", "\u0301", "\u0308", "\u0344", "\u1100", "\u1161",
                                   "\u11a8", "\uac00", "\ufb01", "\u0130", "\u00df", "\u212b", "e\u0301", "\u0345",
                                   "\u3000", "\u00a0", "\u200d", "\u00ad", "\u02b0", "\u2019", "\u01c5", "\u1f88",
                                   "\uff21", "\u2460", "\u00bd", "_"]


def test_span_digests_are_the_digests_of_the_joined_lines():
    """`copy_digests` normalises each line once: the same digests as the span's (and the document's) lines
    joined by new lines, also for final sigmas, combining marks, jamo, ligatures and lines of punctuation only."""
    rng = random.Random(2)
    for _ in range(3000):
        lines = ["".join(rng.choice(TRICKY) for _ in range(rng.randrange(6))) for _ in range(rng.randrange(3, 6))]
        want = [near_duplicates.text_digest("\n".join(lines[i:i + 3])) for i in range(len(lines) - 2)]
        document, spans = dedup_config.copy_digests(lines, 3)
        assert spans == want and document == near_duplicates.text_digest("\n".join(lines)), lines


def test_span_digests_and_removal():
    lines = ["A b.", "C d.", "E f.", "G h."]
    _, spans = dedup_config.copy_digests(lines, 3)
    assert len(spans) == 2 and spans[0] == dedup_config.copy_digests(["a B", "c D", "e F"], 3)[1][0]
    assert dedup_config.copy_digests(lines[:2], 3)[1] == [] and dedup_config.copy_digests(lines, 0)[1] == []
    assert spans == [near_duplicates.text_digest("\n".join(lines[i:i + 3])) for i in (0, 1)]
    assert dedup_config.remove_positions(lines, [0, 1], 3) == []
    assert dedup_config.remove_positions(lines, [1], 2) == ["A b.", "G h."]
