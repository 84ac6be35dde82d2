"""BERT's per-token hidden states for lines of text, as the original `extract_features.py`.

Each input line is one text, or a pair written `text_a ||| text_b`; each
output line is `{"linex_index": i, "features": [{"token": t, "layers":
[{"index": -1, "values": [...]}, ...]}, ...]}` with one entry per WordPiece
token, [CLS] and [SEP] included. Layer indices count encoder layers, so -1
is the last transformer block (the embedding output is not a layer here,
as in the original).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import re
from typing import Iterator

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from core.arguments import FieldError, FieldFileNotFoundError, check_integer, check_not_blank
from core.atomic import atomic_open
from core.record_schema import ENCODER_INPUTS
from network.checkpoints import load_weights
from network.encoder import BertEncoder
from tasks.contract import TaskResult
from tasks.model_files import FROZEN_ENCODER, ModelFiles, ResolvedModel, resolve_model_files
from text.sentence_pairs import pack
from text.text_files import read_utf8_lines
from text.tokenization import FullTokenizer
from training.configs import OptimizationConfig, TrainingConfig

# The original's separator; a line ending in it (its trailing space stripped) has an empty B.
_PAIR_SEPARATOR = re.compile(r"^(.*) \|\|\|(?: (.*))?$")


@dataclasses.dataclass(frozen=True)
class FeatureTask:
    """What to read, what to write, and which layers."""

    input_file: str  # one text, or `text_a ||| text_b`, per line
    output_file: str  # JSON lines
    layers: str = "-1,-2,-3,-4"  # comma-separated encoder layer indices
    max_seq_length: int = 128  # packed length; longer texts are truncated
    batch_size: int = 32  # texts per forward pass

    def __post_init__(self) -> None:
        for name in ("input_file", "output_file"):
            if not getattr(self, name):
                raise FieldError(f"{{{name}}} is required")
            check_not_blank(name, getattr(self, name))
        check_integer("max_seq_length", self.max_seq_length)
        check_integer("batch_size", self.batch_size)


def parse_line(line: str) -> tuple[str, str | None]:
    """Splits `text_a ||| text_b` into its two texts; a plain line is text_a alone.

    An empty text_b makes a single text, as in the original (which packs a
    second segment only for a non-empty text_b), not a pair with "|||" in A.
    """
    match = _PAIR_SEPARATOR.match(line)
    if match:
        return match.group(1), (match.group(2) or "").strip() or None
    return line, None


def parse_layer_indices(spec: str, num_layers: int) -> list[int]:
    """Reads the `layers` list and checks every index names an existing layer."""
    try:
        indices = [int(part) for part in spec.split(",") if part.strip()]
    except ValueError:
        raise FieldError("{layers} must be comma-separated integers, got {0!r}", spec) from None
    if not indices:
        raise FieldError("{layers} is empty")
    for index in indices:
        if not -num_layers <= index < num_layers:
            raise FieldError("{layers} index {0} is out of range for a model with {1} layers",
                             index, num_layers)
    return indices


def read_texts(path: str) -> list[tuple[str, str | None]]:
    """Reads the input file; a line that is not UTF-8 is an error naming file and line."""
    return [parse_line(line.strip()) for line in read_utf8_lines(path)]


def feature_records(texts: list[tuple[str, str | None]], tokenizer: FullTokenizer,
                    encoder: BertEncoder, layer_indices: list[int], max_seq_length: int,
                    batch_size: int) -> Iterator[dict]:
    """Yields one output record per input text, in input order."""
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
                  for field in ENCODER_INPUTS]
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


class Features:
    """The contract (`tasks.contract.Task`) for `FeatureTask`.

    Extraction trains nothing: its sizes are the task's own (the original's
    flags), so `training` and `optimization` may be None and are not read.
    """

    def prepare(self, task: FeatureTask, model_files: ModelFiles,
                training: TrainingConfig | None = None,
                optimization: OptimizationConfig | None = None) -> ResolvedModel:
        del training, optimization  # see the class docstring
        if os.path.isdir(task.output_file):  # found now, not after every feature is computed
            raise FieldError("{output_file}={0} is a folder; pass the name of the JSON-lines "
                             "file to write", task.output_file)
        resolved = resolve_model_files(model_files, FROZEN_ENCODER, task.max_seq_length)
        parse_layer_indices(task.layers, resolved.config.num_hidden_layers)
        return resolved

    def run(self, task: FeatureTask, resolved: ResolvedModel,
            training: TrainingConfig | None = None, optimization: OptimizationConfig | None = None,
            strategy: tf.distribute.Strategy | None = None) -> TaskResult:
        """Writes the features of every input text, whole or not at all."""
        del training, optimization, strategy  # one forward pass at a time, on this device
        layer_indices = parse_layer_indices(task.layers, resolved.config.num_hidden_layers)
        if "://" not in task.input_file and not os.path.exists(task.input_file):
            raise FieldFileNotFoundError("{input_file}={0}: no such file", task.input_file)
        texts = read_texts(task.input_file)
        encoder = BertEncoder(resolved.config, output_hidden_states=True)
        report = load_weights(encoder, resolved.files.init_checkpoint)
        if report.missing:
            raise ValueError(f"{resolved.files.init_checkpoint} lacks encoder weights: "
                             f"{', '.join(sorted(report.missing))}")
        logging.info(report.summary())

        os.makedirs(os.path.dirname(os.path.abspath(task.output_file)), exist_ok=True)
        with atomic_open(task.output_file) as writer:
            for record in feature_records(texts, resolved.tokenizer, encoder, layer_indices,
                                          task.max_seq_length, task.batch_size):
                writer.write(json.dumps(record) + "\n")
        logging.info("Wrote features of %d texts to %s", len(texts), task.output_file)
        return TaskResult({}, (task.output_file,))


TASK = Features()
