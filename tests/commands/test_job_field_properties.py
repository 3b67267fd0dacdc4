"""Property tests of the job objects (`commands.job_fields`): built from random field values (of each field's
type or of any other, known choices among random text, sometimes a field that does not exist), a job is built
or refused with the one documented error, `JobFieldError`, in one line; never anything else. And a built job
whose input does not exist (random values in its other fields) is refused with a `UserError` before it writes
anything. Few examples, no database, no deadline: a fast loop, no timings."""

import contextlib
import dataclasses
import os
import shutil
import tempfile
import types
import typing

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from commands.job_fields import JobFieldError
from commands.user_errors import UserError
from tests.commands.test_job_fields import CONFIGS, JOBS, load
from tests.pipeline.test_data_v1 import FIXTURE

FEW = settings(max_examples=25, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
FEWER = settings(max_examples=8, deadline=None, database=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

# Words the jobs know (model kinds, choices, specs, formats) among the random text, so that draws reach the
# checks past the choices.
WORDS = ("bert", "gpt", "bilm", "static", "dynamic", "auto", "default", "none", "mean", "truncate", "skip",
         "exact", "near", "all", "exact,near", "threshold=0.8", "threshold=nan", "key_ranges=-1", "c4",
         "min_words_per_line=-1", "max_non_letter_share=2", "hf_bert", "bert_tf1", "last", "sum_last4",
         "train_steps=2", "model.dropout=0", "learning_rate", "--direct_num_workers=2", "--no_such_option")
ANY = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8),
                st.lists(st.text(max_size=4), max_size=2), st.dictionaries(st.text(max_size=4), st.integers(),
                                                                           max_size=2))


def of_type(hint) -> st.SearchStrategy:
    """Values of the type `hint` (numbers mostly in the ranges the jobs allow, and out of them)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return st.one_of([of_type(a) for a in args])
    if hint is type(None):
        return st.none()
    if hint is bool:
        return st.booleans()
    if hint is int:
        return st.one_of(st.integers(-2, 300), st.integers())
    if hint is float:
        return st.one_of(st.floats(-0.5, 1.5), st.floats())
    if hint is str:
        return st.one_of(st.sampled_from(WORDS), st.text(max_size=12))
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return st.lists(of_type(args[0]), max_size=3).map(tuple)
        return st.tuples(*[of_type(a) for a in args])
    if hint is dict:
        return st.dictionaries(st.text(max_size=4), st.integers(), max_size=2)
    if hint is object:
        return ANY
    if dataclasses.is_dataclass(hint):
        return built(hint)
    raise AssertionError(f"no strategy for {hint!r}")


def built(cls) -> st.SearchStrategy:
    """Instances of a nested config from random fields of its type; its default where they are refused."""
    def build(values):
        try:
            return cls(**values)
        except JobFieldError:
            return cls(**{k: v for k, v in values.items() if k == "module"})

    return fields_of(cls, wrong=False, extra=False).map(build)


def fields_of(cls, *, wrong: bool = True, extra: bool = True, fixed: dict | None = None) -> st.SearchStrategy:
    """Keyword arguments for `cls`: every required field, some of the others; each value of its type or
    (`wrong`) of any; `fixed` fields as given (or drawn, for a strategy); sometimes (`extra`) a field `cls`
    does not have."""
    fixed = fixed or {}
    hints = typing.get_type_hints(cls)

    @st.composite
    def draw_fields(draw):
        values = {k: draw(v) if isinstance(v, st.SearchStrategy) else v for k, v in fixed.items()}
        for field in dataclasses.fields(cls):
            if not field.init or field.name in fixed:
                continue
            required = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
            if required or draw(st.booleans()):
                value = of_type(hints[field.name])
                values[field.name] = draw(st.one_of(value, ANY) if wrong else value)
        if extra and draw(st.integers(0, 9)) == 0:
            values[draw(st.sampled_from(["no_such_field", "vocab_sizee", "outputdir"]))] = draw(ANY)
        return values

    return draw_fields()


@pytest.mark.parametrize("path", JOBS + list(CONFIGS))
def test_a_job_from_random_fields_is_built_or_refused_in_one_line(path):
    cls = load(path)

    @FEW
    @given(fields_of(cls))
    def build(values):
        try:
            cls(**values)
        except JobFieldError as e:  # anything else fails the test
            assert "\n" not in str(e) and str(e), repr(str(e))

    build()


FORMATS = st.sampled_from(["bert_tf1", "hf_bert", "keras_hub", "hf_gpt", "bilm_hdf5"])
# job -> (its run function, the fields that name its inputs (missing) and outputs (under the run's folder), and
# a known value for a choice that would otherwise stop most runs before their inputs are looked at).
MISSING = {
    "pipeline.clean.CleanJob": ("pipeline.clean.run", dict(input="missing/*.txt", output_dir="out")),
    "pipeline.vocab.VocabJob": ("pipeline.vocab.run", dict(input="missing.txt", output="out/vocab.txt")),
    "pipeline.pretraining_data.PretrainingDataJob": (
        "pipeline.pretraining_data.run", dict(input="missing/*.txt", vocab="vocab.txt", output_dir="out",
                                              model=st.sampled_from(["bert", "gpt", "bilm"]))),
    "models.training.train.TrainJob": (
        "models.training.train.train", dict(train_data="missing/*.tfrecord", model_dir="run", eval_data=None,
                                            init_checkpoint=None)),
    "models.training.evaluate.EvaluateJob": (
        "models.training.evaluate.evaluate", dict(model_dir="missing_run", eval_data="missing/*.tfrecord")),
    "models.convert.cli.ImportJob": (
        "models.convert.cli.import_checkpoint", dict(checkpoint="missing_checkpoint", model_dir="run", config=None,
                                                     vocab=None, fmt=FORMATS)),
    "models.convert.cli.ExportJob": (
        "models.convert.cli.export_checkpoint", dict(model_dir="missing_run", output="out", fmt=FORMATS)),
    "serving.export.ExportJob": (
        "serving.export.export", dict(model_dir="missing_run", export_dir="export", warmup_text=None, checkpoint=None)),
    "downstream.features.FeaturesJob": (
        "downstream.features.run", dict(module="missing_export", input="missing.txt", output="out.npz")),
    "downstream.embed_job.EmbedJob": ("downstream.embed.run", dict(input="missing/*.txt", output_dir="out")),
    "downstream.evaluate_senses.SensesJob": (
        "downstream.evaluate_senses.run", dict(module="missing_export", data="missing.jsonl", pairs=None,
                                               png="out.png")),
    "downstream.vector_diagnostics.DiagnosticsJob": (
        "downstream.vector_diagnostics.run", dict(module="missing_export", input="missing.txt")),
}


def tree(root: str) -> list[str]:
    return sorted(os.path.relpath(os.path.join(folder, name), root)
                  for folder, folders, files in os.walk(root) for name in folders + files)


def test_every_job_of_the_table_is_run_on_a_missing_input():
    assert sorted(MISSING) == sorted(JOBS)


@pytest.mark.parametrize("path", sorted(MISSING))
def test_a_built_job_with_a_missing_input_refuses_before_writing_anything(path):
    cls, (run_path, fixed) = load(path), MISSING[path]
    run = load(run_path)
    nested = st.none()  # EmbedJob's config: random, its module missing
    if cls.__name__ == "EmbedJob":
        from downstream.embed_model import EmbedConfig

        nested = built(EmbedConfig).map(lambda config: dataclasses.replace(config, module="missing_export"))

    @FEWER
    @given(fields_of(cls, wrong=False, extra=False, fixed=fixed), nested)
    def refuse(values, config):
        if config is not None:
            values = {**values, "config": config}
        try:
            job = cls(**values)
        except JobFieldError:
            assume(False)  # refused when built; this test is about the built ones
        with tempfile.TemporaryDirectory() as root, contextlib.chdir(root):
            shutil.copy(os.path.join(FIXTURE, "vocab.txt"), "vocab.txt")  # the data job's vocabulary exists
            before = tree(root)
            with pytest.raises(UserError):
                run(job)
            assert tree(root) == before

    refuse()
