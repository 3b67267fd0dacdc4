"""SQuAD logic on hand-made inputs: windows with document stride, max-context, n-best span decoding with
hand-made logits, and the official v1.1 normalisation, exact match and F1."""

import numpy as np
import pytest

from downstream.finetune import squad
from downstream.finetune.squad import SquadExample

CONTEXT = "Paris is the capital of France. It has 2,100,000 people."


def _example(answers=(("France", 24),)):
    return SquadExample("q1", "Where is Paris?", CONTEXT, tuple(answers))


def test_units_keep_the_contexts_characters():
    units = squad.split_units(CONTEXT)
    assert [CONTEXT[a:b] for a, b in units][:8] == ["Paris", "is", "the", "capital", "of", "France", ".", "It"]
    assert [CONTEXT[a:b] for a, b in units][-7:] == ["2", ",", "100", ",", "000", "people", "."]
    assert squad.answer_units(units, 24, "France") == (5, 5)
    assert squad.answer_units(units, 13, "capital of France") == (3, 5)
    assert squad.answer_units(units, 500, "x") is None


def test_official_normalisation_exact_match_and_f1():
    assert squad.normalize_answer("The  Cat!") == "cat"
    assert squad.normalize_answer("an apple, a pear and THE plum.") == "apple pear and plum"
    assert squad.normalize_answer("theatre") == "theatre"  # articles only as whole words
    assert squad.exact_match("the Eiffel Tower.", "Eiffel tower") == 1.0
    assert squad.exact_match("Eiffel", "Eiffel tower") == 0.0
    assert squad.f1("the cat sat", "cat sat on mat") == pytest.approx(2 * 1.0 * 0.5 / 1.5)
    assert squad.f1("a", "the") == 0.0  # both normalise to nothing: no common token
    examples = [SquadExample("a", "", "", (("Denver Broncos", 0), ("Broncos", 0))),
                SquadExample("b", "", "", (("1973", 0),)), SquadExample("c", "", "", (("x", 0),))]
    scores = squad.evaluate(examples, {"a": "the Broncos", "b": "in 1973"})  # c unanswered: 0
    assert scores["exact_match"] == pytest.approx(100 / 3)
    assert scores["f1"] == pytest.approx(100 * (1.0 + 2 * 0.5 * 1.0 / 1.5) / 3)


def test_doc_windows_and_max_context_follow_google_research_bert():
    assert squad.doc_windows(10, 4, 3) == [(0, 4), (3, 4), (6, 4)]
    assert squad.doc_windows(3, 4, 3) == [(0, 3)]
    windows = squad.doc_windows(10, 4, 3)
    # position 3: last of window 0 (score 0 + 0.04) and first of window 1 (0 + 0.04): the first wins
    assert [squad.is_max_context(windows, w, 3) for w in range(3)] == [True, False, False]
    # position 4: window 1 gives one piece of context left and two right
    assert [squad.is_max_context(windows, w, 4) for w in range(3)] == [False, True, False]


def _features(max_seq_length=12, stride=3, training=True, example=None):
    example = example or _example()
    units = [CONTEXT[a:b] for a, b in squad.split_units(CONTEXT)]
    pieces = [[100 + i] if u != "capital" else [100 + i, 200] for i, u in enumerate(units)]  # capital: 2 pieces
    return squad.make_features([example], [pieces], [[50, 51]], cls_id=2, sep_id=3, max_seq_length=max_seq_length,
                               doc_stride=stride, max_query_length=8, training=training), units


def test_features_have_stride_windows_maps_and_answer_positions():
    features, units = _features()
    first = features[0]
    # [CLS] q q [SEP] + 7 context pieces + [SEP] = 12
    assert first.input_word_ids == [2, 50, 51, 3, 100, 101, 102, 103, 200, 104, 105, 3]
    assert first.input_type_ids == [0, 0, 0, 0] + [1] * 8
    assert first.input_mask == [1] * 12
    assert first.token_to_unit == {4: 0, 5: 1, 6: 2, 7: 3, 8: 3, 9: 4, 10: 5}
    assert (first.start_position, first.end_position) == (10, 10)  # "France" is in the first window
    second = features[1]  # starts 3 pieces later
    assert second.input_word_ids[4:6] == [103, 200] and second.token_to_unit[4] == 3
    assert (second.start_position, second.end_position) == (7, 7)
    last = features[-1]
    assert last.input_word_ids[-1] == 0 or last.input_word_ids.count(3) == 2
    assert (last.start_position, last.end_position) == (0, 0)  # answer outside: [CLS]
    pieces_total = len(units) + 1
    assert last.token_to_unit[max(last.token_to_unit)] == len(units) - 1
    assert sum(1 for f in features) == len(squad.doc_windows(pieces_total, 12 - 2 - 3, 3))
    spanning, _ = _features(example=_example((("capital of France", 13),)))
    assert (spanning[0].start_position, spanning[0].end_position) == (7, 10)  # both pieces of "capital"


def test_best_answers_decodes_legal_spans_from_logits():
    features, _ = _features(training=False)
    example = _example()
    first = features[0]
    start, end = np.full(12, -5.0), np.full(12, -5.0)
    start[0], end[0] = 9.0, 9.0  # [CLS] is never an answer
    start[7], start[6] = 4.0, 2.0  # "capital", "the"
    end[10], end[9] = 3.0, 1.0  # "France", "of"
    end[5] = 8.0  # "is": before both starts, never legal
    answers = squad.best_answers(example, [(first, start, end)], n_best=4, max_answer_length=30)
    texts = [a for a, _ in answers]
    assert texts[0] == "capital of France" and texts[-1] == "the capital of"
    assert sorted(texts[1:3]) == ["capital of", "the capital of France"]
    assert sum(p for _, p in answers) == pytest.approx(1.0)
    assert answers[0][1] == pytest.approx(np.exp(7) / (np.exp(7) + 2 * np.exp(5) + np.exp(3)))
    # "capital of France" is 4 pieces ("capital" has two): too long for max_answer_length 3.
    shorter = squad.best_answers(example, [(first, start, end)], n_best=4, max_answer_length=3)
    assert [a for a, _ in shorter] == ["capital of"]


def test_best_answers_reads_a_piece_only_in_its_max_context_window():
    features, _ = _features(training=False)
    first, second = features[0], features[1]
    # "capital"'s first piece is position 7 in window 0 and 4 in window 1; window 1 has more context for it?
    pos_first, pos_second = 7, 4
    assert first.is_max_context[pos_first] != second.is_max_context[pos_second]
    start0, end0 = np.full(12, -5.0), np.full(12, -5.0)
    start1, end1 = np.full(12, -5.0), np.full(12, -5.0)
    start0[pos_first], end0[pos_first + 1] = 10.0, 10.0
    start1[pos_second], end1[pos_second + 1] = 1.0, 1.0
    answers = squad.best_answers(_example(), [(first, start0, end0), (second, start1, end1)], n_best=5)
    kept = answers[0][1]
    assert answers[0][0] == "capital" and kept > 0.0
    only = squad.best_answers(_example(), [(first if first.is_max_context[pos_first] else second,
                                            start0 if first.is_max_context[pos_first] else start1,
                                            end0 if first.is_max_context[pos_first] else end1)], n_best=1)
    assert only[0][0] == "capital"


def test_no_legal_span_gives_the_empty_answer_and_the_baseline_is_the_first_sentence():
    features, _ = _features(training=False)
    start, end = np.zeros(12), np.zeros(12)
    feature = features[0]
    feature.is_max_context = {k: False for k in feature.is_max_context}
    assert squad.best_answers(_example(), [(feature, start, end)]) == [("", 1.0)]
    assert squad.first_sentence(CONTEXT) == "Paris is the capital of France."
    assert squad.first_sentence("No end") == "No end"
