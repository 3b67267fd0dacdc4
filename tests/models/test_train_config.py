"""`--set` overrides against the config dataclasses, config JSON round trips, the learning-rate schedule."""

import dataclasses

import pytest

from models import bert, config as config_lib, families, gpt
from models.config import OverrideError, TrainConfig, apply_overrides


def test_overrides_reach_model_and_train_fields_with_types():
    model, train = apply_overrides(bert.BertConfig(), TrainConfig(), [
        "train_steps=2e3", "batch_size=64", "learning_rate=5e-4", "hidden_act=gelu", "jit_compile=false",
        "model.dropout=0.0", "train.seed=7"])
    assert (train.train_steps, train.batch_size, train.learning_rate, train.jit_compile, train.seed) == \
        (2000, 64, 5e-4, False, 7)
    assert (model.hidden_act, model.dropout) == ("gelu", 0.0)


def test_unknown_key_lists_the_valid_ones():
    with pytest.raises(OverrideError) as e:
        apply_overrides(gpt.GptConfig(), TrainConfig(), ["hiden_size=3"])
    assert "hiden_size" in str(e.value) and "model.hidden_size" in str(e.value) and "train.batch_size" in str(e.value)
    with pytest.raises(OverrideError, match="unknown key"):
        apply_overrides(gpt.GptConfig(), TrainConfig(), ["optim.batch_size=3"])


def test_bad_values_are_errors():
    with pytest.raises(OverrideError, match="batch_size=x"):
        apply_overrides(gpt.GptConfig(), TrainConfig(), ["batch_size=x"])
    with pytest.raises(OverrideError, match="not an integer"):
        apply_overrides(gpt.GptConfig(), TrainConfig(), ["train_steps=1.5"])
    with pytest.raises(OverrideError, match="key=value"):
        apply_overrides(gpt.GptConfig(), TrainConfig(), ["train_steps"])
    with pytest.raises(ValueError, match="optimizer must be one of"):
        apply_overrides(gpt.GptConfig(), TrainConfig(), ["optimizer=sgd"])
    with pytest.raises(ValueError, match="multiple of num_heads"):
        apply_overrides(gpt.GptConfig(), TrainConfig(), ["hidden_size=100"])


def test_overrides_from_python_take_typed_values_and_refuse_other_types():
    model, train = apply_overrides(bert.BertConfig(), TrainConfig(), {"train_steps": 20, "learning_rate": 1,
                                                                      "model.dropout": 0.0, "jit_compile": False})
    assert (train.train_steps, train.learning_rate, train.jit_compile, model.dropout) == (20, 1.0, False, 0.0)
    assert isinstance(train.learning_rate, float)
    _, train = apply_overrides(bert.BertConfig(), TrainConfig(), [("train_only", ["mlm_head"]), ("seed", "7")])
    assert (train.train_only, train.seed) == (("mlm_head",), 7)
    for bad in ({"train_steps": 2.5}, {"train_steps": True}, {"jit_compile": 1}, {"learning_rate": "fast"}):
        with pytest.raises(OverrideError, match=f"--set {next(iter(bad))}="):
            apply_overrides(bert.BertConfig(), TrainConfig(), bad)


def test_a_train_job_keeps_its_overrides_as_pairs_and_refuses_what_no_flag_allows():
    from commands.job_fields import JobFieldError
    from commands.user_errors import UserError
    from models.training.train_job import TrainJob

    job = TrainJob(train_data="d/*", model_dir="m", overrides=["train_steps=4", "model.dropout=0"],
                   allow_change=["learning_rate,batch_size", "seed"])
    assert job.overrides == (("train_steps", "4"), ("model.dropout", "0"))
    assert job.allow_change == ("learning_rate", "batch_size", "seed")
    assert TrainJob(train_data="d/*", model_dir="m", overrides={"train_steps": 4}).overrides == (("train_steps", 4),)
    with pytest.raises(JobFieldError, match="expected key=value"):
        TrainJob(train_data="d/*", model_dir="m", overrides=["train_steps"])
    with pytest.raises(UserError, match="--strategy tpus: use one of auto, tpu"):
        TrainJob(train_data="d/*", model_dir="m", strategy="tpus")
    with pytest.raises(UserError, match="--model elmo: use one of bert, gpt, bilm"):
        TrainJob(train_data="d/*", model_dir="m", model="elmo")


def test_tuple_fields_parse_from_lists():
    @dataclasses.dataclass(frozen=True)
    class WithTuples:
        filters: tuple[tuple[int, int], ...] = ((1, 4),)
        sizes: tuple[int, ...] = (1,)

    model, _ = apply_overrides(WithTuples(), TrainConfig(), ["filters=[[1, 32], [2, 64]]", "sizes=3,4"])
    assert model.filters == ((1, 32), (2, 64)) and model.sizes == (3, 4)


def test_config_json_round_trip():
    for kind in ("bert", "gpt"):
        config = families.preset_config(kind, f"{kind}_mini", vocab_size=123)
        assert config_lib.from_json(type(config), config_lib.to_json(config)) == config
    train = TrainConfig(batch_size=8, optimizer="lamb")
    assert config_lib.from_json(TrainConfig, config_lib.to_json(train)) == train


def test_presets_are_named_by_model_and_valid():
    for kind in ("bert", "gpt"):
        for name in families.presets(kind):
            assert name.startswith(kind + "_")
            families.preset_config(kind, name)
    with pytest.raises(ValueError, match="unknown preset"):
        families.preset_config("bert", "bert_huge")


def test_warmup_then_linear_decay():
    from models.training.optimization import WarmupDecay
    schedule = WarmupDecay(1.0, warmup_steps=10, total_steps=110)
    values = [float(schedule(s)) for s in (0, 5, 10, 60, 110, 200)]
    assert values == pytest.approx([0.0, 0.5, 1.0, 0.5, 0.0, 0.0])
    poly = WarmupDecay(1.0, 0, 100, decay="polynomial", power=2.0, end_ratio=0.1)
    assert float(poly(50)) == pytest.approx(0.9 * 0.25 + 0.1)
    assert float(WarmupDecay(2.0, 4, 100, decay="constant")(50)) == 2.0


def test_weight_decay_spares_biases_and_layer_norms():
    from models.training import optimization
    task = bert.BertTask(bert.BertConfig(**bert.PRESETS["bert_tiny"], vocab_size=30), 8, 2)
    model = task.build_model()
    optimizer = optimization.make_optimizer(TrainConfig())
    optimizer.build(model.trainable_variables)
    decayed = {v.path for v in model.trainable_variables if optimizer._use_weight_decay(v)}
    assert "token_embedding/embeddings" in decayed
    assert "transformer_layer_0/self_attention_layer/query/kernel" in decayed
    assert not any(p.endswith(("bias", "gamma", "beta")) for p in decayed)


def test_one_parser_serves_any_set_of_named_configs():
    """`override` is the parser both training and fine-tuning use: bare keys when unambiguous, qualified
    keys always, ambiguity named, Optional fields parsed as their inner type."""
    import typing

    @dataclasses.dataclass(frozen=True)
    class Head:
        units: int = 4
        seed: int = 1
        trainable: typing.Optional[bool] = None

    new = config_lib.override({"head": Head(), "train": TrainConfig()},
                              ["units=8", "head.seed=3", "train.seed=5", "trainable=no"])
    assert new["head"] == Head(units=8, seed=3, trainable=False) and new["train"].seed == 5
    with pytest.raises(OverrideError, match=r"ambiguous, say head\.seed or train\.seed"):
        config_lib.override({"head": Head(), "train": TrainConfig()}, ["seed=2"])
    with pytest.raises(OverrideError) as e:
        config_lib.override({"head": Head()}, ["unit=2"])
    assert str(e.value) == "--set unit: unknown key. Valid keys: units, seed, trainable"
    assert config_lib.override({"head": Head()}, ["head.units=2"])["head"].units == 2
    with pytest.raises(OverrideError, match="not a boolean"):
        config_lib.override({"head": Head()}, ["trainable=maybe"])


def test_warmup_of_zero_starts_at_the_peak():
    """BERT's rule (and training's): no warm-up means the first step already uses the peak."""
    from models.training.optimization import warmup_decay_rate
    assert [float(warmup_decay_rate(s, 2.0, 0, 4)) for s in range(5)] == [2.0, 1.5, 1.0, 0.5, 0.0]
