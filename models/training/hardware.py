"""The run-time precision decision: the Keras dtype policy a training run gets when its config says `auto`.

On TPUs and GPUs `auto` is `mixed_bfloat16` (both have bfloat16 matrix units; XLA stays on, the TrainConfig
default). On a CPU it is what `benchmarks.training.training --precision` measured fastest for that CPU's class of
bfloat16 support (read from `/proc/cpuinfo` at run time, never assumed) and the run's XLA setting, by the rule
in docs/accelerators.md: a policy replaces `float32` only when it is at least `MIN_SPEEDUP` faster in tokens
per CPU-second for each of bert_tiny, gpt_tiny and bilm_tiny. A class not measured yet keeps `float32`.

`decide` is pure (device kind, flags and XLA in, policy out); `cpu_flags` and `device_kind` do the looking.
`cpu_model`, `cpu_isa` and `machine` describe the CPU for every time a command or benchmark prints (one model
name covers machines with and without AVX-512, so the instruction sets are part of the description).
"""

import os
import platform

CPU_INFO = "/proc/cpuinfo"
BF16_FLAGS = ("amx_bf16", "avx512_bf16")
# The flags that move CPU figures here (oneDNN and XLA kernels, bfloat16 paths), in this order.
ISA_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8")


def _all_flags(path: str = CPU_INFO) -> frozenset[str]:
    """Every flag of the first `flags` line of `path`; empty when unreadable (not Linux)."""
    try:
        with open(path) as f:
            return next((frozenset(line.split(":", 1)[1].split()) for line in f if line.startswith("flags")),
                        frozenset())
    except OSError:
        return frozenset()


def cpu_flags(path: str = CPU_INFO) -> frozenset[str]:
    """The CPU's bfloat16 flags (of `BF16_FLAGS`) from the first `flags` line of `path`; empty when unreadable
    (not Linux)."""
    return _all_flags(path) & frozenset(BF16_FLAGS)


def cpu_class(flags: frozenset[str]) -> str:
    """`amx_bf16`, `avx512_bf16` or `none`: the strongest bfloat16 support among `flags`."""
    return next((f for f in BF16_FLAGS if f in flags), "none")


# (CPU class, XLA on) -> the measured policy. avx512_bf16 (AMD EPYC Zen 4, docs/accelerators.md): with XLA,
# mixed_bfloat16 is slower than float32 (BERT 0.86x); without XLA it is faster for BERT (1.33x) but not
# by MIN_SPEEDUP for GPT (1.05x). amx_bf16 and `none` have not been measured.
MIN_SPEEDUP = 1.10
MEASURED_CPU = {("avx512_bf16", True): "float32", ("avx512_bf16", False): "float32"}


def decide(device: str, flags: frozenset[str], jit_compile: bool) -> str:
    """The dtype policy for `auto`: `device` is `TPU`, `GPU` or `CPU`."""
    if device in ("TPU", "GPU"):
        return "mixed_bfloat16"
    return MEASURED_CPU.get((cpu_class(flags), bool(jit_compile)), "float32")


def device_kind() -> str:
    """`TPU` or `GPU` when TF sees one, else `CPU`."""
    import tensorflow as tf

    for kind in ("TPU", "GPU"):
        if tf.config.list_logical_devices(kind):
            return kind
    return "CPU"


def resolve_precision(policy: str, jit_compile: bool) -> str:
    """`auto` -> the decided policy for this machine; any other policy is returned unchanged."""
    return decide(device_kind(), cpu_flags(), jit_compile) if policy == "auto" else policy


def cpu_model() -> str:
    """The first `model name` of /proc/cpuinfo (else the platform's processor string)."""
    try:
        with open(CPU_INFO) as f:
            for line in f:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_isa(path: str = CPU_INFO) -> str:
    """The `ISA_FLAGS` this CPU reports, joined by "+" (`avx2`, `avx2+avx512f+avx512_bf16`); "" when
    /proc/cpuinfo cannot be read. `ONEDNN_MAX_CPU_ISA=AVX2` on an AVX-512 machine is noted as
    `+onednn_avx2` (oneDNN limited, XLA's own kernels not)."""
    flags = _all_flags(path)
    isa = "+".join(flag for flag in ISA_FLAGS if flag in flags)
    if os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper() == "AVX2" and "avx512f" in flags:
        isa += "+onednn_avx2"
    return isa


def machine() -> str:
    """The machine in words, for every printed time: `AMD EPYC, AVX2 (no AVX-512), 2 cores`."""
    isa = cpu_isa().split("+")
    width = ("AVX-512 limited to AVX2 in oneDNN" if "onednn_avx2" in isa else
             "AVX-512" + (" with bf16" if "avx512_bf16" in isa else "") if "avx512f" in isa else
             "AVX2 (no AVX-512)" if "avx2" in isa else "no AVX2")
    return f"{cpu_model()}, {width}{', AMX' if 'amx_tile' in isa else ''}, {os.cpu_count() or 0} cores"
