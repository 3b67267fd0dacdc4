"""`models.convert` never writes over a run or another kind of output (issue 46): an `--output` (`--to`) or
`--model_dir` (`--from`) that holds a model_dir (`--model_dir` itself), an export, a keras-hub preset or
another format's checkpoint is refused in one line naming what it holds, `--overwrite` or not, and nothing in
it changes; an earlier output of the same format needs `--overwrite`, which replaces only that format's
files; a file of the format's names that no earlier output wrote is never replaced. One tiny random BERT that
every BERT format can hold; nothing is trained."""

import json
import os

import pytest

from models import families
from tests.models.test_convert import convert_cli, one_error_line, random_model_dir


def _tree(root) -> dict:
    """relative path -> bytes of every file under `root`: what a refused conversion must leave as it was."""
    out = {}
    for folder, _, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, root)] = f.read()
    return out


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A tied, post-LN, tanh-GELU BERT with epsilon 1e-12 (the config defaults): hf_bert, bert_tf1 and
    keras_hub can all hold it."""
    return random_model_dir(tmp_path_factory.mktemp("md") / "bert", "bert", num_layers=1, hidden_size=8,
                            num_heads=2, intermediate_size=16)


@pytest.fixture(scope="module")
def written(model_dir, tmp_path_factory):
    """format -> a folder `--to` wrote (read-only for the tests)."""
    root = tmp_path_factory.mktemp("written")
    out = {}
    for fmt in ("hf_bert", "keras_hub"):
        out[fmt] = str(root / fmt)
        assert convert_cli("--to", fmt, "--model_dir", model_dir, "--output", out[fmt]) == 0
    return out


@pytest.mark.parametrize("fmt", ["hf_bert", "keras_hub"])
def test_output_in_a_model_dir_is_refused_and_the_run_stays_a_model_dir(model_dir, fmt, tmp_path, capsys):
    other = random_model_dir(tmp_path / "other", "bert", num_layers=1, hidden_size=8, num_heads=2,
                             intermediate_size=16)
    before = _tree(model_dir), _tree(other)
    for more in ([], ["--overwrite"]):
        assert convert_cli("--to", fmt, "--model_dir", model_dir, "--output", other, *more) == 2
        line = one_error_line(capsys)
        assert line.startswith(f"error: --output {other} holds a training model_dir of models.training.train "
                               f"(config.json, checkpoint), not a models.convert --to {fmt} run: give another "
                               f"--output"), line
        for output, said in ((model_dir, "is"), (os.path.join(model_dir, "hf"), "is inside")):  # the job's own
            assert convert_cli("--to", fmt, "--model_dir", model_dir, "--output", output, *more) == 2
            assert one_error_line(capsys) == (f"error: --output {output} {said} --model_dir {model_dir}: the job "
                                              f"would write where it reads; give another --output")
    assert (_tree(model_dir), _tree(other)) == before
    assert families.read_config(model_dir)["model"] == "bert"  # still a model_dir that serving.export reads


def test_an_export_a_preset_or_another_formats_output_is_refused_naming_it(model_dir, written, tmp_path, capsys):
    export = tmp_path / "export"  # what serving.export leaves (its files tell it; nothing here reads the modules)
    (export / "hub" / "encoder").mkdir(parents=True)
    (export / "serving" / "bert" / "1").mkdir(parents=True)
    (export / "export.json").write_text(json.dumps({"family": "bert", "hub": ["encoder"], "models": ["bert"]}))
    cases = [("hf_bert", str(export), "an export of serving.export (export.json, hub/, serving/)"),
             ("keras_hub", written["hf_bert"], "a HuggingFace BERT checkpoint in the hf_bert format (config.json, "
                                               "model.safetensors, tokenizer_config.json, ...)"),
             ("bert_tf1", written["hf_bert"], "a HuggingFace BERT checkpoint in the hf_bert format"),
             ("hf_bert", written["keras_hub"], "a keras-hub preset in the keras_hub format (config.json, assets, "
                                               "metadata.json, ...)")]
    for fmt, output, held in cases:
        before = _tree(output)
        for more in ([], ["--overwrite"]):
            assert convert_cli("--to", fmt, "--model_dir", model_dir, "--output", output, *more) == 2
            line = one_error_line(capsys)
            assert line.startswith(f"error: --output {output} holds {held}"), line
            assert f"not a models.convert --to {fmt} run: give another --output" in line, line
            assert ("--overwrite replaces only an earlier" in line) == bool(more), line
        assert _tree(output) == before, (fmt, output)


def test_an_earlier_output_of_its_format_is_replaced_only_with_overwrite(model_dir, tmp_path, capsys):
    out = tmp_path / "hf"
    assert convert_cli("--to", "hf_bert", "--model_dir", model_dir, "--output", out) == 0
    (out / "notes.txt").write_text("mine\n")
    (out / ".convert-staging-0123456789ab").mkdir()  # what a killed run leaves
    before = _tree(out)
    capsys.readouterr()
    assert convert_cli("--to", "hf_bert", "--model_dir", model_dir, "--output", out) == 2
    assert one_error_line(capsys) == (f"error: --output {out} already holds a HuggingFace BERT checkpoint (config.json, "
                                   f"model.safetensors, tokenizer_config.json, ...): pass --overwrite to replace it, "
                                   f"or use another --output")
    assert _tree(out) == before
    config = json.loads((out / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**config, "old": 1}))
    assert convert_cli("--to", "hf_bert", "--model_dir", model_dir, "--output", out, "--overwrite") == 0
    assert sorted(os.listdir(out)) == ["config.json", "model.safetensors", "notes.txt", "tokenizer_config.json",
                                       "vocab.txt"]  # the user's file stays, the staging folder went
    assert "old" not in json.loads((out / "config.json").read_text())  # written anew
    assert (out / "notes.txt").read_text() == "mine\n"


def test_a_file_it_did_not_write_is_never_replaced(model_dir, tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "vocab.txt").write_text("my own words\n")
    for more in ([], ["--overwrite"]):
        assert convert_cli("--to", "hf_bert", "--model_dir", model_dir, "--output", out, *more) == 2
        assert one_error_line(capsys) == (f"error: --output {out} has vocab.txt, which no earlier --to hf_bert output "
                                       f"wrote: --to hf_bert never replaces a file it did not write; give another "
                                       f"--output, or move vocab.txt away")
    assert os.listdir(out) == ["vocab.txt"] and (out / "vocab.txt").read_text() == "my own words\n"


def test_from_never_writes_a_model_dir_over_another_kind_of_output(written, capsys):
    """`--model_dir` holding another format's output, or equal to the checkpoint's own folder (the converted
    config.json would replace HuggingFace's)."""
    for fmt, other, held in (("hf_bert", "keras_hub", "a keras-hub preset in the keras_hub format"),
                             ("keras_hub", "hf_bert", "a HuggingFace BERT checkpoint in the hf_bert format")):
        checkpoint, folder = written[fmt], written[other]
        before = _tree(checkpoint), _tree(folder)
        assert convert_cli("--from", fmt, "--checkpoint", checkpoint, "--model_dir", folder) == 2
        line = one_error_line(capsys)
        assert line.startswith(f"error: --model_dir {folder} holds {held} (config.json, "), line
        assert line.endswith("not a model_dir: give another --model_dir"), line
        assert convert_cli("--from", fmt, "--checkpoint", checkpoint, "--model_dir", checkpoint) == 2
        assert one_error_line(capsys) == (f"error: --model_dir {checkpoint} is --checkpoint {checkpoint}: the job "
                                          f"would write where it reads; give another --model_dir")
        assert (_tree(checkpoint), _tree(folder)) == before


def test_flags_of_the_other_direction_are_refused(model_dir, written, tmp_path, capsys):
    assert convert_cli("--from", "hf_bert", "--checkpoint", written["hf_bert"], "--model_dir", tmp_path / "a",
                    "--overwrite") == 2
    assert "--overwrite is for --to" in one_error_line(capsys)
    assert convert_cli("--to", "hf_bert", "--model_dir", model_dir, "--output", tmp_path / "b",
                    "--allow_vocab_change") == 2
    assert "--allow_vocab_change is for --from" in one_error_line(capsys)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
