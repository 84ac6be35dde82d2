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

Every argument is checked in Python before Keras builds a dataset: counts,
rates, labels (by the task's hooks), sample weights, empty inputs. An
empty input predicts an empty result; `fit` and `evaluate` refuse it. A
step whose loss or gradients are not finite ends `fit` with `FitDiverged`
and leaves the weights from before it (`modeling.divergence`). Texts cut
at `sequence_length` are counted and logged once per call
(`modeling.truncation`).
"""

from __future__ import annotations

import math
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from core.arguments import check_integer, check_number, is_number
from modeling import truncation
from modeling.divergence import StepGuard, guarded_train_step
from core.record_schema import ENCODER_INPUTS
from modeling.labels import as_list
from modeling.optimization import create_optimizer

AUTO = "auto"
DEFAULT_BATCH_SIZE = 32  # Keras' own default for arrays


class TextTaskMixin:
    """Raw-text plumbing shared by the task models; subclasses give the task's hooks.

    Hooks: `_text_columns(x, y, argument)` checks raw Python inputs and
    turns them into tensors for `from_tensor_slices`; `_preprocess_batch(x,
    y, sample_weight)` maps a batch of them to model inputs;
    `_truncation(inputs)` says what the window cuts; `_empty_outputs(shape)`
    is `predict`'s answer to no examples; `default_loss()` /
    `default_metrics()`.
    """

    preprocessor: keras.layers.Layer | None

    def compile(self, optimizer: Any = AUTO, loss: Any = AUTO, metrics: Any = AUTO, *,
                learning_rate: float = 5e-5, warmup_proportion: float = 0.1, **kwargs: Any):
        """Keras `compile`, where "auto" stands for the paper's fine-tuning choice.

        With `optimizer="auto"`, `fit` builds the original AdamW with its
        warm-up and decay over the steps it is about to run.
        """
        learning_rate = check_number("learning_rate", learning_rate, 0.0, above=True)
        warmup_proportion = check_number("warmup_proportion", warmup_proportion, 0.0, 1.0)
        self._plan_schedule = isinstance(optimizer, str) and optimizer == AUTO
        self._recipe = {"learning_rate": learning_rate, "warmup_proportion": warmup_proportion}
        if self._plan_schedule:  # replaced by `fit`; `evaluate` needs none
            optimizer = create_optimizer(learning_rate, num_train_steps=1, num_warmup_steps=0)
        kwargs.setdefault("weighted_metrics", self.default_weighted_metrics())
        self._compile_args = {"loss": self.default_loss() if loss == AUTO else loss,
                              "metrics": self.default_metrics() if metrics == AUTO else metrics,
                              **kwargs}
        super().compile(optimizer=optimizer, **self._compile_args)
        if getattr(self, "_step_guard", None) is None:  # the training step's record
            with self.distribute_strategy.scope():
                self._step_guard = StepGuard()

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
        raise ValueError(f"{type(self).__name__} has no default loss: compile it with "
                         "loss=... (a Keras loss on its outputs)")

    def default_metrics(self) -> list:
        return []

    def default_weighted_metrics(self) -> list:
        return []

    def fit(self, x=None, y=None, batch_size=None, epochs=1, sample_weight=None,
            validation_data=None, steps_per_epoch=None, initial_epoch=0, shuffle=True,
            **kwargs):
        """Keras `fit`; stops with `FitDiverged` at a step whose loss or gradients are not
        finite, the model keeping the weights from before that step."""
        batch_size = _optional_count("batch_size", batch_size)
        epochs = check_integer("epochs", epochs)
        steps_per_epoch = _optional_count("steps_per_epoch", steps_per_epoch)
        initial_epoch = check_integer("initial_epoch", initial_epoch, minimum=0)
        if initial_epoch >= epochs:
            raise ValueError(f"initial_epoch={initial_epoch} is not below epochs={epochs}: "
                             "fit would train nothing (epochs is the index of the epoch to "
                             "stop before, counted from 0)")
        _check_examples(x, "x", "fit needs at least one")
        if is_raw_text(x):
            if kwargs.get("validation_split"):
                raise ValueError("validation_split splits arrays, not raw text: pass "
                                 "validation_data=(texts, labels)")
            # Shuffled here, as Keras shuffles arrays: it leaves datasets as they come.
            x = self.text_dataset(x, y, sample_weight, batch_size,
                                  shuffle=shuffle and not isinstance(x, tf.data.Dataset),
                                  call="fit", needs_labels=True)
            y = sample_weight = batch_size = None
            shuffle = False
        validation_data = self._validation_dataset(validation_data, batch_size)
        if getattr(self, "_plan_schedule", False):
            steps = _steps_per_epoch(x, batch_size, steps_per_epoch) * (epochs - initial_epoch)
            learning_rate = self._recipe["learning_rate"]
            warmup = int(steps * self._recipe["warmup_proportion"])
            super().compile(optimizer=create_optimizer(learning_rate, steps, warmup),
                            **self._compile_args)
        guard = getattr(self, "_step_guard", None)
        if guard is None:
            raise ValueError(f"{self.name} is not compiled: call compile() (the paper's "
                             "recipe) or compile(optimizer=..., loss=...) before fit")
        callbacks = [*(kwargs.pop("callbacks", None) or []), guard.start()]
        try:
            history = super().fit(
                x, y, batch_size=batch_size, epochs=epochs, sample_weight=sample_weight,
                validation_data=validation_data, steps_per_epoch=steps_per_epoch,
                initial_epoch=initial_epoch, shuffle=shuffle, callbacks=callbacks, **kwargs)
        finally:
            diverged = guard.finish()
        if diverged is not None:
            raise diverged
        return history

    def train_step(self, data):
        guard = getattr(self, "_step_guard", None)
        if guard is None:  # compiled by keras.Model.compile, not by this class
            return super().train_step(data)
        return guarded_train_step(self, data, guard)

    def evaluate(self, x=None, y=None, batch_size=None, sample_weight=None, **kwargs):
        batch_size = _optional_count("batch_size", batch_size)
        _check_examples(x, "x", "evaluate needs at least one")
        if is_raw_text(x):
            x = self.text_dataset(x, y, sample_weight, batch_size, call="evaluate",
                                  needs_labels=True)
            y = sample_weight = batch_size = None
        return super().evaluate(x, y, batch_size=batch_size, sample_weight=sample_weight,
                                **kwargs)

    def predict(self, x, batch_size=None, **kwargs):
        """Keras `predict`; no examples give an empty result of the outputs' shape."""
        batch_size = _optional_count("batch_size", batch_size)
        if x is None:
            raise ValueError("x is None: give the examples to predict")
        if example_count(x) == 0:
            return self._empty_outputs(self._input_shape(x))
        if is_raw_text(x):
            x, batch_size = self.text_dataset(x, batch_size=batch_size, call="predict"), None
        return super().predict(x, batch_size=batch_size, **kwargs)

    def text_dataset(self, x, y=None, sample_weight=None, batch_size=None,
                     shuffle: bool = False, call: str = "predict", argument: str = "x",
                     needs_labels: bool = False) -> tf.data.Dataset:
        """Raw inputs (or a batched dataset of them) as a dataset of model inputs.

        `shuffle` reorders the examples anew each epoch (Python inputs only).
        `call` and `argument` name the method and argument in messages and in
        the count of texts cut at `sequence_length`; `needs_labels` refuses
        Python inputs without `y`.
        """
        self._require_preprocessor()
        if isinstance(x, tf.data.Dataset):
            dataset = x
        else:
            where = "" if argument == "x" else f"{argument}: "
            if needs_labels and y is None:
                raise ValueError(f"{where}{call} on raw text needs the labels: give y")
            try:
                inputs, labels = self._text_columns(x, y, "y" if argument == "x" else argument)
            except (TypeError, ValueError) as error:
                if str(error).startswith(where):  # the label checks name the argument
                    raise
                raise type(error)(f"{where}{error}") from None
            count = _rows(inputs)
            if count == 0:
                raise ValueError(f"{where}{argument} holds no examples: {call} needs at least "
                                 "one")
            weights = _sample_weights(sample_weight, argument)
            if labels is not None and _rows(labels) != count:
                raise ValueError(f"{where}x holds {count} examples but y {_rows(labels)} "
                                 "labels: give one label per example")
            if weights is not None and _rows(weights) != count:
                raise ValueError(f"{where}x holds {count} examples but sample_weight "
                                 f"{_rows(weights)} weights: give one weight per example")
            columns = tuple(column for column in (inputs, labels, weights)
                            if column is not None)
            truncation.report(call if argument == "x" else f"{call} {argument}",
                              self._truncation(inputs))
            dataset = tf.data.Dataset.from_tensor_slices(columns)
            if shuffle:
                dataset = dataset.shuffle(count, reshuffle_each_iteration=True)
            dataset = dataset.ragged_batch(batch_size or DEFAULT_BATCH_SIZE)
        return dataset.map(self._preprocess_batch, num_parallel_calls=tf.data.AUTOTUNE
                           ).prefetch(tf.data.AUTOTUNE)

    def _validation_dataset(self, validation_data, batch_size: int | None):
        """`validation_data` as `fit` hands it to Keras: raw text becomes a dataset."""
        if validation_data is None:
            return None
        if isinstance(validation_data, tf.data.Dataset):
            return (self.text_dataset(validation_data, batch_size=batch_size)
                    if is_raw_text(validation_data) else validation_data)
        if not isinstance(validation_data, (tuple, list)) or len(validation_data) not in (2, 3):
            raise ValueError("validation_data must be (x, y), (x, y, sample_weight) or a "
                             f"dataset, got {type(validation_data).__name__}"
                             + (f" of {len(validation_data)} items"
                                if isinstance(validation_data, (tuple, list)) else ""))
        _check_examples(validation_data[0], "validation_data", "there is nothing to validate on")
        if not is_raw_text(validation_data[0]):
            return validation_data
        return self.text_dataset(*validation_data, batch_size=batch_size, call="fit",
                                 argument="validation_data", needs_labels=True)

    def _require_preprocessor(self) -> None:
        if self.preprocessor is None:
            raise ValueError(f"{self.name} has no preprocessor, so it takes packed inputs "
                             f"({', '.join(ENCODER_INPUTS)}); "
                             "build it with from_pretrained(..., sequence_length=N) to feed text")

    def _input_shape(self, x) -> tuple:
        """The packed input shape `x` stands for: its own, or [N, sequence_length] for text."""
        if isinstance(x, dict):
            return tuple(np.shape(next(iter(x.values()))))
        self._require_preprocessor()
        return example_count(x), self.preprocessor.sequence_length

    def _text_columns(self, x, y, argument: str) -> tuple:
        """(inputs, labels or None) as tensors, or tuples of them, of one row per example."""
        raise ValueError(f"{type(self).__name__} takes packed inputs only, not raw text")

    def _preprocess_batch(self, x, y=None, sample_weight=None):
        raise NotImplementedError

    def _truncation(self, inputs) -> str | None:
        """What the window of `sequence_length` tokens cuts from `inputs`; None for nothing."""
        return None

    def _empty_outputs(self, input_shape: tuple):
        """`predict`'s result for packed inputs of `input_shape`, which has no rows."""
        raise ValueError(f"x holds no examples: {type(self).__name__} has nothing to predict")


def is_raw_text(x) -> bool:
    """Whether `x` holds strings (or a dataset whose inputs are strings), not packed ids.

    Lists are judged by their first string or number, however deeply nested,
    so a batch of sentences may start with an empty one.
    """
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
        leaf = _first_leaf(x)
        return isinstance(leaf, (str, bytes)) or (leaf is None and _nested(x))
    return False


def example_count(x) -> int | None:
    """How many examples `x` holds, where Python can tell without reading a dataset.

    A tuple of sequences is a pair of text columns; a dict holds packed arrays.
    """
    if isinstance(x, dict):
        return len(next(iter(x.values()))) if x else 0
    if isinstance(x, tuple) and x and all(_is_sequence(column) for column in x):
        return len(x[0])
    if isinstance(x, (list, tuple, np.ndarray)) or (
            isinstance(x, (tf.Tensor, tf.RaggedTensor)) and x.shape.rank):
        return len(x)
    return None


def _first_leaf(x):
    """The first item of nested lists and tuples that is neither, or None if all are empty."""
    for item in x:
        leaf = _first_leaf(item) if isinstance(item, (list, tuple)) else item
        if leaf is not None:
            return leaf
    return None


def _nested(x) -> bool:
    """A list of (empty) lists: sentences without words, still raw text for a tagger."""
    return bool(x) and all(isinstance(item, (list, tuple)) for item in x)


def _is_sequence(column) -> bool:
    return isinstance(column, (list, tuple, np.ndarray)) or (
        isinstance(column, (tf.Tensor, tf.RaggedTensor)) and bool(column.shape.rank))


def _check_examples(x, argument: str, needed: str) -> None:
    """Refuses a missing or empty `x` before Keras meets it (its error: `pop from an empty set`).

    `needed` ends the message: why no examples will not do.
    """
    if x is None:
        raise ValueError(f"{argument} is None: {needed}")
    if example_count(x) == 0:
        raise ValueError(f"{argument} holds no examples: {needed}")


def _optional_count(name: str, value) -> int | None:
    return None if value is None else check_integer(name, value)


def _rows(column) -> int:
    """The number of examples in a column (or a pair of columns) of tensors."""
    first = tf.nest.flatten(column, expand_composites=False)[0]
    return int(first.nrows()) if isinstance(first, tf.RaggedTensor) else int(first.shape[0])


def _sample_weights(sample_weight, argument: str) -> tf.Tensor | None:
    """Finite weights >= 0 as a float32 column; None when none is given."""
    if sample_weight is None:
        return None
    name = "sample_weight" if argument == "x" else f"{argument}'s sample weights"
    weights = as_list(sample_weight, name)
    for index, weight in enumerate(weights):
        if not is_number(weight) or weight < 0:
            raise ValueError(f"{name}: example {index} has weight {weight!r}; weights must be "
                             "finite numbers >= 0")
    return tf.constant(weights, tf.float32)


def _steps_per_epoch(x, batch_size: int | None, steps_per_epoch: int | None) -> int:
    """How many batches one epoch of `x` has: the schedule's length needs it before fitting."""
    if steps_per_epoch:
        return steps_per_epoch
    if isinstance(x, tf.data.Dataset):
        count = int(x.cardinality())
        if count < 0:
            raise ValueError("compile() chose the warm-up and decay schedule, whose length "
                             "fit cannot tell from a dataset of unknown size: pass "
                             "steps_per_epoch, or compile with your own optimizer")
        if count == 0:
            raise ValueError("x is an empty dataset: fit needs at least one batch")
        return count
    first = next(iter(x.values())) if isinstance(x, dict) else x
    return math.ceil(len(first) / (batch_size or DEFAULT_BATCH_SIZE))
