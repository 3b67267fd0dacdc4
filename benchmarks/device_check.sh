#!/usr/bin/env bash
# The accelerator check (docs/accelerators.md), under 8 minutes on one GPU:
#   1. BERT-base, seq 128, mixed_bfloat16 with XLA: our Trainer against keras-hub's `fit` (tokens/s, MFU
#      against an H200's dense bfloat16 peak, 989 TFLOP/s);
#   2. the same in mixed_float16 (dynamic loss scaling);
#   3. the training reader on the host's cores (examples per CPU-second, BERT dynamic masking, GPT, biLM).
# Results: $OUT/<step>.log and $OUT/<step>.json (the last line of each step), a summary table on stdout and in
# $OUT/summary.txt. Without $OUT they go to a temporary folder.
#
#   bash benchmarks/device_check.sh            # on the accelerator machine, from the repository root
#   bash benchmarks/device_check.sh --smoke    # a tiny run (bert_tiny, 2 steps) that checks the script on a CPU
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
[ -x "$PY" ] || PY=python3
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"

if [ "${1:-}" = "--smoke" ]; then
  TRAIN=(--sizes tiny --batch_size 4 --steps 2 --steps_per_execution 1 --seq_length 32 --repeats 1)
  READER=(--examples 256 --batches 5 --repeats 1 --seq_length 32)
  XLA=off LIMIT=400  # XLA off: compiling on a busy 2-core CPU takes minutes; the script's path is what is checked
else
  # base at batch 64 x 128 tokens: 20 timed steps in executions of 10, best of 2 repeats
  TRAIN=(--sizes base --batch_size 64 --steps 20 --steps_per_execution 10 --seq_length 128 --repeats 2)
  READER=(--batch_size 256 --batches 50 --repeats 2)
  XLA=on LIMIT=200
fi

run_step() {  # name, timeout (s), module and arguments
  local name=$1 limit=$2
  shift 2
  echo "== $name: $*" | tee "$OUT/$name.log"
  timeout "$limit" "$PY" -m "$@" >>"$OUT/$name.log" 2>&1
  local rc=$?
  tail -n 1 "$OUT/$name.log" | grep '^{' >"$OUT/$name.json" || echo '{}' >"$OUT/$name.json"
  echo "   rc=$rc, $(wc -l <"$OUT/$name.log") log lines"
}

nvidia-smi --query-gpu=name,memory.total --format=csv,noheader >"$OUT/gpu.txt" 2>/dev/null || echo "no GPU" >"$OUT/gpu.txt"
lscpu | grep 'Model name' >"$OUT/cpu.txt" 2>/dev/null
run_step bf16 "$LIMIT" benchmarks.training.training "${TRAIN[@]}" --xla "$XLA" --mixed_precision mixed_bfloat16 --peak_tflops 989
run_step fp16 "$LIMIT" benchmarks.training.training "${TRAIN[@]}" --xla "$XLA" --mixed_precision mixed_float16 --peak_tflops 989
run_step reader 60 benchmarks.training.reader "${READER[@]}"

"$PY" - "$OUT" <<'EOF' | tee "$OUT/summary.txt"
import json, os, sys
out = sys.argv[1]
load = lambda name: json.load(open(os.path.join(out, name + ".json")))
print("device:", open(os.path.join(out, "gpu.txt")).read().strip(), "|", open(os.path.join(out, "cpu.txt")).read().strip())
print(f"{'check':<9} {'size':<10} {'ours tok/s':>11} {'fit tok/s':>11} {'ours/fit':>8} {'ours MFU':>8} {'fit MFU':>8}")
for name in ("bf16", "fp16"):
    r = load(name)
    for key in sorted(k for k in r if k.endswith("_ours_tokens_per_s")):
        p = key[:-len("ours_tokens_per_s")]
        size = p.rstrip("_")
        print(f"{name:<9} {size:<10} {r[p + 'ours_tokens_per_s']:>11,} {r[p + 'ref_tokens_per_s']:>11,} "
              f"{r[p + 'ratio']:>8.2f} {r[p + 'ours_mfu']:>7.2f}% {r[p + 'ref_mfu']:>7.2f}%")
    if not r:
        print(f"{name:<9} failed: see {name}.log")
reader = load("reader")
for kind in ("bert_dynamic", "bert_static", "gpt", "bilm"):
    if kind in reader:
        print(f"reader    {kind:<13} {reader[kind]['examples_per_cpu_s']:>9,} examples/CPU-s "
              f"({reader.get('cpus')} host CPUs)")
EOF
echo "results in $OUT"
