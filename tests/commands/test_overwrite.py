"""The one `--overwrite` contract (`commands.overwrite`, issues 38 and 46): everything is validated first; only
the earlier run's own outputs, as its record lists them, are removed; a folder holding another kind of output
(the converters' formats too) is refused naming it; an output folder a rerun would read as input is refused;
a folder that is no model_dir is named by what it holds. Here on the pure plan, and on
the two commands that lost data: `downstream.finetune --overwrite` (deleted before its checks) and
`downstream.finetune --output_dir EXPORT` (read as an earlier fine-tuning, then destroyed)."""

import json
import os

import pytest

from downstream.finetune import cli as finetune
from commands import overwrite
from commands.user_errors import UserError
from tests.fixtures.tiny_models import copy_of


def _tree(root, names: dict):
    """Writes `names` (path -> text, or None for a folder) under `root`."""
    for name, text in names.items():
        path = root / name
        if text is None:
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    return root


CLEAN_RUN = {"00000-a.txt": "a\n", "00001-b.txt": "b\n", "clean_report.md": "#",
             "clean_report.json": json.dumps({"counters": {}, "files": ["00000-a.txt", "00001-b.txt"]}),
             "notes.txt": "mine", ".00002-c.txt.incomplete": ""}


def test_overwrite_removes_exactly_what_the_record_lists(tmp_path):
    out = _tree(tmp_path / "cleaned", CLEAN_RUN)
    with pytest.raises(UserError, match=r"already holds a run of pipeline.clean \(clean_report.json, clean_report.md, "
                                        r"00000-a.txt, \.\.\.\): pass --overwrite"):
        overwrite.plan(str(out), overwrite.CLEAN, False)
    plan = overwrite.plan(str(out), overwrite.CLEAN, True)
    assert plan.names[0] == "clean_report.json"  # the record first: a half-cleared folder never looks finished
    assert sorted(os.listdir(out)) == sorted(CLEAN_RUN)  # nothing removed by the plan itself
    plan.remove()
    assert sorted(os.listdir(out)) == ["notes.txt"]  # the user's file stays


@pytest.mark.parametrize("entry", ["../victim.txt", "VICTIM", "sub/00000-a.txt", ".", ""])
def test_a_record_that_names_files_outside_its_folder_is_refused(tmp_path, entry):
    victim = _tree(tmp_path, {"victim.txt": "keep"}) / "victim.txt"
    entry = str(victim) if entry == "VICTIM" else entry
    record = {"clean_report.json": json.dumps({"counters": {}, "files": [entry, "00000-a.txt"]}), "00000-a.txt": ""}
    out = _tree(tmp_path / "out", record)
    with pytest.raises(UserError, match=f"its clean_report.json lists '{entry}', which is not a file name of this "
                                        f"folder"):
        overwrite.plan(str(out), overwrite.CLEAN, True)
    assert victim.exists() and sorted(os.listdir(out)) == sorted(record)


HF_BERT = {"config.json": json.dumps({"model_type": "bert"}), "model.safetensors": "", "vocab.txt": "[PAD]\n"}
KERAS_PRESET = {"config.json": json.dumps({"module": "keras_hub.src.models.bert.bert_backbone",
                                           "class_name": "BertBackbone"}), "model.weights.h5": "", "assets": None}


@pytest.mark.parametrize("kind, names, said", [
    (overwrite.FINETUNE, {"export.json": "{}", "hub": None, "serving": None}, "an export of serving.export"),
    (overwrite.EMBED, {"config.json": "{}", "checkpoint": "", "ckpt-2.index": ""},
     "a training model_dir of models.training.train"),
    (overwrite.EMBED, {"metadata.json": json.dumps({"schema_version": 3, "files": ["bert-00000-of-00001.tfrecord"]}),
                       "bert-00000-of-00001.tfrecord": ""}, "a run of pipeline.pretraining_data"),
    (overwrite.PRETRAINING_DATA, {"metadata.json": json.dumps({"module": {}, "choices": ["last"], "files": []})},
     "a run of downstream.embed"),
    (overwrite.PRETRAINING_DATA, CLEAN_RUN, "a run of pipeline.clean"),
    (overwrite.CLEAN, {"finetune_config.json": "{}", "model": None}, "a run of downstream.finetune"),
    # the converters' formats (issue 46), told apart by their config files
    (overwrite.FINETUNE, HF_BERT, "a HuggingFace BERT checkpoint in the hf_bert format"),
    (overwrite.HF_BERT, {"config.json": "{}", "checkpoint": "", "ckpt-0.index": ""},
     "a training model_dir of models.training.train"),
    (overwrite.HF_GPT, HF_BERT, "a HuggingFace BERT checkpoint in the hf_bert format"),
    (overwrite.HF_BERT, {"config.json": json.dumps({"model_type": "openai-gpt"}), "model.safetensors": ""},
     "a HuggingFace openai-gpt checkpoint in the hf_gpt format"),
    (overwrite.KERAS_HUB, {"bert_config.json": json.dumps({"num_hidden_layers": 2}), "bert_model.ckpt.index": ""},
     "a google-research BERT checkpoint in the bert_tf1 format"),
    (overwrite.HF_BERT, KERAS_PRESET, "a keras-hub preset in the keras_hub format"),
    (overwrite.BERT_TF1, {"options.json": json.dumps({"lstm": {}, "char_cnn": {}}), "weights.hdf5": ""},
     "a bilm-tf checkpoint in the bilm_hdf5 format"),
    (overwrite.BILM_HDF5, {"export.json": "{}", "hub": None}, "an export of serving.export"),
])
@pytest.mark.parametrize("given", [False, True])
def test_another_kind_of_output_is_refused_naming_it_even_with_overwrite(tmp_path, kind, names, said, given):
    out = _tree(tmp_path / "out", names)
    with pytest.raises(UserError, match=f"holds {said}"):
        overwrite.plan(str(out), kind, given)
    assert sorted(os.listdir(out)) == sorted(names)


def test_a_folder_that_is_no_model_dir_is_named_by_what_it_holds(tmp_path):
    """What `serving.export` and `models.convert --to` say of a `--model_dir` whose config.json is not a
    model_dir's (it was `error: 'model'`), issue 46."""
    ours = _tree(tmp_path / "ours", {"config.json": json.dumps({"model": "bert", "model_config": {}}),
                                     "checkpoint": ""})
    overwrite.require_model_dir(str(ours))
    overwrite.require_model_dir(str(_tree(tmp_path / "empty", {})))  # left to the reader: no config.json
    replaced = _tree(tmp_path / "replaced", {**HF_BERT, "checkpoint": "", "ckpt-0.index": ""})
    with pytest.raises(UserError, match=r"--model_dir \S+replaced holds a HuggingFace BERT checkpoint in the hf_bert "
                                        r"format \(config.json, model.safetensors, vocab.txt\), not a model_dir of "
                                        r"models.training.train or models.convert --from"):
        overwrite.require_model_dir(str(replaced))
    export = _tree(tmp_path / "export", {"export.json": "{}", "hub": None})
    with pytest.raises(UserError, match=r"holds an export of serving.export \(export.json, hub/\), not a model_dir"):
        overwrite.require_model_dir(str(export))
    other = _tree(tmp_path / "other", {"config.json": json.dumps({"model_type": "roberta"})})
    with pytest.raises(UserError, match="has a config.json that names no model family, not a model_dir"):
        overwrite.require_model_dir(str(other))


def test_an_output_folder_a_rerun_would_read_is_refused(tmp_path):
    corpus = _tree(tmp_path / "corpus", {"a.txt": "x\n"})
    with pytest.raises(UserError, match="is the folder of the input file"):
        overwrite.plan(str(corpus), overwrite.CLEAN, True, input_files=[str(corpus / "a.txt")])
    reads = lambda path: path.startswith(str(corpus) + "/")  # noqa: E731  (a `**` pattern)
    with pytest.raises(UserError, match="lies where the input pattern reaches"):
        overwrite.plan(str(corpus / "cleaned"), overwrite.CLEAN, True, reads=reads)
    overwrite.plan(str(corpus / "cleaned"), overwrite.CLEAN, True, input_files=[str(corpus / "a.txt")])  # fine
    with pytest.raises(UserError, match=r"is inside --module"):
        overwrite.plan(str(tmp_path / "export" / "ft"), overwrite.FINETUNE, True,
                       input_folders={"--module": str(tmp_path / "export")})


def test_hidden_remains_of_a_failed_run_go_with_the_next_run(tmp_path):
    out = _tree(tmp_path / "emb", {".staging-0123456789ab": None, "embedded_from.json": "{}"})
    plan = overwrite.plan(str(out), overwrite.EMBED, False)  # no earlier run: no --overwrite needed
    plan.remove()
    assert os.listdir(out) == ["embedded_from.json"]


def _finetune(module, out, train, eval_path, *more):
    return finetune.main(["--task", "classify", "--module", str(module), "--train", str(train), "--eval",
                          str(eval_path), "--output_dir", str(out), *more])


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def test_finetune_overwrite_keeps_the_earlier_run_when_the_new_one_is_refused(tiny_models, tmp_path, capsys):
    """Serious case 4: the eval labels check refuses the run; the earlier fine-tuning must still be there."""
    train = _tree(tmp_path, {"train.tsv": "pos\tthe bank\nneg\tthe river\n"}) / "train.tsv"
    unseen = _tree(tmp_path, {"eval.tsv": "pos\tthe bank\nmaybe\tthe play\n"}) / "eval.tsv"
    earlier = {"model/saved_model.pb": "m", "serving/1/saved_model.pb": "s", "metrics.json": "{}",
               "finetune_config.json": "{}", "labels.json": "[]"}
    out = _tree(tmp_path / "ft", earlier)
    assert _finetune(tiny_models["bert"].export_dir, out, train, unseen, "--overwrite") == 2
    assert "'maybe' not among the training labels" in _one_error_line(capsys)
    assert all((out / name).exists() for name in earlier)


def test_finetune_into_an_export_is_refused_and_leaves_it_whole(tiny_models, tmp_path, capsys):
    """Serious case 5: an export dir given as --output_dir is named as an export, with or without --overwrite."""
    export = copy_of(tiny_models["bert"].export_dir, str(tmp_path / "export"))
    before = sorted(os.path.relpath(os.path.join(d, f), export) for d, _, fs in os.walk(export) for f in fs)
    train = _tree(tmp_path, {"train.tsv": "pos\tthe bank\nneg\tthe river\n"}) / "train.tsv"
    for more in ([], ["--overwrite"]):
        assert _finetune(tiny_models["gpt"].export_dir, export, train, train, *more) == 2
        line = _one_error_line(capsys)
        assert line.startswith(f"error: --output_dir {export} holds an export of serving.export (export.json, hub/, "
                               f"serving/), not a downstream.finetune run"), line
    after = sorted(os.path.relpath(os.path.join(d, f), export) for d, _, fs in os.walk(export) for f in fs)
    assert after == before


def test_finetune_output_inside_its_module_is_refused(tiny_models, tmp_path, capsys):
    export = copy_of(tiny_models["gpt"].export_dir, str(tmp_path / "export"))
    train = _tree(tmp_path, {"train.tsv": "pos\tthe bank\nneg\tthe river\n"}) / "train.tsv"
    assert _finetune(export, os.path.join(export, "ft"), train, train) == 2
    assert f"is inside --module {export}" in _one_error_line(capsys)
    assert not os.path.exists(os.path.join(export, "ft"))
