"""Model cards for exported TF-Hub modules, in tfhub.dev's markdown format (a `# Module` title, metadata
comments such as `module-type`, `fine-tunable` and `format`, then overview and usage sections).

Owns `model_card(key, facts)`: the card of one module, from the facts of the run that trained it.
"""

_TEMPLATES = {
    "encoder": {
        "title": "BERT encoder", "module_type": "text-embedding", "architecture": "Transformer",
        "overview": "A BERT Transformer encoder (masked LM + next-sentence pretraining). Inputs "
                    "`input_word_ids`, `input_mask`, `input_type_ids` (int32 [batch, seq_length], as the matching "
                    "preprocessor writes them); outputs `pooled_output` [batch, hidden], `sequence_output` "
                    "[batch, seq_length, hidden], `encoder_outputs` (every layer) and `default` (= pooled). "
                    "`encoder.mlm` also takes `masked_lm_positions` and returns `mlm_logits`. Legacy attributes "
                    "`vocab_file` (an asset) and `do_lower_case` (a variable), as older BERT modules have them.",
        "usage": """preprocessor = hub.KerasLayer("{export_dir}/hub/preprocessor")
encoder = hub.KerasLayer("{export_dir}/hub/encoder", trainable=True)
outputs = encoder(preprocessor(tf.constant(["The river bank flooded."])))
outputs["pooled_output"]  # [1, hidden]""",
    },
    "preprocessor": {
        "title": "BERT preprocessor", "module_type": "text-preprocessing", "architecture": "WordPiece",
        "overview": "Text preprocessing for the matching BERT encoder: the WordPiece vocabulary and normalization "
                    "its pretraining data used. `tokenize(strings)` -> int32 ragged [batch, words, pieces], and "
                    "`tokenize.get_special_tokens_dict()` gives `vocab_size`, `padding_id`, "
                    "`start_of_sequence_id`, `end_of_segment_id`, `mask_id`; "
                    "`bert_pack_inputs([segments...], seq_length=N)` packs one or two segments with `[CLS]`/`[SEP]` "
                    "and round-robin truncation; calling the module on strings gives the encoder's inputs at the "
                    "trained sequence length.",
        "usage": """preprocessor = hub.load("{export_dir}/hub/preprocessor")
a, b = preprocessor.tokenize(tf.constant(["premise"])), preprocessor.tokenize(tf.constant(["hypothesis"]))
inputs = preprocessor.bert_pack_inputs([a, b], seq_length=tf.constant(128))
special_tokens = preprocessor.tokenize.get_special_tokens_dict()  # mask_id, padding_id, ...""",
    },
    "gpt": {
        "title": "GPT language model", "module_type": "text-generation", "architecture": "Transformer decoder",
        "overview": "A left-to-right Transformer decoder language model (GPT-1 architecture). `__call__` takes "
                    "`input_word_ids` and returns `hidden_states` and `logits`; `tokenize`, `from_text` and "
                    "`generate` (greedy or top-k sampling, in the graph) work from strings.",
        "usage": """module = hub.load("{export_dir}/hub/module")
module.generate(tf.constant(["The bank"]), max_new_tokens=20, top_k=1, temperature=1.0, seed=0)["text"]""",
    },
    "bilm": {
        "title": "ELMo biLM", "module_type": "text-embedding", "architecture": "ELMo (character CNN + biLSTM)",
        "overview": "Deep contextualized word representations from a bidirectional LSTM language model, with the "
                    "signatures and outputs of TF-Hub's `elmo/2`: `default` (untokenized sentences) and `tokens` "
                    "(`tokens`, `sequence_len`) return `word_emb`, `lstm_outputs1`, `lstm_outputs2`, `elmo` (the "
                    "learned scalar mix) and `default` (its mean over real tokens).",
        "usage": """elmo = hub.KerasLayer("{export_dir}/hub/module", signature="default", signature_outputs_as_dict=True)
elmo(tf.constant(["the cat is on the mat"]))["elmo"]  # [1, 6, 2 * lstm_projection_dim]
# fine-tuning (tf_keras model): hub.KerasLayer("{export_dir}/hub/module", trainable=True, output_key="elmo")""",
    },
}


def model_card(key: str, facts: dict) -> str:
    """The markdown card. `facts`: `name`, `preset`, `export_dir`, `train_data`, `train_steps`,
    `vocab_size`, `max_seq_length`, `lower_case`, `metrics` (optional dict)."""
    t = _TEMPLATES[key]
    metrics = facts.get("metrics") or {}
    metric_lines = "".join(f"- {k}: {v:.4g}\n" for k, v in sorted(metrics.items()) if isinstance(v, (int, float)))
    return f"""# Module {facts['name']}/1
{t['title']} ({facts['preset']}), pretrained by this pipeline.

<!-- module-type: {t['module_type']} -->
<!-- network-architecture: {t['architecture']} -->
<!-- dataset: {facts['train_data']} -->
<!-- language: en -->
<!-- fine-tunable: {'false' if key == 'preprocessor' else 'true'} -->
<!-- format: saved_model_2 -->

## Overview

{t['overview']}

- Preset: `{facts['preset']}`; vocabulary: {facts['vocab_size']} WordPiece entries ({'uncased' if facts['lower_case'] else 'cased'}), `assets/vocab.txt`.
- Pretrained for {facts['train_steps']} steps on `{facts['train_data']}` with sequence length {facts['max_seq_length']}.
{('- Evaluation:' + chr(10) + metric_lines) if metric_lines else ''}
## Usage

Load with `hub.load` or `hub.KerasLayer` (a `tf_keras` model; for Keras 3 use `keras.layers.TFSMLayer`).
Import `tensorflow_text` first: the graph uses its ops.

```python
import tensorflow as tf, tensorflow_hub as hub, tensorflow_text  # noqa: F401
{t['usage'].format(export_dir=facts['export_dir'])}
```
"""
