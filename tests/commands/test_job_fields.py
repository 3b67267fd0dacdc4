"""`commands.job_fields`: every job of docs/python.md's table (not `FinetuneJob`, whose package has its own
checks, nor `DemoJob`) is checked when it is built, and a bad field is one `JobFieldError` naming the field and
the value: an unknown or missing field, a wrong type, a count below its range, a probability outside [0, 1], an
output that is its input (or inside it, or matched by it). The commands print the same one line."""

import dataclasses
import importlib
import os
import pathlib
import pickle
import re
import types
import typing

import numpy as np
import pytest

from commands.job_fields import JobFieldError
from commands.user_errors import UserError
from tests.conftest import ROOT

OUT_OF_SCOPE = {"FinetuneJob", "DemoJob"}
# The config dataclasses the jobs hold, checked the same way.
CONFIGS = ("pipeline.clean_report.Cleaning", "pipeline.beam_job.RunOptions", "pipeline.wordpiece_learner.LearnerConfig",
           "downstream.embed_model.EmbedConfig")


def table_jobs() -> list[str]:
    """`module.Class` of every job in docs/python.md's table (the conversion row names two)."""
    with open(os.path.join(ROOT, "docs", "python.md")) as f:
        rows = [line.split("|") for line in f if line.startswith("| ") and "`" in line]
    jobs = []
    for row in rows:
        names = re.findall(r"`([\w.]+)`", row[3])
        module = names[0].rpartition(".")[0]
        jobs += [name if "." in name else f"{module}.{name}" for name in names]
    return [job for job in jobs if job.rpartition(".")[2] not in OUT_OF_SCOPE]


def load(path: str):
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def minimal(cls) -> dict:
    """Values for `cls`'s required fields that build it."""
    values = {"model": "bert", "input": "corpus.txt", "output": "out.txt", "output_dir": "out", "vocab": "vocab.txt",
              "train_data": "data/*.tfrecord", "model_dir": "run", "eval_data": "heldout/*.tfrecord",
              "export_dir": "export", "module": "export/bert", "data": "senses.jsonl", "fmt": "hf_bert",
              "checkpoint": "hf"}
    if cls.__name__ == "EmbedJob":
        from downstream.embed_model import EmbedConfig

        values["config"] = EmbedConfig(module="export/bert")
    required = [f.name for f in dataclasses.fields(cls)
                if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    return {name: values[name] for name in required}


JOBS = table_jobs()


def test_the_table_names_every_job_the_issue_lists():
    assert sorted(path.rpartition(".")[2] for path in JOBS) == sorted(
        ["CleanJob", "VocabJob", "PretrainingDataJob", "TrainJob", "EvaluateJob", "ImportJob", "ExportJob",
         "ExportJob", "FeaturesJob", "EmbedJob", "SensesJob", "DiagnosticsJob"])


@pytest.mark.parametrize("path", JOBS + list(CONFIGS))
def test_an_unknown_or_missing_field_is_the_documented_error_naming_it(path):
    cls = load(path)
    values = minimal(cls)
    cls(**values)  # builds
    with pytest.raises(JobFieldError, match=rf"^{cls.__name__}: no field 'no_such_field'; its fields: "):
        cls(**values, no_such_field=1)
    for name in values:
        with pytest.raises(JobFieldError, match=rf"^{cls.__name__}: missing a required argument: '{name}'$"):
            cls(**{k: v for k, v in values.items() if k != name})


WRONG = {bool: "False", int: True, float: "0.5", str: 3}  # text for a bool, a bool for an int, ...


@pytest.mark.parametrize("path", JOBS + list(CONFIGS))
def test_a_field_of_the_wrong_type_names_the_field_and_the_value(path):
    """Each field given a value of another type: text for a bool, a bool for an int, text for a float, a
    number for text, a tuple or a nested config; None where the field is not optional."""
    cls = load(path)
    values, hints = minimal(cls), typing.get_type_hints(cls)
    for field in (f for f in dataclasses.fields(cls) if f.init):
        hint = hints[field.name]
        kinds = [a for a in typing.get_args(hint) if a is not type(None)] if _optional(hint) else [hint]
        for wrong in [WRONG.get(kinds[0], 3)] + ([] if _optional(hint) else [None]):
            with pytest.raises(JobFieldError) as e:
                cls(**{**values, field.name: wrong})
            said = str(e.value)
            assert said.startswith(f"{cls.__name__}.{field.name}={wrong!r}: "), said
            assert said.endswith(f", got {type(wrong).__name__}") or field.name in ("overrides", "allow_change"), said


def _optional(hint) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint)


def test_the_reported_cases():
    from pipeline.clean import CleanJob
    from pipeline.pretraining_data import PretrainingDataJob
    from pipeline.wordpiece_learner import LearnerConfig

    with pytest.raises(JobFieldError, match=r"^LearnerConfig.vocab_size='400': expected int, got str$"):
        LearnerConfig(vocab_size="400")
    data = dict(model="bert", input="c.txt", vocab="v.txt", output_dir="out")
    with pytest.raises(JobFieldError, match=r"^PretrainingDataJob.seed=None: expected int, got NoneType$"):
        PretrainingDataJob(**data, seed=None)
    for job in (lambda o: PretrainingDataJob(**data, overwrite=o), lambda o: CleanJob("c.txt", "out", overwrite=o)):
        with pytest.raises(JobFieldError, match=r"\.overwrite='False': expected bool, got str$"):
            job("False")  # text was true: it replaced an earlier run
    assert isinstance(JobFieldError("x"), UserError) and JobFieldError.status == 2


def test_types_take_what_means_the_same_and_keep_the_fields_type():
    from downstream.features import FeaturesJob
    from pipeline.pretraining_data import PretrainingDataJob

    job = PretrainingDataJob(model="gpt", input=pathlib.Path("c.txt"), vocab="v.txt", output_dir="out",
                             seed=np.int64(7), masked_lm_prob=1, short_seq_prob=np.float32(0.5), lower_case=None)
    assert (job.input, job.seed, type(job.seed), job.masked_lm_prob, type(job.short_seq_prob)) == (
        "c.txt", 7, int, 1, float)
    features = FeaturesJob(module="m", input="c.txt", output="f.npz", choices=["last"], weights=[1, 0.5])
    assert (features.choices, features.weights) == (("last",), (1, 0.5))
    for bad, got in ((dict(choices="last"), "str"), (dict(choices=("last", 3)), "tuple holding int 3"),
                     (dict(weights=(True,)), "tuple holding bool True"), (dict(batch_size=2.0), "float"),
                     (dict(weights=np.zeros(300)), "ndarray")):
        with pytest.raises(JobFieldError) as e:
            FeaturesJob(module="m", input="c.txt", output="f.npz", **bad)
        assert str(e.value).startswith(f"FeaturesJob.{next(iter(bad))}=") and str(e.value).endswith(f", got {got}")
        assert "\n" not in str(e.value) and len(str(e.value)) < 200  # a long array's repr: one line, cut


def test_counts_and_probabilities_are_refused_out_of_range_in_the_commands_words():
    from downstream.embed_job import EmbedJob
    from downstream.embed_model import EmbedConfig
    from downstream.vector_diagnostics import DiagnosticsJob
    from models.training.evaluate import EvaluateJob
    from pipeline.beam_job import RunOptions
    from pipeline.pretraining_data import PretrainingDataJob
    from pipeline.wordpiece_learner import LearnerConfig

    def data(**fields):
        return PretrainingDataJob(model="bert", input="c.txt", vocab="v.txt", output_dir="out", **fields)

    cases = [(lambda: data(dupe_factor=0), "--dupe_factor 0 is out of range; allowed: [1, inf)"),
             (lambda: data(docs_per_bucket=-3), "--docs_per_bucket -3 is out of range"),
             (lambda: data(max_seq_length=0), "--max_seq_length 0 is out of range"),
             (lambda: data(masked_lm_prob=0.0), "--masked_lm_prob 0.0 is out of range; allowed: (0.0, 1.0]"),
             (lambda: data(short_seq_prob=1.5), "--short_seq_prob 1.5 is out of range; allowed: [0.0, 1.0]"),
             (lambda: data(short_seq_prob=float("nan")), "--short_seq_prob nan is not a finite number"),
             (lambda: data(num_shards=-1), "--num_shards -1 is out of range; allowed: [0, 99999]"),
             (lambda: LearnerConfig(min_frequency=0), "--min_frequency 0 is out of range"),
             (lambda: LearnerConfig(num_unused=-1), "--num_unused -1 is out of range; allowed: [0, inf)"),
             (lambda: EvaluateJob("run", "d/*", steps=0), "--steps 0 is out of range"),
             (lambda: EmbedConfig("m", batch_size=0), "--batch_size 0 is out of range"),
             (lambda: EmbedJob("c.txt", "out", EmbedConfig("m"), num_shards=0), "--num_shards 0 is out of range"),
             (lambda: DiagnosticsJob("m", "c.txt", seed=-1), "--seed -1 is out of range; allowed: [0, inf)"),
             (lambda: RunOptions(progress_seconds=-5.0), "--progress_seconds -5 is out of range")]
    for build, message in cases:
        with pytest.raises(JobFieldError) as e:
            build()
        assert str(e.value).startswith(message), str(e.value)


def test_an_output_that_is_inside_or_matched_by_an_input_is_refused():
    from downstream.evaluate_senses import SensesJob
    from downstream.features import FeaturesJob
    from models.training.train_job import TrainJob
    from pipeline.clean import CleanJob
    from pipeline.vocab import VocabJob

    cases = [(lambda: VocabJob(input="corpus.txt", output="./corpus.txt"),
              "--output ./corpus.txt is --input corpus.txt"),
             (lambda: CleanJob(input="corpus", output_dir="corpus/cleaned"),
              "--output_dir corpus/cleaned is inside --input corpus"),
             (lambda: VocabJob(input="corpus/*.txt", output="corpus/vocab.txt"),
              "--output corpus/vocab.txt matches --input corpus/*.txt"),
             (lambda: FeaturesJob(module="export/bert", input="c.txt", output="export/bert/f.npz"),
              "--output export/bert/f.npz is inside --module export/bert"),
             (lambda: SensesJob(module="m", data="s.jsonl", png=os.path.abspath("s.jsonl")),
              f"--png {os.path.abspath('s.jsonl')} is --data s.jsonl"),
             (lambda: TrainJob(train_data="gs://b/data/*", model_dir="gs://b/data/x/../run"),
              "--model_dir gs://b/data/x/../run matches --train_data gs://b/data/*")]
    for build, message in cases:
        with pytest.raises(JobFieldError) as e:
            build()
        assert str(e.value).startswith(message + ": the job would write where it reads"), str(e.value)
    VocabJob(input="corpus/*.txt", output="vocab.txt")  # beside the input, not in it
    CleanJob(input="corpus/*.txt", output_dir="corpus-cleaned")


def test_replace_is_checked_and_a_checked_job_pickles():
    """Beam pickles the jobs' configs into its workers; `dataclasses.replace` builds a new job."""
    from pipeline.vocab import VocabJob
    from pipeline.wordpiece_learner import LearnerConfig

    job = VocabJob(input="c.txt", output="v.txt", learner=LearnerConfig(vocab_size=200))
    assert pickle.loads(pickle.dumps(job)) == job
    with pytest.raises(JobFieldError, match=r"^VocabJob.lower_case=1: expected bool, got int$"):
        dataclasses.replace(job, lower_case=1)


def test_a_bad_field_from_the_command_line_is_one_line(tmp_path, capsys):
    from pipeline import vocab

    corpus = tmp_path / "c.txt"
    corpus.write_text("One sentence.\n")
    assert vocab.main(["--input", str(corpus), "--output", str(corpus)]) == 2
    assert capsys.readouterr().err == (f"error: --output {corpus} is --input {corpus}: the job would write where it "
                                       f"reads; give another --output\n")
    assert os.listdir(tmp_path) == ["c.txt"] and corpus.read_text() == "One sentence.\n"


def test_a_path_with_a_line_break_is_shown_quoted_in_the_one_line():
    from pipeline.vocab import VocabJob

    with pytest.raises(JobFieldError) as e:
        VocabJob(input="a\nb.txt", output="a\nb.txt")
    assert str(e.value) == ("--output 'a\\nb.txt' is --input 'a\\nb.txt': the job would write where it reads; "
                            "give another --output")
