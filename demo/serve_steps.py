"""The demo's steps on exports: `serving.export` of every model, the local TF Serving-compatible server
queried over REST, and the polysemy evaluation (`downstream.evaluate_senses`) of each export, every one
redone only when its checkpoint, code or data changed."""

import json
import os
import re
import shutil
import sys
import time

from demo import commands

DEMO_QUERIES = ["The bank raised its interest rates.", "They sat on the bank of the river."]
GPT_PROMPT = "The jury said that"
# The picture's word: of WordNet 3.1's example sentences, "deep" has the most occurrences in its second
# largest sense (36 sentences, 12 and 6 in the two largest of its 7 senses); "bank" has 4.
PICTURE_WORD = "deep"
EXAMPLE_WORDS = "deep,bank,play"


def export_models(model_dirs: dict, export_root: str, sink: list | None = None) -> dict:
    """Exports each model_dir to `export_root/<name>/` (two at a time) unless that checkpoint (its name and
    its index's sha256) was already exported by the same export code; returns name -> export_dir, TF Serving
    base path and the export's stamp. Output into `sink` if given (`commands.say`)."""
    exported, jobs = {}, {}
    code = commands.source_digest("serving", "models", "preprocessing")
    for name, model_dir in model_dirs.items():
        export_dir = os.path.join(export_root, name)
        checkpoint = os.path.abspath(commands.latest_checkpoint(model_dir))
        # the index holds every tensor's checksum: a checkpoint retrained under the same name is another one
        stamp = {"checkpoint": checkpoint, "index_sha256": commands.file_sha256(checkpoint + ".index"), "code": code}
        if commands.key_matches(os.path.join(export_dir, "exported_from.json"), stamp):
            commands.say(f"{name}: {export_dir} is up to date (checkpoint {os.path.basename(stamp['checkpoint'])})",
                         sink)
        else:
            if os.path.isdir(export_dir):  # an export of another checkpoint or code: replace it whole
                shutil.rmtree(export_dir)
            jobs[name] = [sys.executable, "-m", "serving.export", "--model_dir", model_dir, "--export_dir", export_dir,
                          "--model_name", name]
        exported[name] = {"export_dir": export_dir, "stamp": stamp,
                          "base": os.path.join(os.path.abspath(export_dir), "serving", name)}
    commands.run_all(list(jobs.values()), sink=sink)
    for name in jobs:
        commands.write_key(os.path.join(exported[name]["export_dir"], "exported_from.json"), exported[name]["stamp"])
    return exported


def _timed(call):
    started = time.time()
    result = call()
    return result, round(1000 * (time.time() - started), 1)


def _query(client, url: str, encoders: list[str]) -> dict:
    answers = {}
    for name in encoders:
        out, answers[f"{name}_ms"] = _timed(lambda: client.predict(name, instances=DEMO_QUERIES)["predictions"])
        answers[f"{name}_pooled_dim"] = len(out[0]["pooled_output"])
        print(f"POST {url}/v1/models/{name}:predict {DEMO_QUERIES} -> 2 x pooled_output"
              f"[{answers[f'{name}_pooled_dim']}], {answers[f'{name}_ms']} ms")
    elmo, answers["bilm_ms"] = _timed(lambda: client.predict("bilm", instances=DEMO_QUERIES)["predictions"])
    answers["bilm_default_dim"] = len(elmo[0]["default"])
    print(f"POST {url}/v1/models/bilm:predict -> 2 x ELMo default[{answers['bilm_default_dim']}], "
          f"{answers['bilm_ms']} ms")
    gpt, answers["gpt_ms"] = _timed(lambda: client.predict("gpt", signature_name="generate", inputs={
        "prompt": [GPT_PROMPT], "max_new_tokens": 24, "top_k": 20, "temperature": 0.8, "seed": 1})["outputs"])
    answers["gpt_continuation"] = f"{GPT_PROMPT} {gpt['text'][0]}"
    print(f"POST {url}/v1/models/gpt:predict (generate, top-20 sampling) -> {answers['gpt_continuation']!r}, "
          f"{answers['gpt_ms']} ms")
    return answers


def serve_and_query(bases: dict, config_path: str) -> dict:
    """Starts `serving.server` over the exports (`bases`: name -> TF Serving base path), asks each BERT
    encoder (`bert`, `minilm`) for embeddings, the biLM for ELMo vectors and GPT for a continuation over REST,
    stops it; returns what came back (sizes, the GPT text, latencies)."""
    from serving.client import RestClient
    from serving.server.model_config import write_model_config_list

    write_model_config_list(config_path, sorted(bases.items()))
    cmd = [sys.executable, "-m", "serving.server", "--model_config_file", config_path, "--rest_api_port", "0",
           "--port", "0"]
    print("$ " + " ".join(cmd), flush=True)
    with commands.child(cmd) as server:  # stopped (SIGTERM, then waited for) when the block ends
        url = None
        for line in server.stdout:
            print("  server: " + line.rstrip(), flush=True)
            match = re.search(r"REST (http://\S+)", line)
            if match:
                url = match.group(1)
                break
        if url is None:
            raise RuntimeError(f"the server exited with status {server.wait()} before serving")
        return _query(RestClient(url), url, [name for name in ("bert", "minilm") if name in bases])


def evaluate_polysemy(exported: dict, senses: str, pairs: str | None, out_dir: str, sink: list | None = None) -> dict:
    """`downstream.evaluate_senses` on each export (two at a time; reused while the export and data are
    unchanged); prints its report and neighbours (into `sink` if given), draws `out_dir/<name>_deep.png`;
    returns name -> the evaluation's summary."""
    os.makedirs(out_dir, exist_ok=True)
    results, jobs, keys = {}, {}, {}
    for name, export in exported.items():
        result_path = os.path.join(out_dir, f"{name}.json")
        png = os.path.join(out_dir, f"{name}_{PICTURE_WORD}.png")
        keys[name] = {"export": export["stamp"], "senses": os.path.abspath(senses),
                      "pairs": os.path.abspath(pairs) if pairs else None, "word": PICTURE_WORD}
        if os.path.exists(result_path) and os.path.exists(png):
            saved = json.load(open(result_path))
            if saved.get("key") == keys[name]:
                commands.say(f"{name}: reusing {result_path}", sink)
                commands.say(saved["report"].rstrip("\n"), sink)
                results[name] = saved["summary"]
                continue
        jobs[name] = [sys.executable, "-m", "downstream.evaluate_senses", "--module", export["export_dir"],
                      "--data", senses, "--png", png, "--png_word", PICTURE_WORD, "--examples", EXAMPLE_WORDS,
                      *(["--pairs", pairs] if pairs else [])]
    for name, stdout in zip(jobs, commands.run_all(list(jobs.values()), sink=sink)):
        report = "".join(line + "\n" for line in stdout.splitlines()[:-1])
        results[name] = commands.last_json(stdout)
        with open(os.path.join(out_dir, f"{name}.json"), "w") as f:
            json.dump({"key": keys[name], "summary": results[name], "report": report}, f, indent=1)
    return {name: results[name] for name in exported}


def embed_heldout(export: dict, heldout_text: str, out_dir: str, sink: list | None = None) -> dict:
    """`downstream.embed` (the Beam job, local runner) over the held-out sentences with one BERT export: a
    mean-pooled vector per sentence from its last layer, as TFRecords under `out_dir` (reused while the export
    and the text are unchanged); returns where they are and what the job counted (its metadata.json). Output
    into `sink` if given."""
    metadata_path = os.path.join(out_dir, "metadata.json")
    key = {"export": export["stamp"], "input": commands.files_key(heldout_text), "bad_lines": "truncate"}
    key_path = os.path.join(out_dir, "embedded_from.json")
    if os.path.exists(metadata_path) and commands.key_matches(key_path, key):
        commands.say(f"reusing {out_dir} (same export and held-out text)", sink)
    else:
        commands.module("downstream.embed", "--module", export["export_dir"], "--input", heldout_text,
                        "--output_dir", out_dir, "--layers", "last", "--pool", "mean", "--num_shards", "2",
                        "--overwrite", sink=sink)
        commands.write_key(key_path, key)
    metadata = json.load(open(metadata_path))
    counters = metadata["counters"]
    figures = {"output_dir": out_dir, "files": [os.path.join(out_dir, f) for f in metadata["files"]],
               "examples": metadata["examples"], "dims": metadata["dims"],
               "model_loads": metadata["model_loads"], "worker_processes": metadata["worker_processes"],
               "truncated": counters["truncated"], "dropped": metadata["dropped"]}
    commands.say(f"{figures['examples']:,} held-out sentences -> {len(figures['files'])} shard(s) of "
                 f"tf.train.Example (text, words, mean-pooled `last` [{figures['dims']['last']}]) in {out_dir}; "
                 f"truncated to the window: {figures['truncated']}; no record: {figures['dropped']}", sink)
    figures["neighbours"] = nearest_sentences(figures["files"], metadata["dims"], sink=sink)
    return figures


def nearest_sentences(files: list[str], dims: dict, k: int = 3, sink: list | None = None) -> dict:
    """Reads the job's records back (`downstream.embed_model.parse_example`) and prints the `k` held-out
    sentences nearest (cosine) to the first one of eight words or more: the vectors at work."""
    import numpy as np
    import tensorflow as tf

    from downstream.embed_model import parse_example

    records = [parse_example(r.numpy(), dims, "mean") for r in tf.data.TFRecordDataset(files)]
    if len(records) < 2:
        commands.say(f"{len(records)} record(s): no neighbours to show", sink)
        return {"query": None, "nearest": []}
    records.sort(key=lambda r: (r["file"], r["line"]))
    vectors = np.stack([r["last"] for r in records])
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)
    query = next((i for i, r in enumerate(records) if len(r["words"]) >= 8), 0)
    scores = vectors @ vectors[query]
    scores[query] = -np.inf
    order = np.argsort(-scores)[:min(k, len(records) - 1)]
    nearest = [(records[i]["text"], round(float(scores[i]), 3)) for i in order]
    commands.say(f"nearest held-out sentences to {records[query]['text']!r} (cosine of the records' vectors):", sink)
    for text, score in nearest:
        commands.say(f"  {score:.3f}  {text}", sink)
    return {"query": records[query]["text"], "nearest": nearest}
