"""`predict` on raw text from Python, batch by batch, without a tf.data pipeline per call.

Keras' `predict` on a dataset that maps the preprocessor over its batches
traces that map and optimizes the pipeline's graph at every call: about a
second of CPU before the first row on a small model, for any number of
texts. Here the preprocessor is traced once per model (`TracedPreprocessor`)
and each batch goes through Keras' own compiled `predict_function`
(`predict_on_batch`), so a second call costs what its rows cost. The
batches, the order and the numbers are those of the dataset path, which
stays for what it alone serves: datasets, callbacks, `steps`, several
replicas.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import keras
import numpy as np
import tensorflow as tf


def serves_in_batches(model: keras.Model, x: Any, kwargs: dict) -> bool:
    """Whether `predict(x, **kwargs)` can take this path: Python data, no options beyond
    `verbose`, one replica."""
    return (not isinstance(x, tf.data.Dataset) and set(kwargs) <= {"verbose"}
            and model.distribute_strategy.num_replicas_in_sync == 1)


def predict_in_batches(model: keras.Model, preprocess: Callable, columns: tuple, count: int,
                       batch_size: int, verbose: Any = "auto"):
    """`model`'s outputs for the `count` rows of `columns`, `batch_size` rows a batch.

    Args:
      model: a task model whose `predict_on_batch` takes `preprocess`'s features.
      preprocess: a batch of columns to the model's features (traced once, reused).
      columns: the checked inputs (`TextTask._text_columns_checked`), tensors.
      count: their rows.
      batch_size: rows per batch.
      verbose: Keras' `verbose`: 0 silent, otherwise a progress bar.
    """
    batches = math.ceil(count / batch_size)
    progress = keras.utils.Progbar(batches, verbose=1 if verbose == "auto" else verbose) \
        if verbose != 0 else None
    outputs = []
    for start in range(0, count, batch_size):
        batch = tf.nest.map_structure(lambda column: column[start:start + batch_size], columns)
        outputs.append(model.predict_on_batch(preprocess(*batch)))
        if progress is not None:
            progress.add(1)
    return keras.tree.map_structure(_concatenated, *outputs)


class TracedPreprocessor:
    """A model's preprocessing of a batch, as one `tf.function` kept while the preprocessor is.

    A plain object, not a `tf.function` attribute of the model, so that
    `tf.saved_model.save` does not take it for one of the model's functions.

    Args:
      preprocess_batch: the model's method from a batch of columns to its features.
      preprocessor: the preprocessor that method calls, so a model given another is traced
        again.
    """

    def __init__(self, preprocess_batch: Callable, preprocessor: Any):
        self.function = tf.function(preprocess_batch, reduce_retracing=True)
        self.preprocessor = preprocessor

    def serves(self, preprocessor: Any) -> bool:
        return preprocessor is self.preprocessor


def _concatenated(*parts):
    if any(isinstance(part, tf.RaggedTensor) for part in parts):
        return tf.concat(parts, axis=0)
    return np.concatenate(parts, axis=0)
