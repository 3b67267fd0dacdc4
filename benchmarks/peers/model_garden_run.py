"""Running the Model Garden BERT peer (`model_garden_bert.py`) at one of our recipes, in a process of its own
with Model Garden on its path (`model_garden.ensure_installed`): what `benchmarks.training.learning_parity` and
`benchmarks.training.time_to_quality` share."""

import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def python(module_or_script: list[str], env: dict | None = None) -> None:
    """`python ARGS` from the root; raises with the end of stderr when it fails; prints its wall time."""
    started = time.time()
    proc = subprocess.run([sys.executable, *module_or_script], cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(module_or_script[:3])} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    print(f"  ({time.time() - started:.0f} s)", flush=True)


def train(patterns: dict, overrides: list[str], steps: int, points: int, eval_batches: int, output: str,
          cache_dir: str) -> None:
    """Model Garden's BERT at the shape and recipe of `bert_tiny` with `overrides` (resolved as ours)."""
    from benchmarks.lib.parity_runs import resolve_configs
    from benchmarks.peers import model_garden
    from preprocessing import readers

    metadata, _ = readers.read_metadata(patterns["pretrain"])
    c, t = resolve_configs("bert", "bert_tiny", metadata.vocab.size, overrides, steps)
    every = steps // points
    flags = {"vocab_size": c.vocab_size, "num_layers": c.num_layers, "hidden_size": c.hidden_size,
             "num_heads": c.num_heads, "intermediate_size": c.intermediate_size, "hidden_act": c.hidden_act,
             "dropout": c.dropout, "max_seq_length": metadata.max_seq_length,
             "max_predictions_per_seq": metadata.max_predictions_per_seq, "batch_size": t.batch_size,
             "train_steps": steps, "warmup_steps": t.warmup_steps, "learning_rate": t.learning_rate,
             "weight_decay": t.weight_decay, "beta_1": t.beta_1, "beta_2": t.beta_2, "epsilon": t.epsilon,
             "clip_norm": t.clip_norm, "seed": t.seed, "shuffle_buffer": t.shuffle_buffer,
             "eval_at": ",".join(str(i * every) for i in range(points + 1)), "eval_batches": eval_batches}
    path = model_garden.ensure_installed(cache_dir)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([path, ROOT])}
    python([os.path.join(ROOT, "benchmarks", "peers", "model_garden_bert.py"), "--train_data", patterns["pretrain"],
            "--eval_data", patterns["heldout"], "--output", output, *[f"--{k}={v}" for k, v in flags.items()]], env)
