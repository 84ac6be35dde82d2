"""`compile`, `fit`, `evaluate` and `predict` on raw text for the fine-tuning models.

A task model that owns a `preprocessor` (built with a `sequence_length`)
takes strings wherever Keras takes data, as keras-hub's tasks do: raw inputs
become a `tf.data` pipeline that batches them and maps the preprocessor over
each batch, so tokenization runs in the input pipeline, beside the training
step, and the model itself keeps computing on packed ids (a SavedModel or a
runner feeds those directly). Packed dicts and datasets of them pass through
unchanged.

`compile()` without arguments chooses the paper's fine-tuning recipe: the
original AdamW (decay 0.01, epsilon 1e-6, no bias correction, global-norm
clipping at 1.0), learning rate 5e-5 with linear warm-up over the first 10%
of the steps, then linear decay to 0. The number of steps is known only
when `fit` sees the data, so each `fit` call plans its own schedule there: a
`fit` is one fine-tuning run, warm-up included.
"""

from __future__ import annotations

import math
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from modeling.inputs import ENCODER_INPUTS
from modeling.optimization import create_optimizer

AUTO = "auto"
DEFAULT_BATCH_SIZE = 32  # Keras' own default for arrays


class TextTaskMixin:
    """Raw-text plumbing shared by the task models; subclasses give the task's hooks.

    Hooks: `_text_columns(x, y)` turns raw Python inputs into tensors for
    `from_tensor_slices`; `_preprocess_batch(x, y, sample_weight)` maps a
    batch of them to model inputs; `default_loss()` / `default_metrics()`.
    """

    preprocessor: keras.layers.Layer | None

    def compile(self, optimizer: Any = AUTO, loss: Any = AUTO, metrics: Any = AUTO, *,
                learning_rate: float = 5e-5, warmup_proportion: float = 0.1, **kwargs: Any):
        """Keras `compile`, where "auto" stands for the paper's fine-tuning choice.

        With `optimizer="auto"`, `fit` builds the original AdamW with its
        warm-up and decay over the steps it is about to run.
        """
        if not 0 <= warmup_proportion <= 1:
            raise ValueError(f"warmup_proportion must be in [0, 1], got {warmup_proportion}")
        self._plan_schedule = isinstance(optimizer, str) and optimizer == AUTO
        self._recipe = {"learning_rate": float(learning_rate),
                        "warmup_proportion": float(warmup_proportion)}
        if self._plan_schedule:  # replaced by `fit`; `evaluate` needs none
            optimizer = create_optimizer(learning_rate, num_train_steps=1, num_warmup_steps=0)
        kwargs.setdefault("weighted_metrics", self.default_weighted_metrics())
        self._compile_args = {"loss": self.default_loss() if loss == AUTO else loss,
                              "metrics": self.default_metrics() if metrics == AUTO else metrics,
                              **kwargs}
        super().compile(optimizer=optimizer, **self._compile_args)

    def get_compile_config(self) -> dict | None:
        # A planned schedule is saved as the plan, not as its placeholder or its last
        # run's length, so a reloaded model's next `fit` plans its own again.
        config = super().get_compile_config()
        if config is not None and getattr(self, "_plan_schedule", False):
            config.update(optimizer=AUTO, **self._recipe)
        return config

    def compile_from_config(self, config: dict) -> None:
        # Keras skips a custom `compile` when loading unless this is overridden.
        config = keras.saving.deserialize_keras_object(config)
        self.compile(**config)
        if self.built:
            self.optimizer.build(self.trainable_variables)

    def default_loss(self) -> keras.losses.Loss:
        raise NotImplementedError

    def default_metrics(self) -> list:
        return []

    def default_weighted_metrics(self) -> list:
        return []

    def fit(self, x=None, y=None, batch_size=None, epochs=1, sample_weight=None,
            validation_data=None, steps_per_epoch=None, initial_epoch=0, shuffle=True,
            **kwargs):
        if is_raw_text(x):
            # Shuffled here, as Keras shuffles arrays: it leaves datasets as they come.
            x = self.text_dataset(x, y, sample_weight, batch_size,
                                  shuffle=shuffle and not isinstance(x, tf.data.Dataset))
            y = sample_weight = batch_size = None
            shuffle = False
        if validation_data is not None and is_raw_text(validation_data[0]
                                                       if isinstance(validation_data, tuple)
                                                       else validation_data):
            validation_data = (self.text_dataset(validation_data, batch_size=batch_size)
                               if isinstance(validation_data, tf.data.Dataset)
                               else self.text_dataset(*validation_data, batch_size=batch_size))
        if getattr(self, "_plan_schedule", False):
            steps = _steps_per_epoch(x, batch_size, steps_per_epoch) * (epochs - initial_epoch)
            learning_rate = self._recipe["learning_rate"]
            warmup = int(steps * self._recipe["warmup_proportion"])
            super().compile(optimizer=create_optimizer(learning_rate, steps, warmup),
                            **self._compile_args)
        return super().fit(x, y, batch_size=batch_size, epochs=epochs,
                           sample_weight=sample_weight, validation_data=validation_data,
                           steps_per_epoch=steps_per_epoch, initial_epoch=initial_epoch,
                           shuffle=shuffle, **kwargs)

    def evaluate(self, x=None, y=None, batch_size=None, sample_weight=None, **kwargs):
        if is_raw_text(x):
            x = self.text_dataset(x, y, sample_weight, batch_size)
            y = sample_weight = batch_size = None
        return super().evaluate(x, y, batch_size=batch_size, sample_weight=sample_weight,
                                **kwargs)

    def predict(self, x, batch_size=None, **kwargs):
        if is_raw_text(x):
            x, batch_size = self.text_dataset(x, batch_size=batch_size), None
        return super().predict(x, batch_size=batch_size, **kwargs)

    def text_dataset(self, x, y=None, sample_weight=None, batch_size=None,
                     shuffle: bool = False) -> tf.data.Dataset:
        """Raw inputs (or a batched dataset of them) as a dataset of model inputs.

        `shuffle` reorders the examples anew each epoch (Python inputs only).
        """
        if self.preprocessor is None:
            raise ValueError(f"{self.name} has no preprocessor, so it takes packed inputs "
                             f"({', '.join(ENCODER_INPUTS)}); "
                             "build it with from_pretrained(..., sequence_length=N) to feed text")
        if isinstance(x, tf.data.Dataset):
            dataset = x
        else:
            weights = None if sample_weight is None else tf.convert_to_tensor(sample_weight)
            columns = tuple(column for column in (*self._text_columns(x, y), weights)
                            if column is not None)
            sizes = [int(tf.nest.flatten(column)[0].shape[0]) for column in columns]
            if len(set(sizes)) > 1:
                raise ValueError("inputs, labels and sample weights differ in length: "
                                 f"{', '.join(map(str, sizes))}")
            dataset = tf.data.Dataset.from_tensor_slices(columns)
            if shuffle:
                dataset = dataset.shuffle(sizes[0], reshuffle_each_iteration=True)
            dataset = dataset.ragged_batch(batch_size or DEFAULT_BATCH_SIZE)
        return dataset.map(self._preprocess_batch, num_parallel_calls=tf.data.AUTOTUNE
                           ).prefetch(tf.data.AUTOTUNE)

    def _text_columns(self, x, y) -> tuple:
        """(inputs, labels or None) as tensors, or tuples of them, of one row per example."""
        raise ValueError(f"{type(self).__name__} takes packed inputs only, not raw text")

    def _preprocess_batch(self, x, y=None, sample_weight=None):
        raise NotImplementedError


def is_raw_text(x) -> bool:
    """Whether `x` holds strings (or a dataset whose inputs are strings), not packed ids."""
    if isinstance(x, tf.data.Dataset):
        spec = x.element_spec
        spec = spec[0] if isinstance(spec, tuple) and len(spec) in (2, 3) and not all(
            getattr(part, "dtype", None) == tf.string for part in spec) else spec
        return all(getattr(part, "dtype", None) == tf.string for part in tf.nest.flatten(spec))
    if isinstance(x, (dict, type(None))):
        return False
    if isinstance(x, (str, bytes)):
        return True
    if isinstance(x, (tf.Tensor, tf.RaggedTensor)):
        return x.dtype == tf.string
    if isinstance(x, np.ndarray):
        return x.dtype.kind in "USO"
    if isinstance(x, (list, tuple)):
        return bool(x) and is_raw_text(x[0])
    return False


def _steps_per_epoch(x, batch_size: int | None, steps_per_epoch: int | None) -> int:
    """How many batches one epoch of `x` has: the schedule's length needs it before fitting."""
    if steps_per_epoch:
        return int(steps_per_epoch)
    if isinstance(x, tf.data.Dataset):
        count = int(x.cardinality())
        if count < 0:
            raise ValueError("compile() chose the warm-up and decay schedule, whose length "
                             "fit cannot tell from a dataset of unknown size: pass "
                             "steps_per_epoch, or compile with your own optimizer")
        return count
    first = next(iter(x.values())) if isinstance(x, dict) else x
    return math.ceil(len(first) / (batch_size or DEFAULT_BATCH_SIZE))
