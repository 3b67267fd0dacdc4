"""What a training run starts from without flags: the precision `auto` decides from the CPU's flags (read at
run time) and the device kind, and each preset's training recipe, which an explicit `--set` overrides."""


import keras
import pytest

from models import bert, bilm, gpt
from models.config import TrainConfig
from models.training import hardware, optimization, train
from tests.fixtures.training import write_dataset

CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
flags\t\t: fpu sse2 avx2 avx512f avx512_bf16 avx512_vnni
processor\t: 1
flags\t\t: fpu sse2 avx2 avx512f avx512_bf16 avx512_vnni
"""


def test_cpu_flags_reads_the_bf16_flags_of_cpuinfo(tmp_path):
    path = tmp_path / "cpuinfo"
    path.write_text(CPUINFO)
    assert hardware.cpu_flags(str(path)) == {"avx512_bf16"}
    path.write_text(CPUINFO.replace("avx512_bf16", "amx_bf16 amx_tile avx512_bf16"))
    assert hardware.cpu_flags(str(path)) == {"amx_bf16", "avx512_bf16"}
    path.write_text("processor\t: 0\nflags\t\t: fpu sse2\n")
    assert hardware.cpu_flags(str(path)) == frozenset()
    assert hardware.cpu_flags(str(tmp_path / "missing")) == frozenset()


def test_cpu_class_is_the_strongest_bf16_support():
    assert hardware.cpu_class(frozenset({"amx_bf16", "avx512_bf16"})) == "amx_bf16"
    assert hardware.cpu_class(frozenset({"avx512_bf16"})) == "avx512_bf16"
    assert hardware.cpu_class(frozenset()) == "none"


@pytest.mark.parametrize("device,flags,jit,policy", [
    ("TPU", frozenset(), True, "mixed_bfloat16"),
    ("GPU", frozenset(), True, "mixed_bfloat16"),
    ("CPU", frozenset({"avx512_bf16"}), True, "float32"),  # measured: bf16 slower under XLA
    ("CPU", frozenset({"avx512_bf16"}), False, "float32"),  # measured: not 10% faster for every family
    ("CPU", frozenset(), True, "float32"),  # not measured: float32
    ("CPU", frozenset({"amx_bf16", "avx512_bf16"}), True, "float32"),  # not measured yet
])
def test_decide(device, flags, jit, policy):
    assert hardware.decide(device, flags, jit) == policy


def test_auto_is_the_default_and_explicit_policies_pass_through():
    assert TrainConfig().mixed_precision == "auto"
    for policy in ("float32", "mixed_bfloat16", "mixed_float16"):
        assert hardware.resolve_precision(policy, True) == policy
    try:
        chosen = optimization.set_precision(TrainConfig())
        assert chosen == hardware.decide(hardware.device_kind(), hardware.cpu_flags(), True)
        assert keras.config.dtype_policy().name == chosen
        assert optimization.set_precision(TrainConfig(mixed_precision="mixed_bfloat16")) == "mixed_bfloat16"
        assert keras.config.dtype_policy().name == "mixed_bfloat16"
    finally:
        keras.config.set_dtype_policy("float32")


@pytest.mark.parametrize("kind,module", [("bert", bert), ("gpt", gpt), ("bilm", bilm)])
def test_the_tiny_preset_recipe_is_the_default_and_set_wins(kind, module, tmp_path):
    pattern = write_dataset(str(tmp_path / "data"), kind)
    recipe = module.RECIPES[f"{kind}_tiny"]
    assert recipe["learning_rate"] != TrainConfig().learning_rate

    def resolve(*overrides, preset=f"{kind}_tiny", run="run"):
        argv = ["--model", kind, "--preset", preset, "--train_data", pattern, "--model_dir", str(tmp_path / run)]
        args = train.parse_args(argv + [a for o in overrides for a in ("--set", o)])
        return train.resolve(train.job_from_args(args)).train_config

    assert resolve().learning_rate == recipe["learning_rate"]
    assert resolve("learning_rate=5e-4").learning_rate == 5e-4
    other = next(p for p in module.PRESETS if p not in module.RECIPES)  # unlisted presets keep the default
    assert resolve(preset=other, run="r2").learning_rate == TrainConfig().learning_rate
