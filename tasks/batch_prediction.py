"""A fine-tuned model's outputs for a task's feature arrays, batch by batch, in order.

The tasks keep their features as numpy arrays in a dict (`input_ids`,
`input_mask`, `segment_ids` plus the labels); prediction feeds them through
one traced function per model, the last batch padded to the batch size, so
that every batch of every call reuses it instead of tracing a new shape.
"""

from __future__ import annotations

import weakref

import keras
import numpy as np
import tensorflow as tf

from core.record_schema import ENCODER_INPUTS

_PREDICT_FUNCTIONS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def predict(model: keras.Model, arrays: dict[str, np.ndarray], batch_size: int,
            keys: tuple[str, ...] = ENCODER_INPUTS):
    """The model's outputs for every row of `arrays`, in order, as numpy (dicts kept).

    Args:
      model: the model, called with `training=False`.
      arrays: the features, one row per example; `keys` are fed.
      batch_size: rows per call; the last batch is padded to it.
      keys: the arrays the model reads.

    Examples:

    >>> logits = predict(model, {"input_ids": ids, "input_mask": mask, "segment_ids": segments}, 32)
    """
    if model not in _PREDICT_FUNCTIONS:
        _PREDICT_FUNCTIONS[model] = tf.function(lambda features: model(features, training=False))
    call = _PREDICT_FUNCTIONS[model]
    count = len(arrays[keys[0]])
    if not count:
        raise ValueError("nothing to predict: no examples")
    outputs = []
    for start in range(0, count, batch_size):
        batch = {key: arrays[key][start:start + batch_size] for key in keys}
        rows = len(batch[keys[0]])
        if rows < batch_size:
            batch = {key: np.concatenate([value, np.zeros((batch_size - rows, *value.shape[1:]),
                                                          value.dtype)])
                     for key, value in batch.items()}
        result = call({key: tf.constant(value) for key, value in batch.items()})
        outputs.append(tf.nest.map_structure(lambda tensor: tensor.numpy()[:rows], result))
    return tf.nest.map_structure(lambda *parts: np.concatenate(parts), *outputs)
