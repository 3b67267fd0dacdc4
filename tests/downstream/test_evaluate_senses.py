"""`downstream.evaluate_senses`: leave-one-out nearest-neighbour accuracy and the baselines on hand-made vectors
whose answers are known, the WiC threshold protocol, and the CLI end to end on a tiny exported biLM (its
static `word_emb` scores exactly the all-tied leave-one-out MFS; the last line is the JSON summary; the PNG)."""

import json

import numpy as np
import pytest

from commands.user_errors import UserError
from downstream import evaluate_senses as ev

SENSES = ["A", "A", "B", "B", "X", "X"]
LEMMAS = ["bank", "bank", "bank", "bank", "solo", "solo"]  # "solo" has one sense: left out


def test_groups_keep_only_lemmas_with_two_senses():
    assert ev.sense_groups(LEMMAS, SENSES) == {"bank": [0, 1, 2, 3]}


def test_nearest_neighbour_accuracy_on_known_answers():
    groups = ev.sense_groups(LEMMAS, SENSES)
    apart = np.array([[1, 0], [0.9, 0.1], [0, 1], [0.1, 0.9], [1, 1], [1, 1]], np.float32)
    assert ev.nn_accuracy(apart, SENSES, groups) == 1.0
    crossed = np.array([[1, 0], [0, 1], [0.9, 0.1], [0.1, 0.9], [1, 1], [1, 1]], np.float32)
    assert ev.nn_accuracy(crossed, SENSES, groups) == 0.0
    # Cosine, not distance: a scaled copy is the nearest neighbour.
    scaled = np.array([[1, 0], [5, 0.1], [0.7, 0.7], [0, 1], [1, 1], [1, 1]], np.float32)
    assert ev.nearest_neighbours(scaled, SENSES, groups)[0] == ("A", 1)
    assert ev.nn_accuracy(scaled, SENSES, groups) == 0.75  # [0.7, 0.7] is nearest [5, 0.1] (A): wrong


def test_static_vectors_tie_and_vote_to_the_leave_one_out_mfs():
    senses = ["A", "A", "A", "B", "C", "C"]
    groups = ev.sense_groups(["w"] * 6, senses)
    same = np.ones((6, 3), np.float32)
    base = ev.baselines(senses, groups)
    assert base["baseline"] == pytest.approx(3 / 6)
    # Leave-one-out: A's keep a majority of A among the others (3 right); B loses to A; C's see A,A,A,B,C: wrong.
    assert base["baseline_loo"] == pytest.approx(3 / 6)
    assert base["chance"] == pytest.approx((3 * 2 / 5 + 0 + 2 * 1 / 5) / 6)
    assert ev.nn_accuracy(same, senses, groups) == pytest.approx(base["baseline_loo"])


def test_post_processing_removes_a_common_direction_that_hides_the_senses():
    """Each occurrence: a small sense-telling part plus a large direction shared by all and a large rogue
    dimension whose value is noise: raw cosines follow the noise; centring removes the shared direction (the
    rogue noise still leads); standardising scales the rogue dimension down to the others and finds the senses."""
    rng = np.random.default_rng(0)
    senses = ["A"] * 10 + ["B"] * 10
    groups = ev.sense_groups(["w"] * 20, senses)
    sense_part = np.array([[1.0, 0.0] if s == "A" else [0.0, 1.0] for s in senses]) * 0.1  # [20, 2]
    common = np.full((20, 1), 50.0)  # [20, 1]: the same for every occurrence
    rogue = rng.normal(0, 5.0, (20, 1))  # [20, 1]: large and unrelated to the sense
    vectors = np.concatenate([sense_part + rng.normal(0, 0.01, (20, 2)), common, rogue], axis=1)
    assert ev.postprocess(vectors, "centred").mean(0) == pytest.approx(np.zeros(4), abs=1e-9)
    assert ev.postprocess(vectors, "standardised")[:, [0, 1, 3]].std(0) == pytest.approx(np.ones(3))
    raw = ev.nn_accuracy(vectors, senses, groups)
    assert ev.nn_accuracy(ev.postprocess(vectors, "standardised"), senses, groups) == 1.0 > raw
    with pytest.raises(ValueError, match="unknown post-processing"):
        ev.postprocess(vectors, "whitened")


def test_a_sense_is_labelled_by_its_shortened_gloss():
    row = {"synset": "09236472-n", "lexname": "noun.object",
           "gloss": "sloping land (especially the slope beside a body of water); another clause"}
    assert ev.sense_label(row) == "sloping land (especially the slope beside a body… (noun.object)"
    assert ev.sense_label({**row, "gloss": "a bank"}) == "a bank (noun.object)"
    assert ev.sense_label({"synset": "09236472-n", "lexname": "noun.object"}) == "09236472-n (noun.object)"


def test_threshold_and_split_protocol():
    sims = np.array([0.1, 0.2, 0.8, 0.9, 0.5])
    labels = np.array([False, False, True, True, False])
    t = ev.best_threshold(sims, labels)
    assert 0.5 < t < 0.8
    pairs = [{"lemma": f"w{i}", "split": s} for i, s in enumerate(["train", "test", "dev", "train"])]
    tune, test = ev.wic_split(pairs)
    assert tune.tolist() == [True, False, False, True] and test.tolist() == [False, True, False, False]
    no_split = [{"lemma": f"w{i}"} for i in range(40)]
    tune, test = ev.wic_split(no_split)
    assert (tune ^ test).all() and 10 < tune.sum() < 30
    assert ev.wic_split(no_split)[0].tolist() == tune.tolist()  # deterministic
    a = np.array([[1, 0], [1, 0], [1, 0], [1, 0]], np.float32)
    b = np.array([[1, 0.1], [0, 1], [1, 0.2], [0.1, 1]], np.float32)
    acc, _ = ev.wic_accuracy(a, b, np.array([True, False, True, False]), np.array([True, True, False, False]),
                             np.array([False, False, True, True]))
    assert acc == 1.0


SENTENCES = [  # (lemma, synset, lexname, sentence, word)
    ("bank", "river", "noun.object", "they sat on the bank of the river", "bank"),
    ("bank", "river", "noun.object", "the river bank was muddy", "bank"),
    ("bank", "river", "noun.object", "fish swam near the bank", "bank"),
    ("bank", "money", "noun.group", "the bank raised its interest rates", "bank"),
    ("bank", "money", "noun.group", "he cashed a check at the bank", "bank"),
    ("play", "theatre", "noun.communication", "she went to see a play", "play"),
    ("play", "theatre", "noun.communication", "the play ran for a year", "play"),
    ("play", "game", "verb.competition", "children play football", "play"),
    ("play", "game", "verb.competition", "they play cards", "play"),
    ("rate", "rate", "noun.attribute", "interest rates rose", "rates"),
]


@pytest.fixture(scope="module")
def bilm_export(tiny_models):
    return tiny_models["bilm"].export_dir


def _write_data(tmp_path):
    data = tmp_path / "senses.jsonl"
    with open(data, "w") as f:
        for lemma, synset, lexname, sentence, word in SENTENCES:
            start = sentence.index(word)
            f.write(json.dumps({"lemma": lemma, "pos": "n", "synset": synset, "lexname": lexname,
                                "sentence": sentence, "start": start, "end": start + len(word)}) + "\n")
    pairs = tmp_path / "pairs.tsv"
    rows = ["split\tlemma\tpos\tsame_sense\tdiff_lexname\tstart1\tend1\tstart2\tend2\tsentence1\tsentence2"]
    for split, (i, j) in [("train", (0, 1)), ("train", (0, 3)), ("test", (5, 6)), ("test", (6, 7)), ("dev", (3, 4))]:
        a, b = SENTENCES[i], SENTENCES[j]
        s1, s2 = a[3].index(a[4]), b[3].index(b[4])
        rows.append(f"{split}\t{a[0]}\tn\t{int(a[1] == b[1])}\t0\t{s1}\t{s1 + len(a[4])}\t{s2}\t{s2 + len(b[4])}"
                    f"\t{a[3]}\t{b[3]}")
    pairs.write_text("\n".join(rows) + "\n")
    return str(data), str(pairs)


def test_cli_reports_layers_baselines_neighbours_json_and_png(bilm_export, tmp_path, capsys):
    data, pairs = _write_data(tmp_path)
    png = tmp_path / "bank.png"
    assert ev.main(["--module", bilm_export, "--data", data, "--pairs", pairs, "--png", str(png),
                    "--examples", "bank,play,plant", "--batch_size", "4"]) == 0
    out = capsys.readouterr().out
    lines = out.strip().splitlines()
    summary = json.loads(lines[-1])
    assert set(summary["layers"]) == {"word_emb", "lstm_outputs1", "lstm_outputs2", "sum_last4", "concat_last4",
                                      "weighted_all", "elmo"}
    assert set(summary["layers_centred"]) == set(summary["layers_standardised"]) == set(summary["layers"])
    assert summary["accuracy"] == summary["layers"][summary["best_layer"]] == max(summary["layers"].values())
    assert (summary["lemmas"], summary["occurrences"]) == (2, 9)  # "rate" has one sense
    assert summary["baseline"] == pytest.approx(5 / 9)
    # word_emb is context-free and every occurrence is the same word: all tie, the vote is the LOO MFS.
    assert summary["static_layer"] == "word_emb"
    assert summary["static_accuracy"] == pytest.approx(summary["baseline_loo"])
    assert summary["wic_pairs"] == {"tune": 2, "test": 2}
    assert 0.0 <= summary["wic_accuracy"] <= 1.0 and summary["wic_majority"] == 0.5
    assert "ceiling of any static, context-free embedding" in out
    assert "plant: not in the data" in out
    assert "-> same" in out or "-> DIFF" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


def test_the_python_api_gives_the_commands_figures_and_refuses_a_word_it_cannot_draw(bilm_export, tmp_path,
                                                                                    capsys):
    data, pairs = _write_data(tmp_path)
    assert ev.main(["--module", bilm_export, "--data", data, "--batch_size", "4", "--examples", "bank"]) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    result = ev.run(ev.SensesJob(module=bilm_export, data=data, batch_size=4, examples=("bank",)))
    assert result.summary == printed and result.png is None
    assert "bank (" in capsys.readouterr().out  # the report, as the command prints it
    with pytest.raises(UserError, match="--png_word 'rate' has no occurrences with >= 2 senses"):
        ev.run(ev.SensesJob(module=bilm_export, data=data, png=str(tmp_path / "x.png"), png_word="rate"))
    assert not (tmp_path / "x.png").exists()
    with pytest.raises(UserError, match="--data .*: no such file"):
        ev.run(ev.SensesJob(module=bilm_export, data=str(tmp_path / "none.jsonl")))
