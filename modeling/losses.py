"""The losses, each once: the paper's pre-training terms and every task's fine-tuning loss.

The runners' training loop calls these on a batch's features dict and the
model's outputs (`loss_fn(features, outputs) -> {"loss": ..., ...}`); the
models' own `compute_loss` and `default_loss` read the same definitions, so
`fit` minimizes what the runners minimize. Cross-entropies are computed in
float32 under every dtype policy.
"""

from __future__ import annotations

from collections.abc import Sequence

import keras
import numpy as np
from keras import ops

from network.layers import fast_paths


def cross_entropy(labels, logits):
    """Per-example softmax cross-entropy from logits, in float32 under every policy."""
    return fast_paths.cross_entropy(labels, ops.cast(logits, "float32"))


def masked_lm_loss(logits, masked_lm_ids, masked_lm_weights):
    """sum(weights * CE) / (sum(weights) + 1e-5), as the original computed it.

    The weights are 0 at the padding slots of `masked_lm_positions`, so this
    is the mean over real predictions; the 1e-5 keeps a batch without any
    prediction finite.
    """
    weights = ops.cast(masked_lm_weights, "float32")
    per_position = cross_entropy(masked_lm_ids, logits)
    return ops.sum(weights * per_position) / (ops.sum(weights) + 1e-5)


def next_sentence_loss(logits, next_sentence_labels):
    """Mean cross-entropy of the IsNext (0) / NotNext (1) classifier."""
    labels = ops.reshape(next_sentence_labels, (-1,))
    return ops.mean(cross_entropy(labels, logits))


def next_token_targets(input_ids, input_mask):
    """Targets and weights for predicting token i+1 at position i, real tokens only."""
    mask = ops.cast(input_mask, "float32")
    return input_ids[:, 1:], mask[:, 1:] * mask[:, :-1]


def left_to_right_lm_loss(logits, input_ids, input_mask):
    """Mean next-token cross-entropy over real positions that have a next real token."""
    targets, weights = next_token_targets(input_ids, input_mask)
    per_position = cross_entropy(targets, logits[:, :-1])
    return ops.sum(weights * per_position) / ops.maximum(ops.sum(weights), 1.0)


@keras.saving.register_keras_serializable(package="bert")
class HalfCrossEntropy(keras.losses.Loss):
    """Half the sparse cross-entropy of logits: the start and end outputs' halves add up
    to the original run_squad.py's span loss, their mean (`span_loss`)."""

    def call(self, y_true, y_pred):
        return 0.5 * keras.losses.sparse_categorical_crossentropy(y_true, y_pred,
                                                                  from_logits=True)


def classification_loss(features: dict, logits) -> dict:
    """Mean cross-entropy against `label_ids` (also multiple choice: one label per row)."""
    return {"loss": ops.mean(cross_entropy(features["label_ids"], logits))}


def regression_loss(features: dict, scores) -> dict:
    """Mean squared error against float `label_ids` (STS-B)."""
    return {"loss": ops.mean(ops.square(scores - ops.cast(features["label_ids"], "float32")))}


def span_loss(features: dict, outputs: dict) -> dict:
    """Mean of the start and end cross-entropies, as the original run_squad.py."""
    start = ops.mean(cross_entropy(features["start_positions"], outputs["start_logits"]))
    end = ops.mean(cross_entropy(features["end_positions"], outputs["end_logits"]))
    return {"loss": (start + end) / 2.0, "start_loss": start, "end_loss": end}


def tagging_loss(features: dict, logits) -> dict:
    """Mean cross-entropy over labelled positions; `label_ids` < 0 (sub-tokens, padding,
    context) carry no loss, the paper's "X" positions."""
    labels = features["label_ids"]
    weights = ops.cast(labels >= 0, "float32")
    per_token = cross_entropy(ops.maximum(labels, 0), logits)
    return {"loss": ops.sum(per_token * weights) / ops.maximum(ops.sum(weights), 1.0)}


def multi_label_loss(features: dict, logits) -> dict:
    """Mean binary cross-entropy of each label's sigmoid against the multi-hot `label_ids`:
    the runners' loss for a multi-label classifier, Keras' `BinaryCrossentropy(from_logits=True)`.

    Args:
      features: the batch, whose `label_ids` are [batch, num_labels] 0/1 floats.
      logits: the classifier's [batch, num_labels] outputs.

    Examples:

    >>> multi_label_loss({"label_ids": np.array([[1.0, 0.0]])}, np.array([[2.0, -2.0]]))
    {'loss': <tf.Tensor: shape=(), dtype=float32, numpy=0.126928>}
    """
    targets = ops.cast(features["label_ids"], "float32")
    per_label = ops.binary_crossentropy(targets, ops.cast(logits, "float32"), from_logits=True)
    return {"loss": ops.mean(per_label)}


def weighted_classification_loss(weights: Sequence[float]):
    """The classification loss with each example's cross-entropy times its class's weight,
    averaged over the batch (as Keras' `class_weight`)."""
    table = np.asarray(weights, dtype=np.float32)

    def loss(features: dict, logits) -> dict:
        labels = features["label_ids"]
        per_example = cross_entropy(labels, logits)
        scale = ops.take(ops.convert_to_tensor(table), ops.cast(labels, "int32"))
        return {"loss": ops.mean(per_example * ops.cast(scale, per_example.dtype))}

    return loss

