"""Writes BERT's per-token hidden states for lines of text as JSON lines.

Same flags and output as the original `extract_features.py`: each input line
is one text, or a pair written `text_a ||| text_b`; each output line is
`{"linex_index": i, "features": [{"token": t, "layers": [{"index": -1,
"values": [...]}, ...]}, ...]}` with one entry per WordPiece token, [CLS]
and [SEP] included. Layer indices count encoder layers, so -1 is the last
transformer block (the embedding output is not a layer here, as in the
original).
"""

from __future__ import annotations

import collections
import json
import os
import re
import tempfile
from typing import Iterator

from absl import app, flags, logging

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None, "Text file: one text, or `text_a ||| text_b`, per line.")
flags.DEFINE_string("output_file", None, "JSON-lines file to write.")
flags.DEFINE_string("layers", "-1,-2,-3,-4", "Comma-separated encoder layer indices to write.")
flags.DEFINE_string("bert_config_file", None, "Google bert_config.json or Hugging Face config.json.")
flags.DEFINE_string("init_checkpoint", None,
                    "Google TF1 checkpoint prefix, Hugging Face folder or .safetensors file, "
                    "or a checkpoint written by this project.")
flags.DEFINE_string("vocab_file", None, "WordPiece vocabulary file.")
flags.DEFINE_bool("do_lower_case", True, "Lowercase and strip accents (uncased models).")
flags.DEFINE_integer("max_seq_length", 128, "Packed length; longer texts are truncated.")
flags.DEFINE_integer("batch_size", 32, "Texts per forward pass.")

_PAIR_SEPARATOR = re.compile(r"^(.*) \|\|\| (.*)$")


def parse_line(line: str) -> tuple[str, str | None]:
    """Splits `text_a ||| text_b` into its two texts; a plain line is text_a alone."""
    match = _PAIR_SEPARATOR.match(line)
    if match:
        return match.group(1), match.group(2)
    return line, None


def parse_layer_indices(spec: str, num_layers: int) -> list[int]:
    """Reads the --layers list and checks every index names an existing layer."""
    try:
        indices = [int(part) for part in spec.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"--layers must be comma-separated integers, got {spec!r}") from None
    if not indices:
        raise ValueError("--layers is empty")
    for index in indices:
        if not -num_layers <= index < num_layers:
            raise ValueError(f"--layers index {index} is out of range for a model with "
                             f"{num_layers} layers")
    return indices


def feature_records(texts: list[tuple[str, str | None]], tokenizer, encoder,
                    layer_indices: list[int], max_seq_length: int,
                    batch_size: int) -> Iterator[dict]:
    """Yields one output record per input text, in input order."""
    import keras
    import numpy as np
    import tensorflow as tf

    from data_prep.text.sentence_pairs import pack

    @tf.function(reduce_retracing=True)
    def hidden_states(input_ids, input_mask, segment_ids):
        outputs = encoder({"input_ids": input_ids, "input_mask": input_mask,
                           "segment_ids": segment_ids}, training=False)
        layers = outputs["hidden_states"][1:]  # encoder layers only, as the original
        return tf.stack([layers[i] for i in layer_indices], axis=0)

    progress = keras.utils.Progbar(len(texts), unit_name="text")
    for start in range(0, len(texts), batch_size):
        batch = texts[start:start + batch_size]
        firsts = tokenizer.tokenize_many([a for a, _ in batch])
        seconds = iter(tokenizer.tokenize_many([b for _, b in batch if b is not None]))
        packed = [pack(first, next(seconds) if b is not None else None, max_seq_length,
                       tokenizer.vocab) for first, (_, b) in zip(firsts, batch)]
        arrays = [np.array([getattr(p, field) for p in packed], dtype=np.int32)
                  for field in ("input_ids", "input_mask", "segment_ids")]
        values = hidden_states(*arrays).numpy()  # [layers, batch, seq, hidden]
        for offset, example in enumerate(packed):
            features = []
            for position, token in enumerate(example.tokens):
                layers = [collections.OrderedDict(
                    [("index", layer_index),
                     ("values", [round(float(x), 6) for x in values[j, offset, position]])])
                    for j, layer_index in enumerate(layer_indices)]
                features.append(collections.OrderedDict([("token", token), ("layers", layers)]))
            yield collections.OrderedDict([("linex_index", start + offset),
                                           ("features", features)])
        progress.add(len(batch))


def read_texts(path: str) -> list[tuple[str, str | None]]:
    """Reads the input file; a line that is not UTF-8 is an error naming file and line."""
    from data_prep.text.text_files import read_utf8_lines

    return [parse_line(line.strip()) for line in read_utf8_lines(path)]


def main(argv: list[str]) -> None:
    del argv
    for name in ("input_file", "output_file", "bert_config_file", "init_checkpoint",
                 "vocab_file"):
        if not getattr(FLAGS, name):
            raise app.UsageError(f"--{name} is required")

    from data_prep.text.tokenization import FullTokenizer
    from modeling.checkpoints import load_weights
    from modeling.config import BertConfig
    from modeling.encoder import BertEncoder

    config = BertConfig.from_json_file(FLAGS.bert_config_file)
    if FLAGS.max_seq_length > config.max_position_embeddings:
        raise app.UsageError(
            f"--max_seq_length={FLAGS.max_seq_length} exceeds the model's "
            f"max_position_embeddings={config.max_position_embeddings}")
    layer_indices = parse_layer_indices(FLAGS.layers, config.num_hidden_layers)
    tokenizer = FullTokenizer(FLAGS.vocab_file, do_lower_case=FLAGS.do_lower_case)
    texts = read_texts(FLAGS.input_file)

    encoder = BertEncoder(config, output_hidden_states=True)
    report = load_weights(encoder, FLAGS.init_checkpoint)
    if report.missing:
        raise ValueError(f"{FLAGS.init_checkpoint} lacks encoder weights: "
                         f"{', '.join(sorted(report.missing))}")
    logging.info(report.summary())

    output_dir = os.path.dirname(os.path.abspath(FLAGS.output_file))
    os.makedirs(output_dir, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=output_dir, prefix=".extract_features-")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as writer:
            for record in feature_records(texts, tokenizer, encoder, layer_indices,
                                          FLAGS.max_seq_length, FLAGS.batch_size):
                writer.write(json.dumps(record) + "\n")
        os.replace(temporary, FLAGS.output_file)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)
    logging.info("Wrote features of %d texts to %s", len(texts), FLAGS.output_file)


if __name__ == "__main__":
    from training.cli import run

    run(main)
