"""`--overwrite` removes only files it can tell are an earlier run's own, inside the output folder, on every
command (`commands.overwrite`): a record that lists a path out of the folder (`../../x`, an absolute path),
a folder (`sub`, the user's) or a name its command never writes is refused in one line; so is a symbolic link
where the command would write or remove (an output linked to the input, to a model_dir); a folder that the
command's own names would remove without a sign of its run is refused too. Each case: exit status 2, one
line, and nothing outside the output folder removed or changed (nor anything in it)."""

import json
import os

import pytest

from commands.user_errors import UserError
from tests.conftest import TINY_TOKENS
from tests.pipeline.test_job_faults import FN_API, documents


def _tree(root) -> dict:
    """relative path -> bytes (a link: `-> target`) of everything under `root`."""
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in files + dirs:
            path = os.path.join(folder, name)
            if os.path.islink(path):
                out[os.path.relpath(path, root)] = "-> " + os.readlink(path)
            elif os.path.isfile(path):
                with open(path, "rb") as f:
                    out[os.path.relpath(path, root)] = f.read()
    return out


def _refused(main, argv, capsys, root, said: str) -> None:
    """`main(argv)` refuses in one line saying `said`, and leaves everything under `root` as it was."""
    before = _tree(root)
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and "Traceback" not in err and said in lines[0], err
    assert _tree(root) == before


@pytest.fixture
def world(tmp_path):
    """An input corpus, a file outside every output folder (`x`) and an output folder `out`; -> tmp_path."""
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "a.txt").write_text(documents(4))
    (tmp_path / "x").write_text("not an output")
    (tmp_path / "out").mkdir()
    return tmp_path


def _bad_records(world) -> dict:
    """What a record may not list -> what the refusal says."""
    (world / "out" / "sub").mkdir()
    (world / "out" / "sub" / "mine.txt").write_text("the user's")
    return {"../x": "'../x', which is not a file name of this folder",
            str(world / "x"): f"'{world / 'x'}', which is not a file name of this folder",
            "sub": "sub is a folder"}


def test_clean_refuses_a_record_out_of_its_folder_or_naming_a_folder(world, capsys):
    from pipeline.clean import main

    for listed, said in _bad_records(world).items():
        (world / "out" / "clean_report.json").write_text(json.dumps({"counters": {}, "files": [listed]}))
        _refused(main, ["--input", str(world / "corpus" / "a.txt"), "--output_dir", str(world / "out"),
                        "--overwrite", *FN_API], capsys, world, said)


def test_clean_refuses_an_earlier_output_that_links_to_its_input(world, capsys):
    from pipeline.clean import main

    os.symlink(world / "corpus" / "a.txt", world / "out" / "00000-a.txt")
    (world / "out" / "clean_report.json").write_text(json.dumps({"counters": {}, "files": ["00000-a.txt"]}))
    _refused(main, ["--input", str(world / "corpus" / "a.txt"), "--output_dir", str(world / "out"), "--overwrite",
                    *FN_API], capsys, world, "00000-a.txt is a symbolic link")
    os.symlink(world / "corpus", world / "linked")  # the output folder itself: the input's folder, by a link
    _refused(main, ["--input", str(world / "corpus" / "a.txt"), "--output_dir", str(world / "linked"),
                    "--overwrite", *FN_API], capsys, world, "is the folder of the input file")


def _pretraining_data(world, *more):
    from pipeline.pretraining_data import main

    vocab = world / "vocab.txt"
    if not vocab.exists():
        vocab.write_text("\n".join(TINY_TOKENS) + "\n")
    return main, ["--model", "gpt", "--input", str(world / "corpus" / "a.txt"), "--vocab", str(vocab),
                  "--output_dir", str(world / "out"), "--max_seq_length", "8", *more, *FN_API]


def test_pretraining_data_refuses_a_record_out_of_its_folder_or_naming_a_folder(world, capsys):
    main, argv = _pretraining_data(world, "--overwrite")
    for listed, said in {**_bad_records(world), "notes.txt": "which pipeline.pretraining_data never writes"}.items():
        (world / "out" / "metadata.json").write_text(json.dumps({"schema_version": 3, "files": [listed]}))
        _refused(main, argv, capsys, world, said)


def test_pretraining_data_never_writes_through_a_link_to_its_vocabulary(world, capsys):
    main, argv = _pretraining_data(world)
    os.symlink(world / "vocab.txt", world / "out" / "vocab.txt")  # no earlier run: the run would write vocab.txt
    _refused(main, argv, capsys, world, "vocab.txt is a symbolic link")


def test_embed_refuses_a_record_out_of_its_folder_or_naming_a_folder(world, capsys):
    from downstream.embed import main

    (world / "export").mkdir()
    argv = ["--module", str(world / "export"), "--input", str(world / "corpus" / "a.txt"), "--output_dir",
            str(world / "out"), "--overwrite", *FN_API]
    for listed, said in _bad_records(world).items():
        (world / "out" / "metadata.json").write_text(json.dumps({"module": {}, "choices": [], "files": [listed]}))
        _refused(main, argv, capsys, world, said)
    (world / "out" / "metadata.json").write_text(json.dumps({"module": {}, "choices": [],
                                                             "files": ["embeddings-00000-of-00001.tfrecord"]}))
    os.symlink(world / "corpus" / "a.txt", world / "out" / "embeddings-00000-of-00001.tfrecord")
    _refused(main, argv, capsys, world, "embeddings-00000-of-00001.tfrecord is a symbolic link")


def test_finetune_never_removes_a_model_folder_no_fine_tuning_wrote(world, capsys):
    from downstream.finetune.cli import main

    (world / "export").mkdir()
    (world / "train.tsv").write_text("pos\tthe bank\nneg\tthe river\n")
    (world / "out" / "model").mkdir()
    (world / "out" / "model" / "saved_model.pb").write_text("the user's own model")
    argv = ["--task", "classify", "--module", str(world / "export"), "--train", str(world / "train.tsv"),
            "--eval", str(world / "train.tsv"), "--output_dir", str(world / "out"), "--overwrite"]
    _refused(main, argv, capsys, world, "holds model, which no downstream.finetune run wrote")
    (world / "out" / "finetune_config.json").write_text("{}")  # an earlier fine-tuning's, whose metrics.json
    os.symlink(world / "x", world / "out" / "metrics.json")  # links out of the folder
    _refused(main, argv, capsys, world, "metrics.json is a symbolic link")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from tests.models.test_convert import random_model_dir

    return random_model_dir(tmp_path_factory.mktemp("md") / "bert", "bert", num_layers=1, hidden_size=8,
                            num_heads=2, intermediate_size=16)


def test_convert_refuses_an_earlier_output_that_links_into_the_model_dir(model_dir, world, capsys):
    from models.convert.cli import main

    out = world / "out"
    (out / "config.json").write_text(json.dumps({"model_type": "bert"}))
    for name in ("model.safetensors", "tokenizer_config.json"):
        (out / name).write_text("")
    os.symlink(os.path.join(model_dir, "vocab.txt"), out / "vocab.txt")
    before = _tree(model_dir)
    _refused(main, ["--to", "hf_bert", "--model_dir", model_dir, "--output", str(out), "--overwrite"], capsys, world,
             "vocab.txt is a symbolic link")
    assert _tree(model_dir) == before


def test_export_never_writes_into_a_linked_hub_or_serving_folder(model_dir, world, capsys):
    from serving.export.cli import main

    before = _tree(model_dir)
    for name in ("hub", "serving"):
        out = world / f"out-{name}"
        out.mkdir()
        os.symlink(model_dir, out / name)
        _refused(main, ["--model_dir", model_dir, "--export_dir", str(out), "--overwrite"], capsys, world,
                 f"{name} is a symbolic link")
    os.symlink(model_dir, world / "linked")  # the export folder itself: the model_dir, by a link
    _refused(main, ["--model_dir", model_dir, "--export_dir", str(world / "linked"), "--overwrite"], capsys, world,
             "holds a training model_dir")
    assert _tree(model_dir) == before


def test_overwrite_plans_refuse_what_a_record_may_not_name(tmp_path):
    """The contract itself, on a record that names a link to a file outside (`remove` would unlink it only, but
    a record names only the run's own files), and on a leftover shard that is a link."""
    from commands import overwrite

    (tmp_path / "x").write_text("outside")
    out = tmp_path / "out"
    out.mkdir()
    os.symlink(tmp_path / "x", out / "bert-00000-of-00001.tfrecord")
    with pytest.raises(UserError, match="bert-00000-of-00001.tfrecord is a symbolic link"):
        overwrite.plan(str(out), overwrite.PRETRAINING_DATA, True)
    (out / "metadata.json").write_text(json.dumps({"schema_version": 3, "files": ["bert-00000-of-00001.tfrecord"]}))
    with pytest.raises(UserError, match="bert-00000-of-00001.tfrecord is a symbolic link"):
        overwrite.plan(str(out), overwrite.PRETRAINING_DATA, True)
    assert (tmp_path / "x").read_text() == "outside" and os.path.islink(out / "bert-00000-of-00001.tfrecord")
