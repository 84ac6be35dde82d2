"""The feature-based approach of Section 5.4: frozen BERT layers feed a BiLSTM tagger.

Table 7 asks how much of BERT's NER quality survives without fine-tuning:
the encoder's weights stay as pre-trained, its activations are taken as
fixed contextual embeddings (as ELMo's are), and only a new two-layer
768-unit BiLSTM with a linear classifier is trained on top. The rows of
the table differ only in which activations are taken:

| `--feature_layers`  | Table 7 row                   | width |
|---------------------|-------------------------------|-------|
| `embeddings`        | Embeddings                    | H     |
| `second_to_last`    | Second-to-Last Hidden         | H     |
| `last`              | Last Hidden                   | H     |
| `sum_last_four`     | Weighted Sum Last Four Hidden | H     |
| `concat_last_four`  | Concat Last Four Hidden       | 4H    |
| `sum_all`           | Weighted Sum All 12 Layers    | H     |

"All 12 layers" are the Transformer blocks of BERT-Base, so `sum_all`
leaves the embedding output out. The paper does not say how its sums were
weighted; here they are plain (equal-weight) sums, which keeps one vector
per token and so lets the combined features be computed once and cached,
the point of the approach. `concat_last_four` concatenates the last block
first, the order of the original `extract_features.py --layers=-1,-2,-3,-4`.

Because the encoder never changes, `combine_hidden_states` runs once per
window before any classifier training (see `run_ner.py`); the BiLSTM then
trains on cached arrays, many times over if one likes, at a small fraction
of fine-tuning's cost.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import math
import os
from typing import Any, Callable, Mapping, Sequence

import keras
import numpy as np
import tensorflow as tf
from absl import logging
from keras import ops

from core.arguments import check_integer, check_number, check_width
from core.atomic import atomic_path
from core.record_schema import ENCODER_INPUTS
from modeling.losses import tagging_loss
from network.layers.dropout import Dropout
from network.layers.settings import ConfigurableModel
from training.divergence import GuardedSteps

FEATURE_LAYERS = ("embeddings", "second_to_last", "last", "sum_last_four",
                  "concat_last_four", "sum_all")


def feature_width(choice: str, hidden_size: int) -> int:
    """Size of one token's feature vector for a `FEATURE_LAYERS` choice."""
    _check_choice(choice)
    return 4 * hidden_size if choice == "concat_last_four" else hidden_size


# Transformer blocks a choice reads (the others need one).
_BLOCKS_NEEDED = {"second_to_last": 2, "sum_last_four": 4, "concat_last_four": 4}


def feature_layers_for(num_blocks: int) -> list[str]:
    """The FEATURE_LAYERS choices an encoder of `num_blocks` blocks has."""
    return [choice for choice in FEATURE_LAYERS if _BLOCKS_NEEDED.get(choice, 1) <= num_blocks]


def check_feature_layers(choice: str, num_blocks: int) -> None:
    """Raises ValueError for an unknown choice or an encoder with too few blocks for it."""
    _check_choice(choice)
    needed = _BLOCKS_NEEDED.get(choice, 1)
    if num_blocks < needed:
        raise ValueError(f"feature layers {choice!r} need an encoder of at least {needed} "
                         f"block(s); this one has {num_blocks}")


def _check_choice(choice: str) -> None:
    if choice not in FEATURE_LAYERS:
        raise ValueError(f"feature layers must be one of {', '.join(FEATURE_LAYERS)}, "
                         f"got {choice!r}")


def combine_hidden_states(hidden_states: Sequence, choice: str):
    """One feature tensor [batch, seq, width] from the encoder's `hidden_states`.

    `hidden_states` is the embedding output followed by each block's output
    (`BertEncoder(output_hidden_states=True)`). Raises ValueError for an
    unknown choice or an encoder with too few blocks for it.
    """
    check_feature_layers(choice, len(hidden_states) - 1)
    if choice == "embeddings":
        return hidden_states[0]
    if choice == "second_to_last":
        return hidden_states[-2]
    if choice == "last":
        return hidden_states[-1]
    if choice == "concat_last_four":
        return ops.concatenate([hidden_states[-k] for k in range(1, 5)], axis=-1)
    chosen = hidden_states[-4:] if choice == "sum_last_four" else hidden_states[1:]
    total = chosen[0]
    for state in chosen[1:]:
        total = total + state
    return total


def write_features(encoder, arrays: dict[str, np.ndarray], choice: str, path: str,
                   batch_size: int, also: Mapping[str, str] | None = None) -> None:
    """Runs the frozen `encoder` over every window once; writes [windows, seq, width] float32.

    The .npy file is filled batch by batch through a memory map, so features
    larger than memory (concat_last_four of BERT-Base on CoNLL-2003 train is
    about 22 GB) never sit in RAM, and it is renamed into place only when
    complete, so an interrupted run never leaves a cache entry later runs trust.
    `also` ({other choice: its path}) writes those choices' features from the
    same forward pass: Table 7's rows differ only in how the layers combine.
    """
    if not encoder.output_hidden_states:
        raise ValueError("the encoder must be built with output_hidden_states=True")
    targets = {choice: path, **(also or {})}
    for name in targets:
        check_feature_layers(name, encoder.config.num_hidden_layers)
    count, length = arrays["input_ids"].shape

    def combined(batch):
        states = encoder(batch, training=False)["hidden_states"]
        return {name: combine_hidden_states(states, name) for name in targets}

    compute = tf.function(combined, reduce_retracing=True)
    with contextlib.ExitStack() as stack:
        outputs = {}
        for name, target in targets.items():
            os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
            staging = stack.enter_context(atomic_path(target))
            outputs[name] = np.lib.format.open_memmap(
                staging, mode="w+", dtype=np.float32,
                shape=(count, length, feature_width(name, encoder.config.hidden_size)))
        # One pass over CoNLL-2003's training windows takes minutes on a CPU.
        progress = keras.utils.Progbar(count, unit_name="window")
        for start in range(0, count, batch_size):
            batch = {key: tf.constant(arrays[key][start:start + batch_size])
                     for key in ENCODER_INPUTS}
            for name, values in compute(batch).items():
                outputs[name][start:start + batch_size] = np.asarray(values, dtype=np.float32)
            progress.add(len(batch["input_ids"]))
        for output in outputs.values():
            output.flush()
        del outputs


def cached_features(build_encoder: Callable[[], keras.Model], checkpoint: str,
                    identity: Mapping[str, Any], splits: Mapping[str, dict[str, np.ndarray]],
                    choice: str, folder: str, batch_size: int,
                    also: Sequence[str] = ()) -> dict[str, np.ndarray]:
    """Each split's features (memory-mapped), computed only where no cache entry exists.

    An entry is `<folder>/<split>-<choice>-len<length>-<hash>.npy`, the hash
    over the checkpoint (its path, and each file's size and time),
    `identity` (what else makes the encoder: its config, its precision) and
    the split's token ids, so changing the data or the checkpoint never
    reads stale features. `build_encoder` (a frozen encoder with
    `output_hidden_states`) is called only when an entry is missing.

    Args:
      build_encoder: makes the encoder, its weights loaded from `checkpoint`.
      checkpoint: the encoder's checkpoint: a prefix, a file or a folder.
      identity: the rest of what the features depend on, as JSON values.
      splits: each split's arrays (ENCODER_INPUTS), by split name.
      choice: one of FEATURE_LAYERS.
      folder: where the entries are kept.
      batch_size: windows per forward pass.
      also: other FEATURE_LAYERS choices to cache from the same forward pass
        where `choice` is computed (a later run of one of them reuses it).
    """
    checkpoint = os.path.abspath(checkpoint)
    source = json.dumps({"checkpoint": checkpoint, "files": _checkpoint_files(checkpoint),
                         **identity}, sort_keys=True).encode()
    encoder, found = None, {}
    for name, arrays in splits.items():
        digest = hashlib.sha256(source)
        for key in ENCODER_INPUTS:
            digest.update(np.ascontiguousarray(arrays[key]).tobytes())
        paths = {layers: os.path.join(folder, f"{name}-{layers}-len"
                                              f"{arrays['input_ids'].shape[1]}-"
                                              f"{digest.hexdigest()[:16]}.npy")
                 for layers in dict.fromkeys([choice, *also])}
        found[name] = paths[choice]
        if os.path.exists(paths[choice]):
            logging.info("%s: reusing cached features %s", name, paths[choice])
            continue
        encoder = encoder or build_encoder()
        others = {layers: path for layers, path in paths.items()
                  if layers != choice and not os.path.exists(path)}
        logging.info("%s: computing %s features of %d windows into %s%s", name,
                     ", ".join([choice, *others]), len(arrays["input_ids"]), paths[choice],
                     " (and beside it)" if others else "")
        write_features(encoder, arrays, choice, paths[choice], batch_size, others)
    return {name: np.load(path, mmap_mode="r") for name, path in found.items()}


def _checkpoint_files(path: str) -> list:
    """(file, size, mtime) of each file of a checkpoint: a prefix, a file or a folder."""
    files = (sorted(os.path.join(path, name) for name in os.listdir(path))
             if os.path.isdir(path) else sorted(glob.glob(glob.escape(path) + "*")))
    if not files:
        raise FileNotFoundError(f"{path}: no such checkpoint file, folder or prefix")
    return [(os.path.basename(file), os.stat(file).st_size, os.stat(file).st_mtime_ns)
            for file in files]


class FeatureBatches(keras.utils.PyDataset):
    """({"features", "input_mask"}, label_ids) batches from arrays that may be memory maps.

    Only the rows of the current batch are read from disk. With `seed`, the
    order is reshuffled after every epoch; without, rows keep their order
    (for prediction, where outputs must line up with the windows).
    """

    def __init__(self, features: np.ndarray, input_mask: np.ndarray,
                 label_ids: np.ndarray | None = None, batch_size: int = 32,
                 seed: int | None = None):
        super().__init__()
        if len(features) != len(input_mask) or (label_ids is not None
                                                and len(label_ids) != len(features)):
            raise ValueError("features, input_mask and label_ids differ in length")
        self.features, self.input_mask, self.label_ids = features, input_mask, label_ids
        self.batch_size = batch_size
        self._order = np.arange(len(features))
        self._generator = np.random.default_rng(seed) if seed is not None else None
        self.on_epoch_end()

    def __len__(self) -> int:
        return math.ceil(len(self._order) / self.batch_size)

    def __getitem__(self, index: int):
        rows = np.sort(self._order[index * self.batch_size:(index + 1) * self.batch_size])
        inputs = {"features": np.asarray(self.features[rows], dtype=np.float32),
                  "input_mask": np.asarray(self.input_mask[rows])}
        return (inputs,) if self.label_ids is None else (inputs, self.label_ids[rows])

    def on_epoch_end(self) -> None:
        if self._generator is not None:
            self._generator.shuffle(self._order)


@keras.saving.register_keras_serializable(package="bert")
class FeatureTagger(GuardedSteps, ConfigurableModel):
    """Stacked BiLSTMs over fixed feature vectors, then a linear layer to tag logits.

    Inputs: {"features": [batch, seq, width] float, "input_mask": [batch,
    seq]}; output: float32 logits [batch, seq, num_labels]. The mask keeps
    padding out of both LSTM directions: the backward LSTM starts at each
    window's last real token, not at the padding after it. Trained with
    `fit(x, label_ids)`, where the loss is `tagging_loss`: label -1 (sub-
    tokens past a word's first, [CLS]/[SEP], padding, context) counts nothing.
    `fit` stops at the first step whose loss or gradients are not finite,
    without applying it, and raises `FitDiverged` (`training.divergence`), as
    the fine-tuning models' `fit` does.

    Args:
      num_labels: tags.
      lstm_units: units per direction of each BiLSTM.
      num_lstm_layers: stacked BiLSTMs.
      dropout: dropout on each BiLSTM's output.
      **kwargs: Keras model arguments (`name`, `dtype`).

    Examples:

    >>> tagger = FeatureTagger(num_labels=9, lstm_units=64)
    >>> features = np.zeros((2, 16, 3072), np.float32)  # e.g. four layers concatenated
    >>> tagger({"features": features, "input_mask": np.ones((2, 16), np.int32)}).shape
    TensorShape([2, 16, 9])
    """

    def __init__(self, num_labels: int, lstm_units: int = 768, num_lstm_layers: int = 2,
                 dropout: float = 0.1, **kwargs):
        kwargs.setdefault("name", "feature_tagger")
        super().__init__(**kwargs)
        num_labels = check_width("num_labels", num_labels)
        lstm_units = check_width("lstm_units", lstm_units)
        num_lstm_layers = check_integer("num_lstm_layers", num_lstm_layers)
        dropout = check_number("dropout", dropout, 0.0, 1.0, below=True)
        self.keep_settings(num_labels=num_labels, lstm_units=lstm_units,
                           num_lstm_layers=num_lstm_layers)
        self.dropout_rate = dropout
        self.dropout = Dropout(dropout, dtype=self.dtype_policy)
        self.bilstms = [keras.layers.Bidirectional(
            keras.layers.LSTM(lstm_units, return_sequences=True, dtype=self.dtype_policy),
            name=f"bilstm_{index}", dtype=self.dtype_policy)
            for index in range(num_lstm_layers)]
        self.classifier = keras.layers.Dense(num_labels, name="classifier", dtype=self.dtype_policy)

    def call(self, inputs: dict, training=None):
        mask = ops.cast(inputs["input_mask"], "bool")
        hidden = self.dropout(inputs["features"], training=training)
        for bilstm in self.bilstms:
            hidden = self.dropout(bilstm(hidden, mask=mask, training=training),
                                  training=training)
        return ops.cast(self.classifier(hidden), "float32")

    def compile(self, *args, **kwargs):
        super().compile(*args, **kwargs)
        self._add_step_guard()

    def predict(self, x, batch_size=None, **kwargs):
        """Keras `predict`; a dict of features is checked first, and no rows give no logits."""
        rows = self._checked_rows(x, "predict")
        if rows == 0:
            return np.zeros((0, np.shape(x["features"])[1], self.num_labels), np.float32)
        return super().predict(x, batch_size=batch_size, **kwargs)

    def fit(self, x=None, y=None, *args, callbacks=None, **kwargs):
        """Keras `fit` on the guarded step, a dict of features and its label ids checked first:
        a non-finite step is not applied, and ends it with `FitDiverged` naming that step, the
        weights kept from before it."""
        self._check_fit_inputs(x, y)
        if self._step_guard is None:  # not compiled: Keras says so
            return super().fit(x, y, *args, callbacks=callbacks, **kwargs)
        callbacks = [*(callbacks or []), self._step_guard.start()]
        try:
            history = super().fit(x, y, *args, callbacks=callbacks, **kwargs)
        finally:
            stopped = self._step_guard.finish()
        if stopped is not None:
            raise stopped
        return history

    def _check_fit_inputs(self, x, y) -> None:
        """Refuses, before Keras, no windows and label ids that are not one in [-1, labels)
        per position."""
        rows = self._checked_rows(x, "fit")
        if rows == 0:
            raise ValueError("x holds no windows: fit needs at least one")
        if rows is not None:
            labels = np.asarray(y) if y is not None else None
            if labels is None or labels.shape != np.shape(x["input_mask"]) or not np.issubdtype(
                    labels.dtype, np.integer) or not (
                    (labels >= -1) & (labels < self.num_labels)).all():
                raise ValueError(f"y must hold a label id in [-1, {self.num_labels}) per "
                                 f"position, shaped like x's input_mask "
                                 f"{np.shape(x['input_mask'])}")

    def _checked_rows(self, x, call: str) -> int | None:
        """The windows in a dict `x` of "features" [N, seq, width] and "input_mask" [N, seq],
        checked in Python against each other and the width the BiLSTM was built for; None
        for any other input (a `FeatureBatches`), which Keras reads as it comes."""
        if not isinstance(x, dict):
            return None
        if set(x) != {"features", "input_mask"}:
            raise ValueError(f"{call}: x must hold features and input_mask, got "
                             f"{', '.join(sorted(map(str, x))) or 'nothing'}")
        features, mask = np.asarray(x["features"]), np.asarray(x["input_mask"])
        width = self.bilstms[0].forward_layer.cell.kernel.shape[0] if self.built else None
        if features.ndim != 3 or mask.shape != features.shape[:2] or (
                width is not None and features.shape[2] != width):
            raise ValueError(f"{call}: x's features must be [windows, seq, "
                             f"{width or 'width'}] and its input_mask [windows, seq], got "
                             f"{features.shape} and {mask.shape}")
        if not np.issubdtype(features.dtype, np.floating) or not np.isfinite(features).all():
            raise ValueError(f"{call}: x's features must be finite floats")
        return len(features)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """`tagging_loss` on `y` = label_ids: the mean over labelled positions only."""
        del x, sample_weight, training
        return tagging_loss({"label_ids": y}, y_pred)["loss"]

    def get_config(self) -> dict:
        # `dropout` names the layer, so the rate it was built with is kept under another name.
        return {**super().get_config(), "dropout": self.dropout_rate}
